#pragma once
// Small inline-SVG charts for the self-contained HTML report (no scripts, no network). Every
// plotted point carries data-x/data-y attributes so tests (and readers' tools) can check the data.
// Charts take the page width (a viewBox scaled to width 100%), so they are sized by the page.
#include <string>
#include <vector>

namespace kvp {

struct Series {
  std::string name;
  std::vector<double> x, y;
};

// Label that marks values drawn on a log axis's floor because they are exactly zero.
inline constexpr const char* kExactZeroLabel = "0 (exact)";

// Tick values in [lo, hi]: the multiples of a 1-2-5 step (times a power of ten) chosen so that at
// most about `target` + 1 ticks fit. With `integer` the step is at least 1 (step and layer indices).
std::vector<double> nice_ticks(double lo, double hi, int target, bool integer);

// Ticks of an axis whose data starts at lo: nice_ticks, with lo itself first, so the axis shows
// where the data starts (step 0 or 1) instead of the first round number after it. A nice tick
// closer than half a step to lo is dropped to keep the labels apart.
std::vector<double> axis_ticks(double lo, double hi, int target, bool integer);

// Line chart. With log_y, exact zeros (for which there is no logarithm) sit on a dashed floor
// line below the lowest decade, labelled kExactZeroLabel, so a series that is 0 everywhere is still
// drawn; negative and non-finite values are gaps. integer_x: x ticks at whole numbers only.
std::string svg_line_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                           const std::vector<Series>& series, bool log_y, bool integer_x = true);

// Bar chart of values per labelled bin, one bar per series in each bin. Zero bars are drawn as a
// thin stub on the baseline (a missing bar would read as missing data), and a chart whose values
// are all zero says "all 0". counts: the values are counts (integer y ticks).
std::string svg_bar_chart(const std::string& title, const std::vector<std::string>& bin_labels,
                          const std::vector<Series>& series, bool counts = false);

std::string html_escape(const std::string& s);

}  // namespace kvp
