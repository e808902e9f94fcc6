#pragma once
// Exact McNemar test for paired binary outcomes (accuracy cache ON vs cache OFF on the same
// problems): under H0 the discordant pairs split Binomial(b + c, 1/2); the two-sided p-value is
// min(1, 2 * P(X <= min(b, c))).
#include <cstdint>

namespace kvp {

struct McNemar {
  int64_t b = 0;          // right with cache ON only
  int64_t c = 0;          // right with cache OFF only
  double p = 1.0;         // may underflow to 0 for very lopsided large samples; see log10_p
  double log10_p = 0.0;   // exact in log space, never underflows
};

// Sums the binomial tail in log space (lgamma + log-sum-exp), so n in the millions is fine.
McNemar mcnemar_exact(int64_t b, int64_t c);

}  // namespace kvp
