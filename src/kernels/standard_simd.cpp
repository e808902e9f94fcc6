// Highway implementations of the primitives in simd_ops.h. This file is compiled once per target
// by foreach_target.h (each copy with its own target attributes, so the build needs no -march
// flags), and the HWY_ONCE section at the end dispatches to the best copy for the running CPU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/dtype.h"
#include "kernels/dequant_rows.h"
#include "kernels/kernels.h"
#include "kernels/simd_ops.h"
#include "kernels/unroll.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/standard_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "kernels/simd_common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvp::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

using simd_common::HWY_NAMESPACE::ForStreamRows;
using simd_common::HWY_NAMESPACE::kMaxLanes;
using simd_common::HWY_NAMESPACE::kStreams;
using simd_common::HWY_NAMESPACE::LoadF;
using simd_common::HWY_NAMESPACE::NormRowFromSquares;
using simd_common::HWY_NAMESPACE::RoundAct;
using simd_common::HWY_NAMESPACE::ScalarF;
using simd_common::HWY_NAMESPACE::ScaleAccumulatePV;
using simd_common::HWY_NAMESPACE::SquaresByLane;
using simd_common::HWY_NAMESPACE::WidenKv;

// ---------------------------------------------------------------------------------------------
// Dot-form tile: R rows of x against C rows of W over [k0, k1). The per-output order (two striped
// accumulators, tree sum, ordered tail) is the same for every R and C. `pf`, when given, names C
// rows whose [k0, k1) are prefetched at the pace of the loop (the W rows the caller takes next).
template <int R, int C, typename WT>
HWY_INLINE void DotTile(const float* const* xs, const WT* const* ws, size_t k0, size_t k1, float* out,
                        size_t out_row_stride, const WT* const* pf = nullptr) {
  const DF d;
  const size_t L = hn::Lanes(d);
  VF acc0[R][C], acc1[R][C];
  KVP_UNROLL(16)
  for (int r = 0; r < R; ++r) {
    KVP_UNROLL(16)
    for (int c = 0; c < C; ++c) acc0[r][c] = acc1[r][c] = hn::Zero(d);
  }
  size_t k = k0;
  for (; k + 2 * L <= k1; k += 2 * L) {
    VF w0[C], w1[C];
    KVP_UNROLL(16)
    for (int c = 0; c < C; ++c) {
      w0[c] = LoadF(d, ws[c] + k);
      w1[c] = LoadF(d, ws[c] + k + L);
    }
    if (pf != nullptr) {
      // 2L elements are 64 bytes in 16-bit types on AVX-512 (one line per step), more in fp32.
      KVP_UNROLL(16)
      for (int c = 0; c < C; ++c)
        for (size_t b = 0; b < 2 * L * sizeof(WT); b += 64)
          __builtin_prefetch(reinterpret_cast<const char*>(pf[c] + k) + b, 0, 3);
    }
    KVP_UNROLL(16)
    for (int r = 0; r < R; ++r) {
      const VF x0 = hn::LoadU(d, xs[r] + k);
      const VF x1 = hn::LoadU(d, xs[r] + k + L);
      KVP_UNROLL(16)
      for (int c = 0; c < C; ++c) {
        acc0[r][c] = hn::MulAdd(x0, w0[c], acc0[r][c]);
        acc1[r][c] = hn::MulAdd(x1, w1[c], acc1[r][c]);
      }
    }
  }
  if (k + L <= k1) {
    KVP_UNROLL(16)
    for (int c = 0; c < C; ++c) {
      const VF w0 = LoadF(d, ws[c] + k);
      KVP_UNROLL(16)
      for (int r = 0; r < R; ++r) acc0[r][c] = hn::MulAdd(hn::LoadU(d, xs[r] + k), w0, acc0[r][c]);
    }
    k += L;
  }
  KVP_UNROLL(16)
  for (int r = 0; r < R; ++r) {
    KVP_UNROLL(16)
    for (int c = 0; c < C; ++c) {
      float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0[r][c], acc1[r][c])));
      for (size_t kk = k; kk < k1; ++kk) s += xs[r][kk] * ScalarF(ws[c] + kk);
      out[r * out_row_stride + c] = s;
    }
  }
}

