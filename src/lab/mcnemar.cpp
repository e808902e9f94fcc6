#include "lab/mcnemar.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace kvp {

McNemar mcnemar_exact(int64_t b, int64_t c) {
  if (b < 0 || c < 0) throw std::invalid_argument("mcnemar_exact: negative count");
  McNemar r;
  r.b = b;
  r.c = c;
  const int64_t n = b + c, k = std::min(b, c);
  // The tail up to k holds at least half the mass once 2k + 1 >= n (exactly half for odd n).
  if (n == 0 || 2 * k + 1 >= n) return r;
  double log_p;
  if (n <= 1000) {
    // Small n: terms C(n, i) / 2^n by their exact ratios from 2^-n (a normal double down to n = 1022),
    // so hand-checkable cases like (1, 6) -> 16/128 come out exact.
    double t = std::ldexp(1.0, -int(n)), sum = t;
    for (int64_t i = 1; i <= k; ++i) {
      t *= double(n - i + 1) / double(i);
      sum += t;
    }
    log_p = std::log(std::min(1.0, 2 * sum));
  } else {
    const double ln2 = std::log(2.0), lgn1 = std::lgamma(double(n) + 1);
    auto log_term = [&](int64_t i) {
      return lgn1 - std::lgamma(double(i) + 1) - std::lgamma(double(n - i) + 1) - double(n) * ln2;
    };
    // Terms grow with i up to k < n/2, so the last one is the largest: factor it out.
    const double top = log_term(k);
    double sum = 0;
    for (int64_t i = k; i >= 0; --i) {
      const double t = std::exp(log_term(i) - top);
      sum += t;
      if (t < 1e-18 * sum) break;  // the rest cannot change a double
    }
    log_p = std::min(0.0, std::log(2.0) + top + std::log(sum));
  }
  r.log10_p = log_p / std::log(10.0);
  r.p = std::exp(log_p);
  return r;
}

}  // namespace kvp
