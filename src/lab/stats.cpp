#include "lab/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvp {

double quantile_sorted(const std::vector<double>& s, double q) {
  if (s.empty()) return 0.0;
  const double pos = q * double(s.size() - 1);
  const size_t lo = size_t(std::floor(pos));
  const size_t hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (s[hi] - s[lo]) * (pos - double(lo));
}

Distribution summarize(std::vector<double> v) {
  Distribution d;
  d.n = v.size();
  if (v.empty()) return d;
  std::sort(v.begin(), v.end());
  d.min = v.front();
  d.max = v.back();
  d.median = quantile_sorted(v, 0.5);
  d.p90 = quantile_sorted(v, 0.9);
  d.mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  return d;
}

nlohmann::json Distribution::to_json() const {
  if (n == 0) return {{"n", 0}, {"min", nullptr}, {"median", nullptr}, {"p90", nullptr}, {"max", nullptr}, {"mean", nullptr}};
  return {{"n", n}, {"min", min}, {"median", median}, {"p90", p90}, {"max", max}, {"mean", mean}};
}

Histogram histogram(const std::vector<int>& values, int upper, int bins) {
  Histogram h;
  upper = std::max(upper, 1);
  bins = std::max(1, std::min(bins, upper));
  for (int b = 0; b <= bins; ++b) h.edges.push_back(int(std::lround(double(upper) * b / bins)));
  h.counts.assign(size_t(bins), 0);
  for (int v : values) {
    if (v < 0) continue;
    int b = int(std::upper_bound(h.edges.begin(), h.edges.end(), v) - h.edges.begin()) - 1;
    b = std::clamp(b, 0, bins - 1);
    ++h.counts[size_t(b)];
  }
  return h;
}

nlohmann::json Histogram::to_json() const { return {{"edges", edges}, {"counts", counts}}; }

}  // namespace kvp