// Decode streams W from memory once, so what matters is how the reads look to the hardware
// prefetchers. They follow long sequential streams well, but a stream that jumps every row is
// picked up anew each time, and W rows are often exactly one 4 KiB page (K = 2048 in fp16). So the
// range is cut into kStreams contiguous parts that are walked side by side, one row of each per
// tile: kStreams long sequential streams, and kStreams independent rows for the FMA units.
// TinyLlama-shaped sweep of every decode GEMV, fp16, Zen 5 VM, interleaved runs, as a share of a
// one-stream read: four rows of one group in flight with next-group prefetch 76-82%; one row at a
// time 83-91%; four streams 106-122% (several streams also beat a single-stream read).
template <typename WT>
void DotRowsT(const float* x, const WT* W, size_t K, size_t n0, size_t n1, size_t k0, size_t k1, float* y) {
  ForStreamRows(
      n0, n1,
      [&](const size_t* rows) {
        const WT* ws[kStreams];
        for (size_t s = 0; s < kStreams; ++s) ws[s] = W + rows[s] * K;
        float out[kStreams];
        DotTile<1, kStreams>(&x, ws, k0, k1, out, 0);
        for (size_t s = 0; s < kStreams; ++s) y[rows[s]] = out[s];
      },
      [&](size_t n) {
        const WT* w = W + n * K;
        DotTile<1, 1>(&x, &w, k0, k1, y + n, 1);
      });
}

void DotRows(const float* x, const void* W, DType wt, size_t K, size_t n0, size_t n1, size_t k0, size_t k1,
             float* y) {
  switch (wt) {
    case DType::F32: return DotRowsT(x, static_cast<const float*>(W), K, n0, n1, k0, k1, y);
    case DType::F16: return DotRowsT(x, static_cast<const hwy::float16_t*>(W), K, n0, n1, k0, k1, y);
    case DType::BF16: return DotRowsT(x, static_cast<const hwy::bfloat16_t*>(W), K, n0, n1, k0, k1, y);
  }
}

// A few x rows (a decode batch, a short cache-OFF step) in the GEMV's per-output order. W is read
// from memory once: a tile of kSmallC W rows meets every x row, kSmallR at a time, while it is in
// L1 (x comes from L2), and the first pass over it prefetches the next tile. Register tiles: 2 x 4
// outputs' accumulator pairs on AVX-512 (32 registers), 2 x 2 below. Interleaved runs on a Zen 4
// (TinyLlama gate/up and down, M = 4 and 8, fp16, 2 threads) against the older loop (one W row
// against four x rows, a 256 KB block of W re-read from L2 per four x rows): AVX-512 131-159
// GFLOP/s against 52-77 (4 x 2: 105-147; 3 x 3: 96-142; 4 x 3, which spills: 95-177), AVX2
// 77-117 against 48-67.
#if HWY_TARGET <= HWY_AVX3
constexpr int kSmallR = 2, kSmallC = 4;
#else
constexpr int kSmallR = 2, kSmallC = 2;
#endif

// `next`: the W rows the caller takes after these (prefetched by the first x rows' pass): a W row
// is a few KB, too short for the hardware prefetchers to get going on before it ends.
template <int C, typename WT>
HWY_INLINE void SmallTile(const float* x, size_t M, const WT* const* ws, const WT* const* next, size_t K, size_t N,
                          float* y) {
  size_t m = 0;
  for (; m + kSmallR <= M; m += kSmallR) {
    const float* xs[kSmallR];
    for (int r = 0; r < kSmallR; ++r) xs[r] = x + (m + r) * K;
    DotTile<kSmallR, C>(xs, ws, 0, K, y + m * N, N, m == 0 ? next : nullptr);
  }
  for (; m < M; ++m) {
    const float* xr = x + m * K;
    DotTile<1, C>(&xr, ws, 0, K, y + m * N, N, m == 0 ? next : nullptr);
  }
}

template <typename WT>
void GemmSmallT(const float* x, size_t M, const WT* W, size_t K, size_t N, size_t n0, size_t n1, float* y) {
  size_t n = n0;
  for (; n + kSmallC <= n1; n += kSmallC) {
    const WT *ws[kSmallC], *next[kSmallC];
    for (int c = 0; c < kSmallC; ++c) {
      ws[c] = W + (n + c) * K;
      next[c] = W + std::min(n + kSmallC + c, n1 - 1) * K;
    }
    SmallTile<kSmallC>(x, M, ws, next, K, N, y + n);
  }
  for (; n < n1; ++n) {
    const WT* w = W + n * K;
    SmallTile<1>(x, M, &w, static_cast<const WT* const*>(nullptr), K, N, y + n);
  }
}

