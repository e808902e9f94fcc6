#pragma once
// Distribution summaries used in every report: the issue asks for min/median/p90/max, not only means.
#include <nlohmann/json.hpp>
#include <vector>

namespace kvp {

struct Distribution {
  size_t n = 0;
  double min = 0, median = 0, p90 = 0, max = 0, mean = 0;
  nlohmann::json to_json() const;  // {"n","min","median","p90","max","mean"}; nulls when n == 0
};

// Quantiles by linear interpolation between order statistics (numpy's default).
Distribution summarize(std::vector<double> values);
double quantile_sorted(const std::vector<double>& sorted, double q);

// Counts of integer values in [0, upper) split into `bins` equal-width bins.
struct Histogram {
  std::vector<int> edges;  // bins + 1 edges
  std::vector<int> counts;
  nlohmann::json to_json() const;
};
Histogram histogram(const std::vector<int>& values, int upper, int bins);

}  // namespace kvp
