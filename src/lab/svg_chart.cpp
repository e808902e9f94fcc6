#include "lab/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvp {
namespace {

// The drawing's own coordinates; the browser scales them to the page (viewBox + width 100%).
constexpr double kW = 1000, kH = 340, kLeft = 78, kTop = 34, kBottom = 48;
// Space between the lowest decade and the exact-zero floor of a log axis, in decades: enough to
// read the floor as a separate row rather than as one more decade.
constexpr double kZeroGap = 0.7;
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};

const char* color(size_t i) { return kColors[i % 8]; }

// Rough width of text in the chart's units: enough to keep the legend clear of the plot.
double text_width(const std::string& s, double font) {
  size_t chars = 0;
  for (unsigned char c : s) chars += (c & 0xC0) != 0x80;  // UTF-8 code points
  return double(chars) * font * 0.6;
}

std::string header(const std::string& title, const std::string& cls) {
  return fmt::format(
      "<svg class=\"chart {}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" width=\"100%\" "
      "preserveAspectRatio=\"xMinYMin meet\" style=\"max-width:1400px;height:auto\" role=\"img\" aria-label=\"{}\">\n"
      "<text x=\"{}\" y=\"20\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
      cls, kW, kH, html_escape(title), kLeft, html_escape(title));
}

struct LegendEntry {
  std::string label;
  size_t color_index;
};

// Legend right of the plot; `zero_note` (optional) goes under the entries, after a sample of the
// dashed exact-zero floor line.
double legend_width(const std::vector<LegendEntry>& entries, const std::string& zero_note) {
  double w = text_width(zero_note, 10) + 36;
  for (const auto& e : entries) w = std::max(w, text_width(e.label, 11) + 36);
  return std::clamp(w, 150.0, 420.0);
}

std::string legend(const std::vector<LegendEntry>& entries, double x, const std::string& zero_note) {
  std::string s;
  for (size_t i = 0; i < entries.size(); ++i) {
    const double y = kTop + 14 + 18 * double(i);
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
                     "<text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text>\n",
                     x, y - 10, color(entries[i].color_index), x + 16, y, html_escape(entries[i].label));
  }
  if (!zero_note.empty()) {
    const double y = kTop + 14 + 18 * double(entries.size()) + 4;
    s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#777\" stroke-dasharray=\"4 3\"/>"
                     "<text class=\"legend-note\" x=\"{}\" y=\"{}\" font-size=\"10\">{}</text>\n",
                     x, x + 12, y - 3, y - 3, x + 16, y, html_escape(zero_note));
  }
  return s;
}

double nice_step(double raw, bool integer) {
  if (!(raw > 0) || !std::isfinite(raw)) return 1.0;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / mag;
  double step = (r <= 1 + 1e-9 ? 1 : r <= 2 + 1e-9 ? 2 : r <= 5 + 1e-9 ? 5 : 10) * mag;
  if (integer) step = std::max(1.0, std::round(step));
  return step;
}

// Tick text: as many decimals as the step needs, so 0.2 steps read 0.2, 0.4, … not 0.200000001.
std::string tick_label(double v, double step) {
  if (std::fabs(v) < std::fabs(step) * 1e-9) v = 0;
  if (step >= 1 && std::fabs(v) < 1e7 && v == std::round(v)) return fmt::format("{}", int64_t(std::llround(v)));
  if (step < 1e-4 || std::fabs(v) >= 1e7) return fmt::format("{:.3g}", v);
  const int decimals = std::max(0, -int(std::floor(std::log10(step) + 1e-9)));
  return fmt::format("{:.{}f}", v, decimals);
}

std::string no_data(std::string out, const std::string& what) {
  return out + fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\">{}</text>\n</svg>\n", kLeft, kH / 2, what);
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string r;
  r.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': r += "&amp;"; break;
      case '<': r += "&lt;"; break;
      case '>': r += "&gt;"; break;
      case '"': r += "&quot;"; break;
      case '\'': r += "&#39;"; break;
      default: r += c;
    }
  }
  return r;
}

std::vector<double> nice_ticks(double lo, double hi, int target, bool integer) {
  std::vector<double> out;
  if (!std::isfinite(lo) || !std::isfinite(hi) || hi < lo) return out;
  if (hi == lo) return {lo};
  const double step = nice_step((hi - lo) / double(std::max(target, 1)), integer);
  // Multiples k * step rather than repeated additions, so rounding errors do not pile up along the axis.
  const double k0 = std::ceil(lo / step - 1e-9), k1 = std::floor(hi / step + 1e-9);
  for (double k = k0; k <= k1; ++k) out.push_back(k == 0 ? 0.0 : k * step);
  return out;
}

std::vector<double> axis_ticks(double lo, double hi, int target, bool integer) {
  std::vector<double> t = nice_ticks(lo, hi, target, integer);
  if (!t.empty() && t.front() == lo) return t;
  const double step = nice_step((hi - lo) / double(std::max(target, 1)), integer);
  if (!t.empty() && t.front() - lo < 0.5 * step) t.erase(t.begin());
  t.insert(t.begin(), lo);
  return t;
}

