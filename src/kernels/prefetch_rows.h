#pragma once
// Software prefetch of the W slice a blocked GEMM multiplies next. Such a slice is a few cache
// lines of each row and then a jump of a whole row, which the hardware prefetchers do not follow
// (unprefetched, widening W took ~18% of a Llama-2-7B GEMM at M = 64). Issuing all its lines at
// once overflows the miss queues and most are dropped, so they are spread over the current
// slice's work. They go to L2 (prefetcht1), not L1: the x panels stream through L1 between the
// prefetch and the use and would evict them; into L1 the W widening still stalled on its loads
// (perf: 14% of a TinyLlama gate/up GEMM at M = 64 on the first vcvtph2ps), and the single-thread
// GEMM took 20.4-23.5 ms CPU time against 17.2-18.2 ms into L2 (Zen 4, interleaved runs).
#include <cstddef>

namespace kvp {

// Rows of bytes to prefetch: `rows` rows of `row_bytes`, `stride` bytes apart; rows == 0 for none.
struct PrefetchRows {
  const char* base = nullptr;
  size_t stride = 0;
  size_t row_bytes = 0;
  size_t rows = 0;
};

// Walks the cache lines of a PrefetchRows in order: after upto(done, total), the first
// lines * done / total of them have been requested (total > 0).
class SpreadPrefetch {
 public:
  explicit SpreadPrefetch(const PrefetchRows& r)
      : r_(r), per_row_((r.row_bytes + 63) / 64), lines_(per_row_ * r.rows) {}

  void upto(size_t done, size_t total) {
    for (const size_t target = lines_ * done / total; line_ < target; ++line_)
      __builtin_prefetch(r_.base + (line_ / per_row_) * r_.stride + (line_ % per_row_) * 64, 0, 2);
  }

 private:
  PrefetchRows r_;
  size_t per_row_, lines_, line_ = 0;
};

}  // namespace kvp
