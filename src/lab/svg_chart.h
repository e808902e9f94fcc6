#pragma once
// Small inline-SVG charts for the self-contained HTML report (no scripts, no network). Every
// plotted point carries data-x/data-y attributes so tests (and readers' tools) can check the data.
#include <string>
#include <vector>

namespace kvp {

struct Series {
  std::string name;
  std::vector<double> x, y;
};

// Line chart; log_y plots log10(y) and drops non-positive values (shown as gaps).
std::string svg_line_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                           const std::vector<Series>& series, bool log_y);

// Bar chart of counts per labelled bin, one group of bars per series.
std::string svg_bar_chart(const std::string& title, const std::vector<std::string>& bin_labels,
                          const std::vector<Series>& series);

std::string html_escape(const std::string& s);

}  // namespace kvp