void GemmSmall(const float* x, size_t M, const void* W, DType wt, size_t K, size_t N, size_t n0, size_t n1,
               float* y) {
  switch (wt) {
    case DType::F32: return GemmSmallT(x, M, static_cast<const float*>(W), K, N, n0, n1, y);
    case DType::F16: return GemmSmallT(x, M, static_cast<const hwy::float16_t*>(W), K, N, n0, n1, y);
    case DType::BF16: return GemmSmallT(x, M, static_cast<const hwy::bfloat16_t*>(W), K, N, n0, n1, y);
  }
}

// ---------------------------------------------------------------------------------------------
// Packed GEMM (outer-product micro-kernel): a tile is NR rows of W times one x^T panel of MV
// vectors of rows. Accumulators: NR*MV vectors, which must fit the register file with room for
// the panel loads (32 registers on AVX-512, 16 below).
#if HWY_TARGET <= HWY_AVX3
// 8 W rows x 3 vectors of x rows: 24 accumulators and 11 loads (8 of them broadcasts) per 24 FMAs;
// 12 x 2 needs 14 loads, and on Zen 4 (512-bit ops on 256-bit units) measured 5-8% slower.
constexpr size_t kNR = 8;
constexpr size_t kMV = 3;
#elif HWY_TARGET <= HWY_SSE4
constexpr size_t kNR = 6;
constexpr size_t kMV = 2;
#else
constexpr size_t kNR = 4;
constexpr size_t kMV = 2;
#endif

size_t FloatLanes() { return hn::Lanes(DF()); }
size_t GemmNR() { return kNR; }
size_t GemmPanelRows() { return kMV * hn::Lanes(DF()); }

// Panels are kMV vectors of rows wide; the last one only as many vectors as it has rows for.
size_t PanelWidth(size_t M, size_t r0, size_t L) { return std::min(kMV, (M - r0 + L - 1) / L) * L; }

void GemmPackX(const float* x, size_t M, size_t K, size_t p0, size_t p1, float* xT) {
  const size_t L = hn::Lanes(DF());
  for (size_t p = p0; p < p1; ++p) {
    const size_t r0 = p * kMV * L;
    if (r0 >= M) break;
    const size_t w = PanelWidth(M, r0, L);
    float* dst = xT + r0 * K;
    for (size_t j = 0; j < w; ++j) {
      const size_t r = r0 + j;
      if (r < M) {
        const float* src = x + r * K;
        for (size_t k = 0; k < K; ++k) dst[k * w + j] = src[k];
      } else {
        for (size_t k = 0; k < K; ++k) dst[k * w + j] = 0.0f;
      }
    }
  }
}

// A W micro-tile is kNR rows of kc fp32 (row i at dst + i*kc), widened just before the x^T
// panels use it: the 8 KB tile (AVX-512) is then written and read in L1, and every panel after
// the first reads its row streams from L1.
template <typename WT>
void PackWTile(const WT* W, size_t ldw, size_t nr, size_t kc, float* dst) {
  const DF d;
  const size_t L = hn::Lanes(d);
  for (size_t i = 0; i < nr; ++i) {
    const WT* src = W + i * ldw;
    float* out = dst + i * kc;
    size_t k = 0;
    for (; k + L <= kc; k += L) hn::StoreU(LoadF(d, src + k), d, out + k);
    for (; k < kc; ++k) out[k] = ScalarF(src + k);
  }
  if (nr < kNR) std::memset(dst + nr * kc, 0, (kNR - nr) * kc * sizeof(float));
}

// The next W slice's prefetches are spread over the micro-tiles, issued every kPrefetchEvery k
// steps. AVX-512's tiles are few (8 W rows x 48 x rows: 12 per block at M = 64), and one burst per
// tile was 32 lines; every 32 k steps instead: 7B-shape GEMMs at M = 64 3-7% less CPU time and
// TinyLlama prefill 0-4% faster (Zen 4, noisy host). AVX2 has 2.7x as many tiles, and there the
// finer spreading measured 2% slower end to end.
#if HWY_TARGET <= HWY_AVX3
constexpr size_t kPrefetchEvery = 32;
#else
constexpr size_t kPrefetchEvery = 1 << 20;
#endif