std::string svg_line_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                           const std::vector<Series>& series, bool log_y, bool integer_x) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  auto drawable = [&](double x, double y) { return std::isfinite(x) && std::isfinite(y) && (!log_y || y >= 0); };
  double x0 = inf, x1 = -inf, pmin = inf, pmax = -inf;  // pmin/pmax: values with a place on the scale
  bool any_zero = false;
  std::vector<bool> all_zero(series.size(), false);
  for (size_t si = 0; si < series.size(); ++si) {
    const auto& s = series[si];
    size_t zeros = 0, drawn = 0;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!drawable(s.x[i], s.y[i])) continue;
      ++drawn;
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      if (log_y && s.y[i] == 0) {
        ++zeros;
        continue;
      }
      pmin = std::min(pmin, s.y[i]);
      pmax = std::max(pmax, s.y[i]);
    }
    all_zero[si] = log_y && drawn > 0 && zeros == drawn;
    any_zero = any_zero || zeros > 0;
  }
  std::string out = header(title, log_y ? "line log-y" : "line");
  if (!std::isfinite(x0)) return no_data(out, "no data");

  // y scale, in log10 units on a log axis. `floor` is where exact zeros are drawn.
  const bool have_scale = std::isfinite(pmin);
  double y0, y1, floor = 0;
  std::vector<double> yticks;
  if (log_y) {
    const double lo = have_scale ? std::floor(std::log10(pmin)) : 0;
    const double hi = have_scale ? std::max(std::ceil(std::log10(pmax)), lo + 1) : 1;
    if (have_scale) {
      const int stride = std::max(1, int(std::ceil((hi - lo) / 8)));  // at most ~8 decade labels
      for (double d = lo; d <= hi; d += stride) yticks.push_back(d);
    }
    floor = any_zero ? lo - kZeroGap : lo;
    y0 = floor;
    y1 = hi;
  } else {
    double lo = std::min(0.0, pmin), hi = pmax;
    if (hi <= lo) hi = lo + 1;
    const double step = nice_step((hi - lo) / 5, false);
    y0 = std::floor(lo / step + 1e-9) * step;
    y1 = std::ceil(hi / step - 1e-9) * step;
    yticks = nice_ticks(y0, y1, 5, false);
  }
  const double xa = x0, xb = x1 > x0 ? x1 : x0 + 1;

  std::vector<LegendEntry> entries;
  for (size_t si = 0; si < series.size(); ++si)
    entries.push_back({series[si].name + (all_zero[si] ? " (all 0)" : ""), si});
  const std::string note = any_zero ? std::string(kExactZeroLabel) + ": dashed bottom line" : "";
  const double right = legend_width(entries, note) + 16;
  const double pw = kW - kLeft - right, ph = kH - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - xa) / (xb - xa) * pw; };
  auto py = [&](double v) { return kTop + ph - (v - y0) / (y1 - y0) * ph; };
  auto ypos = [&](double y) { return log_y ? (y == 0 ? floor : std::log10(y)) : y; };

  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\n", kLeft,
                     kTop, pw, ph);
  const double ystep = yticks.size() >= 2 ? yticks[1] - yticks[0] : 1;
  for (double v : yticks) {
    const std::string label = log_y ? fmt::format("1e{}", int(std::lround(v))) : tick_label(v, ystep);
    out += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#eee\"/>"
                       "<text class=\"ytick\" x=\"{}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"end\">{}</text>\n",
                       kLeft, kLeft + pw, py(v), py(v), kLeft - 4, py(v) + 3, label);
  }
  if (log_y && any_zero)
    out += fmt::format("<line class=\"zero-floor\" x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#777\" "
                       "stroke-dasharray=\"4 3\"/><text class=\"zero-label\" x=\"{}\" y=\"{:.1f}\" font-size=\"10\" "
                       "text-anchor=\"end\">{}</text>\n",
                       kLeft, kLeft + pw, py(floor), py(floor), kLeft - 4, py(floor) + 3, kExactZeroLabel);
  if (log_y && !have_scale)
    out += fmt::format("<text class=\"all-zero\" x=\"{}\" y=\"{:.1f}\" font-size=\"12\" text-anchor=\"middle\">"
                       "all values {}</text>\n",
                       kLeft + pw / 2, kTop + ph / 2, kExactZeroLabel);
  const std::vector<double> xticks = axis_ticks(x0, x1, std::max(2, int(pw / 70)), integer_x);
  const double xstep = xticks.size() >= 3 ? xticks[2] - xticks[1] : xticks.size() == 2 ? xticks[1] - xticks[0] : 1;
  for (double v : xticks) {
    const std::string label = v == x0 ? fmt::format("{:.4g}", v) : tick_label(v, xstep);
    out += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#999\"/>"
                       "<text class=\"xtick\" x=\"{0:.1f}\" y=\"{3}\" font-size=\"10\" text-anchor=\"middle\">{4}</text>\n",
                       px(v), kTop + ph, kTop + ph + 4, kTop + ph + 15, label);
  }
  out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}</text>\n", kLeft + pw / 2,
                     kH - 10, html_escape(x_label));
  out += fmt::format("<text x=\"14\" y=\"{}\" font-size=\"11\" transform=\"rotate(-90 14 {})\" "
                     "text-anchor=\"middle\">{}</text>\n",
                     kTop + ph / 2, kTop + ph / 2, html_escape(y_label + (log_y ? " (log)" : "")));
  for (size_t si = 0; si < series.size(); ++si) {
    const auto& s = series[si];
    std::string path, points;
    bool pen = false;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!drawable(s.x[i], s.y[i])) {
        pen = false;
        continue;
      }
      const bool zero = log_y && s.y[i] == 0;
      const double X = px(s.x[i]), Y = py(ypos(s.y[i]));
      path += fmt::format("{}{:.1f},{:.1f} ", pen ? "L" : "M", X, Y);
      pen = true;
      points += fmt::format("<circle class=\"{}\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\" "
                            "data-series=\"{}\" data-x=\"{}\" data-y=\"{}\"/>\n",
                            zero ? "point zero" : "point", X, Y, zero ? 2.5 : 2, color(si), html_escape(s.name),
                            s.x[i], s.y[i]);
    }
    out += fmt::format("<path class=\"series\" data-series=\"{}\" d=\"{}\" fill=\"none\" stroke=\"{}\" "
                       "stroke-width=\"1.5\"/>\n",
                       html_escape(s.name), path, color(si));
    out += points;
  }
  out += legend(entries, kW - right + 16, note) + "</svg>\n";
  return out;
}

