#include "lab/step_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvp {
namespace {

// log-sum-exp in fp64 for a stable log-softmax.
double log_sum_exp(const float* x, int n) {
  double m = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < n; ++i) m = std::max(m, double(x[i]));
  double s = 0;
  for (int i = 0; i < n; ++i) s += std::exp(double(x[i]) - m);
  return m + std::log(s);
}

}  // namespace

StepMetrics step_metrics(const float* on, const float* off, int vocab) {
  StepMetrics r;
  double sum_abs = 0;
  for (int i = 0; i < vocab; ++i) {
    const double d = std::fabs(double(on[i]) - double(off[i]));
    r.max_abs_logit_diff = std::max(r.max_abs_logit_diff, d);
    sum_abs += d;
  }
  r.mean_abs_logit_diff = sum_abs / vocab;
  const double lse_on = log_sum_exp(on, vocab), lse_off = log_sum_exp(off, vocab);
  double kl = 0;
  for (int i = 0; i < vocab; ++i) {
    const double lp = double(on[i]) - lse_on, lq = double(off[i]) - lse_off;
    kl += std::exp(lp) * (lp - lq);
  }
  r.kl = std::max(0.0, kl);  // rounding can leave a tiny negative for identical distributions
  float a = -std::numeric_limits<float>::infinity(), b = a;
  for (int i = 0; i < vocab; ++i) {
    if (on[i] > a) {
      b = a;
      a = on[i];
    } else if (on[i] > b) {
      b = on[i];
    }
  }
  r.top1_margin = vocab > 1 ? double(a) - double(b) : 0.0;
  return r;
}

}  // namespace kvp