// One micro-tile over one k slice. The accumulators start at zero on the first slice and
// otherwise resume from `acc` (contiguous, so the reload is plain vector loads), which continues
// each output's single FMA chain exactly; the last slice writes y instead.
template <size_t MV>
HWY_INLINE void PackedTile(const float* xp, const float* wp, size_t kc, float* acc, bool first, bool last, size_t nr,
                           size_t mrows, float* y, size_t N, SpreadPrefetch& prefetch, size_t& step, size_t steps) {
  const DF d;
  const size_t L = hn::Lanes(d);
  VF c[kNR][MV];
  KVP_UNROLL(16)
  for (size_t i = 0; i < kNR; ++i) {
    KVP_UNROLL(4)
    for (size_t v = 0; v < MV; ++v) c[i][v] = first ? hn::Zero(d) : hn::Load(d, acc + (i * MV + v) * L);
  }
  for (size_t k0 = 0; k0 < kc; k0 += kPrefetchEvery) {
    const size_t k1 = std::min(kc, k0 + kPrefetchEvery);
    for (size_t k = k0; k < k1; ++k) {
      VF xv[MV];
      KVP_UNROLL(4)
      for (size_t v = 0; v < MV; ++v) xv[v] = hn::Load(d, xp + (k * MV + v) * L);
      KVP_UNROLL(16)
      for (size_t i = 0; i < kNR; ++i) {
        const VF b = hn::Set(d, wp[i * kc + k]);
        KVP_UNROLL(4)
        for (size_t v = 0; v < MV; ++v) c[i][v] = hn::MulAdd(xv[v], b, c[i][v]);
      }
    }
    prefetch.upto(++step, steps);
  }
  KVP_UNROLL(16)
  for (size_t i = 0; i < kNR; ++i) {
    KVP_UNROLL(4)
    for (size_t v = 0; v < MV; ++v) hn::Store(c[i][v], d, acc + (i * MV + v) * L);
  }
  if (!last) return;
  // Row by row: each x row's nr outputs are contiguous in y (the other order strides N floats per
  // store, a new line and often a new page each time: 5% of a 7B GEMM at M = 64).
  for (size_t j = 0; j < mrows; ++j)
    for (size_t i = 0; i < nr; ++i) y[j * N + i] = acc[i * MV * L + j];
}

size_t GemmAccFloats(size_t panels, size_t rows) {
  return panels * kMV * hn::Lanes(DF()) * ((rows + kNR - 1) / kNR * kNR);
}

template <typename WT>
void GemmPackedBlockT(const float* xT, size_t M, size_t K, size_t p0, size_t p1, const WT* W, size_t ldw, size_t rows,
                      size_t k0, size_t kc, float* wtile, float* acc, float* y, size_t N, size_t n0,
                      const PrefetchRows& next) {
  const size_t L = hn::Lanes(DF());
  const size_t P = kMV * L;
  const bool first = k0 == 0, last = k0 + kc >= K;
  const size_t tiles = (rows + kNR - 1) / kNR;
  const size_t p_end = std::min(p1, (M + P - 1) / P);
  const size_t panels = p_end > p0 ? p_end - p0 : 0;
  SpreadPrefetch prefetch(next);
  const size_t steps = tiles * panels * ((kc + kPrefetchEvery - 1) / kPrefetchEvery);
  size_t step = 0;
  for (size_t t = 0; t < rows; t += kNR) {
    const size_t nr = std::min(kNR, rows - t);
    PackWTile(W + t * ldw, ldw, nr, kc, wtile);
    // One W tile (L1) against every x^T panel slice of the range (L2).
    for (size_t p = p0; p < p0 + panels; ++p) {
      const size_t r0 = p * P;
      const size_t w = PanelWidth(M, r0, L);
      const size_t mrows = std::min(w, M - r0);
      const float* xp = xT + r0 * K + k0 * w;
      float* a = acc + ((p - p0) * tiles + t / kNR) * kNR * P;
      float* yt = y + r0 * N + n0 + t;
      if (w == P)
        PackedTile<kMV>(xp, wtile, kc, a, first, last, nr, mrows, yt, N, prefetch, step, steps);
      else if (kMV > 2 && w == 2 * L)
        PackedTile<2>(xp, wtile, kc, a, first, last, nr, mrows, yt, N, prefetch, step, steps);
      else
        PackedTile<1>(xp, wtile, kc, a, first, last, nr, mrows, yt, N, prefetch, step, steps);
    }
  }
}