std::string svg_bar_chart(const std::string& title, const std::vector<std::string>& labels,
                          const std::vector<Series>& series, bool counts) {
  std::string out = header(title, "bars");
  double vmax = 0;
  bool any_value = false;
  for (const auto& s : series)
    for (size_t b = 0; b < s.y.size() && b < labels.size(); ++b)
      if (std::isfinite(s.y[b])) {
        any_value = true;
        vmax = std::max(vmax, s.y[b]);
      }
  if (!any_value) return no_data(out, "no data");
  // Fractions keep a 0–1 axis; counts start from an axis of 1 so a lone count still fills it.
  const double step = nice_step(std::max(vmax, 1.0) / 5, counts);
  const double top = std::max(std::ceil(std::max(vmax, 1.0) / step - 1e-9) * step, step);
  std::vector<LegendEntry> entries;
  for (size_t si = 0; si < series.size(); ++si) entries.push_back({series[si].name, si});
  const double right = legend_width(entries, "") + 16;
  const double pw = kW - kLeft - right, ph = kH - kTop - kBottom;
  const size_t nb = std::max<size_t>(labels.size(), 1), ns = std::max<size_t>(series.size(), 1);
  const double group = pw / double(nb), bar = group * 0.8 / double(ns);
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\n", kLeft,
                     kTop, pw, ph);
  for (double v : nice_ticks(0, top, 5, counts)) {
    const double y = kTop + ph - v / top * ph;
    out += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#eee\"/>"
                       "<text class=\"ytick\" x=\"{}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"end\">{}</text>\n",
                       kLeft, kLeft + pw, y, y, kLeft - 4, y + 3, tick_label(v, step));
  }
  for (size_t b = 0; b < labels.size(); ++b)
    if (labels.size() <= 16 || b % 2 == 0)
      out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\">{}</text>\n",
                         kLeft + group * (double(b) + 0.5), kTop + ph + 14, html_escape(labels[b]));
  constexpr double kStub = 2.5;  // height of a zero bar: visible, and clearly not a value
  for (size_t si = 0; si < series.size(); ++si)
    for (size_t b = 0; b < series[si].y.size() && b < labels.size(); ++b) {
      const double v = series[si].y[b];
      if (!std::isfinite(v)) continue;
      const bool zero = v == 0;
      const double h = zero ? kStub : std::max(v / top * ph, 0.0);
      out += fmt::format("<rect class=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
                         "fill=\"{}\" data-series=\"{}\" data-x=\"{}\" data-y=\"{}\"/>\n",
                         zero ? "bar zero" : "bar", kLeft + group * double(b) + group * 0.1 + bar * double(si),
                         kTop + ph - h, bar, h, color(si), html_escape(series[si].name), html_escape(labels[b]), v);
    }
  if (vmax == 0)
    out += fmt::format("<text class=\"all-zero\" x=\"{}\" y=\"{:.1f}\" font-size=\"13\" text-anchor=\"middle\">"
                       "all 0</text>\n",
                       kLeft + pw / 2, kTop + ph / 2);
  out += legend(entries, kW - right + 16, "") + "</svg>\n";
  return out;
}

}  // namespace kvp
