#include "lab/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvp {
namespace {

constexpr double kW = 900, kH = 320, kLeft = 70, kRight = 320, kTop = 34, kBottom = 44;
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};

std::string header(const std::string& title, const std::string& cls) {
  return fmt::format(
      "<svg class=\"chart {}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "role=\"img\" aria-label=\"{}\">\n<text x=\"{}\" y=\"20\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
      cls, kW, kH, kW, kH, html_escape(title), kLeft, html_escape(title));
}

std::string legend(const std::vector<Series>& series) {
  std::string s;
  for (size_t i = 0; i < series.size(); ++i) {
    const double y = kTop + 14 + 18 * double(i);
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
                     "<text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text>\n",
                     kW - kRight + 10, y - 10, kColors[i % 8], kW - kRight + 26, y, html_escape(series[i].name));
  }
  return s;
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    switch (c) {
      case '&': r += "&amp;"; break;
      case '<': r += "&lt;"; break;
      case '>': r += "&gt;"; break;
      case '"': r += "&quot;"; break;
      default: r += c;
    }
  }
  return r;
}

std::string svg_line_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                           const std::vector<Series>& series, bool log_y) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  auto ty = [&](double y) { return log_y ? std::log10(y) : y; };
  for (const auto& s : series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (log_y && !(s.y[i] > 0)) continue;
      if (!std::isfinite(s.y[i])) continue;
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, ty(s.y[i]));
      y1 = std::max(y1, ty(s.y[i]));
    }
  std::string out = header(title, log_y ? "line log-y" : "line");
  if (!std::isfinite(x0)) {
    out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\">no data</text>\n</svg>\n", kLeft, kH / 2);
    return out;
  }
  if (log_y) {
    y0 = std::floor(y0);
    y1 = std::max(std::ceil(y1), y0 + 1);
  } else if (y1 <= y0) {
    y1 = y0 + 1;
  }
  if (x1 <= x0) x1 = x0 + 1;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double v) { return kTop + ph - (v - y0) / (y1 - y0) * ph; };
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\n", kLeft,
                     kTop, pw, ph);
  // y ticks: decades on a log axis, 5 even ticks otherwise.
  const int ticks = log_y ? int(y1 - y0) : 4;
  for (int t = 0; t <= ticks; ++t) {
    const double v = y0 + (y1 - y0) * t / ticks;
    const std::string label = log_y ? fmt::format("1e{}", int(std::lround(v))) : fmt::format("{:.3g}", v);
    out += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#eee\"/>"
                       "<text x=\"{}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"end\">{}</text>\n",
                       kLeft, kLeft + pw, py(v), py(v), kLeft - 4, py(v) + 3, label);
  }
  out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{:.4g}</text>"
                     "<text x=\"{}\" y=\"{}\" font-size=\"11\">{:.4g}</text>\n",
                     kLeft + pw, kTop + ph + 14, x1, kLeft, kTop + ph + 14, x0);
  out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}</text>\n", kLeft + pw / 2,
                     kH - 8, html_escape(x_label));
  out += fmt::format("<text x=\"14\" y=\"{}\" font-size=\"11\" transform=\"rotate(-90 14 {})\" "
                     "text-anchor=\"middle\">{}</text>\n",
                     kTop + ph / 2, kTop + ph / 2, html_escape(y_label + (log_y ? " (log)" : "")));
  for (size_t si = 0; si < series.size(); ++si) {
    const auto& s = series[si];
    std::string path;
    std::string points;
    bool pen = false;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if ((log_y && !(s.y[i] > 0)) || !std::isfinite(s.y[i])) {
        pen = false;
        continue;
      }
      const double X = px(s.x[i]), Y = py(ty(s.y[i]));
      path += fmt::format("{}{:.1f},{:.1f} ", pen ? "L" : "M", X, Y);
      pen = true;
      points += fmt::format("<circle class=\"point\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2\" fill=\"{}\" "
                            "data-series=\"{}\" data-x=\"{}\" data-y=\"{}\"/>\n",
                            X, Y, kColors[si % 8], html_escape(s.name), s.x[i], s.y[i]);
    }
    out += fmt::format("<path class=\"series\" data-series=\"{}\" d=\"{}\" fill=\"none\" stroke=\"{}\" "
                       "stroke-width=\"1.5\"/>\n",
                       html_escape(s.name), path, kColors[si % 8]);
    out += points;
  }
  out += legend(series) + "</svg>\n";
  return out;
}

std::string svg_bar_chart(const std::string& title, const std::vector<std::string>& labels,
                          const std::vector<Series>& series) {
  std::string out = header(title, "bars");
  double ymax = 1;
  for (const auto& s : series)
    for (double v : s.y) ymax = std::max(ymax, v);
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  const size_t nb = std::max<size_t>(labels.size(), 1), ns = std::max<size_t>(series.size(), 1);
  const double group = pw / double(nb), bar = group * 0.8 / double(ns);
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\n", kLeft,
                     kTop, pw, ph);
  out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\" text-anchor=\"end\">{:g}</text>"
                     "<text x=\"{}\" y=\"{}\" font-size=\"10\" text-anchor=\"end\">0</text>\n",
                     kLeft - 4, kTop + 4, ymax, kLeft - 4, kTop + ph);
  for (size_t b = 0; b < labels.size(); ++b)
    if (labels.size() <= 16 || b % 2 == 0)
      out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"9\" text-anchor=\"middle\">{}</text>\n",
                         kLeft + group * (double(b) + 0.5), kTop + ph + 12, html_escape(labels[b]));
  for (size_t si = 0; si < series.size(); ++si)
    for (size_t b = 0; b < series[si].y.size() && b < labels.size(); ++b) {
      const double v = series[si].y[b], h = v / ymax * ph;
      out += fmt::format("<rect class=\"bar\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
                         "fill=\"{}\" data-series=\"{}\" data-x=\"{}\" data-y=\"{}\"/>\n",
                         kLeft + group * double(b) + group * 0.1 + bar * double(si), kTop + ph - h, bar, h,
                         kColors[si % 8], html_escape(series[si].name), html_escape(labels[b]), v);
    }
  out += legend(series) + "</svg>\n";
  return out;
}

}  // namespace kvp