void GemmPackedBlock(const float* xT, size_t M, size_t K, size_t p0, size_t p1, const void* W, DType wt, size_t ldw,
                     size_t rows, size_t k0, size_t kc, float* wtile, float* acc, float* y, size_t N, size_t n0,
                     const PrefetchRows& next) {
  switch (wt) {
    case DType::F32:
      return GemmPackedBlockT(xT, M, K, p0, p1, static_cast<const float*>(W), ldw, rows, k0, kc, wtile, acc, y, N,
                              n0, next);
    case DType::F16:
      return GemmPackedBlockT(xT, M, K, p0, p1, static_cast<const hwy::float16_t*>(W), ldw, rows, k0, kc, wtile, acc,
                              y, N, n0, next);
    case DType::BF16:
      return GemmPackedBlockT(xT, M, K, p0, p1, static_cast<const hwy::bfloat16_t*>(W), ldw, rows, k0, kc, wtile,
                              acc, y, N, n0, next);
  }
}

// ---------------------------------------------------------------------------------------------
// Attention tile.
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

size_t AttnScratchFloats(int group, int head_dim, int max_tile) {
  const size_t L = hn::Lanes(DF());
  const size_t padded = (size_t(max_tile) + L - 1) / L * L;
  return 2 * size_t(max_tile) * head_dim + size_t(head_dim) * padded + size_t(group) * padded + kMaxLanes;
}

void AttnTileImpl(const AttnTile& t) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const size_t hd = size_t(t.head_dim);
  const size_t n = size_t(t.j1 - t.j0);
  const size_t npad = (n + L - 1) / L * L;
  float* kt = t.scratch;
  float* vt = kt + n * hd;
  float* kT = vt + n * hd;  // [hd][npad]: keys along the vector lanes
  float* sbase = kT + hd * npad;
  // Rows [j0, j1) of one head are contiguous, so each tile is a single span conversion.
  WidenKv(t.k, t.kv, size_t(t.j0) * hd, n * hd, kt);
  WidenKv(t.v, t.kv, size_t(t.j0) * hd, n * hd, vt);
  // Transposing K once per tile lets every head of the group compute L scores per FMA with no
  // horizontal sums, each score one FMA chain over d. The transpose only pays for itself on full
  // tiles; short ones (a causal diagonal, a window edge, a decode chunk's tail) keep one dot
  // product per key.
  const bool transposed = n >= 4 * L;
  for (size_t dd = 0; transposed && dd < hd; ++dd) {
    float* row = kT + dd * npad;
    for (size_t j = 0; j < n; ++j) row[j] = kt[j * hd + dd];
    for (size_t j = n; j < npad; ++j) row[j] = 0.0f;
  }
  const VF div = hn::Set(d, t.score_divisor);

  for (int g = 0; g < t.group; ++g) {
    const float* q = t.q + size_t(g) * hd;
    float* s = sbase + size_t(g) * npad;
    if (!transposed) {
      for (size_t j = 0; j < n; ++j) {
        const float* kr = kt + j * hd;
        DotTile<1, 1>(&q, &kr, 0, hd, s + j, 1);
      }
    }
    size_t jb = transposed ? 0 : npad;
    for (; jb + 4 * L <= npad; jb += 4 * L) {
      VF a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
      for (size_t dd = 0; dd < hd; ++dd) {
        const VF qd = hn::Set(d, q[dd]);
        const float* row = kT + dd * npad + jb;
        a0 = hn::MulAdd(qd, hn::LoadU(d, row), a0);
        a1 = hn::MulAdd(qd, hn::LoadU(d, row + L), a1);
        a2 = hn::MulAdd(qd, hn::LoadU(d, row + 2 * L), a2);
        a3 = hn::MulAdd(qd, hn::LoadU(d, row + 3 * L), a3);
      }
      hn::StoreU(a0, d, s + jb);
      hn::StoreU(a1, d, s + jb + L);
      hn::StoreU(a2, d, s + jb + 2 * L);
      hn::StoreU(a3, d, s + jb + 3 * L);
    }
    for (; jb < npad; jb += L) {
      VF a = hn::Zero(d);
      for (size_t dd = 0; dd < hd; ++dd) a = hn::MulAdd(hn::Set(d, q[dd]), hn::LoadU(d, kT + dd * npad + jb), a);
      hn::StoreU(a, d, s + jb);
    }
    // Padding lanes are -inf: they never win the max and exp() turns them into 0.
    for (size_t j = n; j < npad; ++j) s[j] = kNegInf;
    VF vmax = hn::Set(d, kNegInf);
    if (t.score_scale > 0.0f || t.softcap > 0.0f) {
      // Gemma-2's scaling and soft-capping: the same scalar formula as the reference policy.
      for (size_t j = 0; j < n; ++j) s[j] = attention_score(s[j], t.score_divisor, t.score_scale, t.softcap, t.act);
      for (size_t j = 0; j < npad; j += L) vmax = hn::Max(vmax, hn::LoadU(d, s + j));
    } else {
      for (size_t j = 0; j < npad; j += L) {
        const VF v = RoundAct(d, hn::Div(RoundAct(d, hn::LoadU(d, s + j), t.act), div), t.act);
        hn::StoreU(v, d, s + j);
        vmax = hn::Max(vmax, v);
      }
    }
    const float tile_max = hn::GetLane(hn::MaxOfLanes(d, vmax));
    const float m_old = t.m[g];
    const float m_new = std::max(m_old, tile_max);
    const float scale = (m_old == kNegInf) ? 0.0f : std::exp(m_old - m_new);
    const VF vm = hn::Set(d, m_new);
    VF vsum = hn::Zero(d);
    for (size_t j = 0; j < npad; j += L) {
      const VF p = hn::Exp(d, hn::Sub(hn::LoadU(d, s + j), vm));
      vsum = hn::Add(vsum, p);
      // As FlashAttention: the sum keeps fp32 probabilities, P.V uses them rounded to act.
      hn::StoreU(RoundAct(d, p, t.act), d, s + j);
    }
    t.l[g] = t.l[g] * scale + hn::GetLane(hn::SumOfLanes(d, vsum));
    t.m[g] = m_new;

    ScaleAccumulatePV(t.acc + size_t(g) * hd, s, vt, n, hd, scale,
                      [](VF x, VF y, VF z) { return hn::MulAdd(x, y, z); });
  }
}

