// Decode GEMV on block-quantised weights (every format of quant_blocks-inl.h) with each vector
// of weights decoded in registers and multiplied at once, in exactly
// dot_rows' per-output order (simd_ops.h): vector i of the k range goes to accumulator i % 2, the
// two are added lane-wise and tree-summed. A block is a whole number of vector pairs and the range
// starts on a block, so the block-at-a-time walk below feeds each accumulator the same products
// in the same order as dot_rows on the dequantised matrix: the results are bitwise equal
// (tests/test_quant.cpp). Compared with dequantising rows into scratch first, no weight is stored
// and reloaded, and a block's scales are converted once.
// Compiled once per SIMD target like the other kernel files.
#include <cstring>

#include "core/dtype.h"
#include "core/quant.h"
#include "kernels/simd_ops.h"
#include "kernels/unroll.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/quant_gemv_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "kernels/quant_blocks-inl.h"
#include "kernels/simd_common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvp::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
using simd_common::HWY_NAMESPACE::ForStreamRows;
using simd_common::HWY_NAMESPACE::kMaxQuantLanes;
using simd_common::HWY_NAMESPACE::kStreams;
using simd_common::HWY_NAMESPACE::WithQuantFormat;

// S rows (one per stream) over blocks [b0, b1): in each block, vector pair p of the k range
// feeds accumulators 0 and 1, as dot_rows does.
template <class Fmt, size_t S>
HWY_INLINE void Tile(const float* x, const uint8_t* const* rows, size_t b0, size_t b1, float* out) {
  const DF d;
  const size_t L = hn::Lanes(d);
  VF acc0[S], acc1[S];
  for (size_t s = 0; s < S; ++s) acc0[s] = acc1[s] = hn::Zero(d);
  typename Fmt::State st[S];
  for (size_t b = b0; b < b1; ++b) {
    const float* xb = x + b * Fmt::kElems;
    for (size_t s = 0; s < S; ++s) Fmt::Prepare(rows[s] + b * Fmt::kBytes, st[s]);
    KVP_UNROLL(32)
    for (size_t j = 0; j < Fmt::kElems; j += 2 * L) {
      const VF x0 = hn::LoadU(d, xb + j), x1 = hn::LoadU(d, xb + j + L);
      KVP_UNROLL(4)
      for (size_t s = 0; s < S; ++s) {
        const uint8_t* blk = rows[s] + b * Fmt::kBytes;
        acc0[s] = hn::MulAdd(x0, Fmt::Load(blk, st[s], j), acc0[s]);
        acc1[s] = hn::MulAdd(x1, Fmt::Load(blk, st[s], j + L), acc1[s]);
      }
    }
  }
  for (size_t s = 0; s < S; ++s) out[s] = hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0[s], acc1[s])));
}

template <class Fmt>
void Rows(const float* x, const uint8_t* base, size_t K, size_t n0, size_t n1, size_t k0, size_t k1, float* y) {
  const size_t row_bytes = K / Fmt::kElems * Fmt::kBytes, b0 = k0 / Fmt::kElems, b1 = k1 / Fmt::kElems;
  // Rows walked as kStreams sequential streams side by side, as dot_rows does (see DotRowsT).
  ForStreamRows(
      n0, n1,
      [&](const size_t* rows) {
        const uint8_t* rs[kStreams];
        for (size_t s = 0; s < kStreams; ++s) rs[s] = base + rows[s] * row_bytes;
        float out[kStreams];
        Tile<Fmt, kStreams>(x, rs, b0, b1, out);
        for (size_t s = 0; s < kStreams; ++s) y[rows[s]] = out[s];
      },
      [&](size_t n) {
        const uint8_t* r = base + n * row_bytes;
        Tile<Fmt, 1>(x, &r, b0, b1, y + n);
      });
}

bool DotRowsQuant(const float* x, const void* W, QuantType q, size_t K, size_t n0, size_t n1, size_t k0, size_t k1,
                  float* y) {
  const size_t L = hn::Lanes(DF());
  const size_t be = block_elems(q);
  // Blocks must be whole vector pairs, and the range whole blocks.
  if (L > kMaxQuantLanes || be % (2 * L) != 0 || k0 % be != 0 || k1 % be != 0 || K % be != 0) return false;
  const auto* base = static_cast<const uint8_t*>(W);
  return WithQuantFormat(q, [&]<class Fmt>() { Rows<Fmt>(x, base, K, n0, n1, k0, k1, y); });
}

}  // namespace HWY_NAMESPACE
}  // namespace kvp::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvp::simd {
HWY_EXPORT(DotRowsQuant);

bool dot_rows_quant(const float* x, const void* W, QuantType q, size_t K, size_t n0, size_t n1, size_t k0,
                    size_t k1, float* y) {
  return HWY_DYNAMIC_DISPATCH(DotRowsQuant)(x, W, q, K, n0, n1, k0, k1, y);
}
}  // namespace kvp::simd
#endif