// ---------------------------------------------------------------------------------------------
float SumSquares(const float* x, size_t dim) {
  size_t i = 0;
  float ss = hn::GetLane(hn::SumOfLanes(DF(), SquaresByLane(x, dim, &i)));
  for (; i < dim; ++i) ss += x[i] * x[i];
  return ss;
}

void RmsnormRow(const float* x, size_t dim, const float* w, float eps, DType act, float* y) {
  NormRowFromSquares(x, dim, w, false, SumSquares(x, dim), eps, act, y);
}

void RmsnormRowFp32Gain(const float* x, size_t dim, const float* g, float eps, DType act, float* y) {
  NormRowFromSquares(x, dim, g, true, SumSquares(x, dim), eps, act, y);
}

void RoundInplace(DType t, float* x, size_t n) {
  if (t == DType::F32) return;
  const DF d;
  const size_t L = hn::Lanes(d);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(RoundAct(d, hn::LoadU(d, x + i), t), d, x + i);
  for (; i < n; ++i) x[i] = round_to(t, x[i]);
}

long RoundFindNonfinite(DType t, float* x, size_t n) {
  const DF d;
  const size_t L = hn::Lanes(d);
  long first_bad = -1;
  size_t i = 0;
  for (; i + L <= n; i += L) {
    const VF v = RoundAct(d, hn::LoadU(d, x + i), t);
    hn::StoreU(v, d, x + i);
    if (first_bad < 0) {
      const intptr_t lane = hn::FindFirstTrue(d, hn::Not(hn::IsFinite(v)));
      if (lane >= 0) first_bad = long(i) + long(lane);
    }
  }
  for (; i < n; ++i) {
    x[i] = round_to(t, x[i]);
    if (first_bad < 0 && !std::isfinite(x[i])) first_bad = long(i);
  }
  return first_bad;
}

float ReadSum(const float* p, size_t n) {
  const DF d;
  const size_t L = hn::Lanes(d);
  // kStreams contiguous parts read side by side, two adds each: the access pattern the decode
  // GEMVs use, which reads faster than one stream (see DotRowsT), so that the bound they are
  // measured against is the best this pattern of reads achieves, not a lower single-stream figure.
  const size_t per = n / (kStreams * 2 * L) * 2 * L;
  VF a[kStreams][2];
  for (auto& s : a) s[0] = s[1] = hn::Zero(d);
  for (size_t i = 0; i < per; i += 2 * L) {
    KVP_UNROLL(8)
    for (size_t s = 0; s < kStreams; ++s) {
      a[s][0] = hn::Add(a[s][0], hn::LoadU(d, p + s * per + i));
      a[s][1] = hn::Add(a[s][1], hn::LoadU(d, p + s * per + i + L));
    }
  }
  VF t = hn::Zero(d);
  for (auto& s : a) t = hn::Add(t, hn::Add(s[0], s[1]));
  float sum = hn::GetLane(hn::SumOfLanes(d, t));
  for (size_t i = kStreams * per; i < n; ++i) sum += p[i];
  return sum;
}

}  // namespace HWY_NAMESPACE
}  // namespace kvp::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvp::simd {

HWY_EXPORT(FloatLanes);
HWY_EXPORT(GemmNR);
HWY_EXPORT(GemmPanelRows);
HWY_EXPORT(DotRows);
HWY_EXPORT(GemmSmall);
HWY_EXPORT(GemmPackX);
HWY_EXPORT(GemmAccFloats);
HWY_EXPORT(GemmPackedBlock);
HWY_EXPORT(AttnScratchFloats);
HWY_EXPORT(AttnTileImpl);
HWY_EXPORT(RmsnormRow);
HWY_EXPORT(RmsnormRowFp32Gain);
HWY_EXPORT(RoundInplace);
HWY_EXPORT(RoundFindNonfinite);
HWY_EXPORT(ReadSum);

size_t float_lanes() { return HWY_DYNAMIC_DISPATCH(FloatLanes)(); }
size_t gemm_nr() { return HWY_DYNAMIC_DISPATCH(GemmNR)(); }
size_t gemm_panel_rows() { return HWY_DYNAMIC_DISPATCH(GemmPanelRows)(); }
void dot_rows(const float* x, const void* W, DType wt, size_t K, size_t n0, size_t n1, size_t k0, size_t k1,
              float* y) {
  HWY_DYNAMIC_DISPATCH(DotRows)(x, W, wt, K, n0, n1, k0, k1, y);
}
void gemm_small(const float* x, size_t M, const void* W, DType wt, size_t K, size_t N, size_t n0, size_t n1,
                float* y) {
  HWY_DYNAMIC_DISPATCH(GemmSmall)(x, M, W, wt, K, N, n0, n1, y);
}
void gemm_pack_x(const float* x, size_t M, size_t K, size_t p0, size_t p1, float* xT) {
  HWY_DYNAMIC_DISPATCH(GemmPackX)(x, M, K, p0, p1, xT);
}
size_t gemm_acc_floats(size_t panels, size_t rows) { return HWY_DYNAMIC_DISPATCH(GemmAccFloats)(panels, rows); }
void gemm_packed_block(const float* xT, size_t M, size_t K, size_t p0, size_t p1, const void* W, DType wt,
                       size_t ldw, size_t rows, size_t k0, size_t kc, float* wtile, float* acc, float* y, size_t N,
                       size_t n0, const PrefetchRows& next) {
  HWY_DYNAMIC_DISPATCH(GemmPackedBlock)(xT, M, K, p0, p1, W, wt, ldw, rows, k0, kc, wtile, acc, y, N, n0, next);
}
size_t attn_tile_scratch_floats(int group, int head_dim, int max_tile) {
  return HWY_DYNAMIC_DISPATCH(AttnScratchFloats)(group, head_dim, max_tile);
}
void attn_tile(const AttnTile& t) { HWY_DYNAMIC_DISPATCH(AttnTileImpl)(t); }
void rmsnorm_row(const float* x, size_t dim, const float* w, float eps, DType act, float* y) {
  HWY_DYNAMIC_DISPATCH(RmsnormRow)(x, dim, w, eps, act, y);
}
void rmsnorm_row_fp32_gain(const float* x, size_t dim, const float* g, float eps, DType act, float* y) {
  HWY_DYNAMIC_DISPATCH(RmsnormRowFp32Gain)(x, dim, g, eps, act, y);
}
void round_inplace(DType t, float* x, size_t n) { HWY_DYNAMIC_DISPATCH(RoundInplace)(t, x, n); }
long round_find_nonfinite(DType t, float* x, size_t n) { return HWY_DYNAMIC_DISPATCH(RoundFindNonfinite)(t, x, n); }
float read_sum(const float* p, size_t n) { return HWY_DYNAMIC_DISPATCH(ReadSum)(p, n); }

}  // namespace kvp::simd
#endif  // HWY_ONCE
