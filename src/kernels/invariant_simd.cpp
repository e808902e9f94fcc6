// Highway implementations of the `invariant` primitives (invariant_simd.h), compiled once per
// target by foreach_target.h and dispatched at run time like standard_simd.cpp.
//
// Everything here serves one rule: the arithmetic that produces an output element is decided by
// the reduction length (K, head_dim, the row's key range) and nothing else. Tiles of different
// shapes exist only to use the registers well; each tile runs, per output, exactly the chain the
// contract in invariant_simd.h describes, so any tile shape yields the same bits.
#include "kernels/invariant_simd.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "kernels/dequant_rows.h"
#include "kernels/kernels.h"
#include "kernels/prefetch_rows.h"
#include "kernels/unroll.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/invariant_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "kernels/simd_common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvp::isimd {
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

// Register tiles (rows of x by rows of W, one accumulator each). They must fit the register file
// with the R x loads and one W vector: 32 vector registers on AVX-512, 16 below.
#if HWY_TARGET <= HWY_AVX3
constexpr int kBR = 4, kBC = 6;  // blocked GEMM: 24 accumulators
constexpr int kDC = 4;           // direct, up to 4 rows: 16 accumulators
#else
constexpr int kBR = 3, kBC = 4;  // 12 accumulators
constexpr int kDC = 2;           // 8 accumulators
#endif

// Blocked GEMM geometry. One packed kBC x kKC W tile (12 KB on AVX-512) stays in L1 while the
// packed x streams; the kNB x kKC fp32 W block (96 KB) and kMB x kKC of packed x (128 KB) stay in
// L2; the M x kNB spilled vector accumulators (3 KB per row on AVX-512) are touched once per
// tile per K block.
constexpr size_t kKC = 512;  // floats; a multiple of every target's lane count
constexpr size_t kNB = 48;    // a multiple of kBC on every target
constexpr size_t kMB = 16 * kBR;  // a multiple of kBR, so only the last m-block has padded rows

HWY_INLINE size_t round_up(size_t a, size_t b) { return (a + b - 1) / b * b; }

// The zero-padded last vector of a row whose length is not a multiple of L.
template <typename WT>
HWY_INLINE VF LoadTail(DF d, const WT* p, size_t n) {
  HWY_ALIGN float buf[kMaxLanes] = {};
  for (size_t i = 0; i < n; ++i) buf[i] = ScalarF(p + i);
  return hn::Load(d, buf);
}

// The one horizontal tree every output goes through: pairwise in lane order — adjacent lanes,
// then adjacent pairs, and so on (lanes 0+1, 2+3, ..., then (0+1)+(2+3), ...).
HWY_INLINE float Reduce(DF d, VF acc) {
  HWY_ALIGN float t[kMaxLanes];
  hn::Store(acc, d, t);
  for (size_t w = hn::Lanes(d); w > 1; w /= 2)
    for (size_t i = 0; i < w / 2; ++i) t[i] = t[2 * i] + t[2 * i + 1];
  return t[0];
}

// The same tree for up to L accumulators at once, with whole-vector operations: each level adds
// the even and the odd lanes of two vectors (ConcatEven + ConcatOdd), which is exactly one level
// of Reduce for every accumulator involved, and packs two accumulators' partial sums into one
// vector. After log2(L) levels lane i holds accumulator i's sum. v[n..L) are ignored (zeroed).
HWY_INLINE void ReduceMany(DF d, VF* v, size_t n, float* out) {
  const size_t L = hn::Lanes(d);
#if HWY_TARGET == HWY_SCALAR
  (void)L;
  for (size_t i = 0; i < n; ++i) out[i] = Reduce(d, v[i]);  // one lane: nothing to pair
#else
  for (size_t i = n; i < L; ++i) v[i] = hn::Zero(d);
  for (size_t count = L; count > 1; count /= 2)
    for (size_t j = 0; j < count / 2; ++j)
      v[j] = hn::Add(hn::ConcatEven(d, v[2 * j + 1], v[2 * j]), hn::ConcatOdd(d, v[2 * j + 1], v[2 * j]));
  if (n == L) {
    hn::StoreU(v[0], d, out);
  } else {
    HWY_ALIGN float t[kMaxLanes];
    hn::Store(v[0], d, t);
    std::copy(t, t + n, out);
  }
#endif
}

// ---------------------------------------------------------------------------------------------
// Direct tile: R rows of x by C rows of W over the whole K, W widened in registers. `xtails[r]`
// is row r's zero-padded last vector (used when tail > 0).
template <int R, int C, typename WT>
HWY_INLINE void DirectTile(const float* const* xs, const float* const* xtails, const WT* const* ws, size_t nv,
                           size_t tail, float* out, size_t out_stride) {
  const DF d;
  const size_t L = hn::Lanes(d);
  // The W tails are widened before the accumulators come alive: the scalar fp16 conversion is a
  // call, and a call inside their live range would push all of them to the stack.
  HWY_ALIGN float wtails[C * kMaxLanes];
  if (tail > 0) {
    for (int c = 0; c < C; ++c) {
      float* dst = wtails + size_t(c) * L;
      for (size_t i = 0; i < L; ++i) dst[i] = i < tail ? ScalarF(ws[c] + nv * L + i) : 0.0f;
    }
  }
  const float* xp[R];
  const WT* wp[C];
  for (int r = 0; r < R; ++r) xp[r] = xs[r];
  for (int c = 0; c < C; ++c) wp[c] = ws[c];
  VF acc[R][C];
  KVP_UNROLL(16)
  for (int r = 0; r < R; ++r) {
    KVP_UNROLL(16)
    for (int c = 0; c < C; ++c) acc[r][c] = hn::Zero(d);
  }
  for (size_t v = 0; v < nv; ++v) {
    const size_t k = v * L;
    VF xv[R];
    KVP_UNROLL(16)
    for (int r = 0; r < R; ++r) xv[r] = hn::LoadU(d, xp[r] + k);
    KVP_UNROLL(16)
    for (int c = 0; c < C; ++c) {
      const VF w = LoadF(d, wp[c] + k);
      KVP_UNROLL(16)
      for (int r = 0; r < R; ++r) acc[r][c] = hn::MulAdd(xv[r], w, acc[r][c]);
    }
  }
  if (tail > 0) {
    VF xv[R];
    KVP_UNROLL(16)
    for (int r = 0; r < R; ++r) xv[r] = hn::LoadU(d, xtails[r]);
    KVP_UNROLL(16)
    for (int c = 0; c < C; ++c) {
      const VF w = hn::Load(d, wtails + size_t(c) * L);
      KVP_UNROLL(16)
      for (int r = 0; r < R; ++r) acc[r][c] = hn::MulAdd(xv[r], w, acc[r][c]);
    }
  }
  if (C == 1) {
    KVP_UNROLL(16)
    for (int r = 0; r < R; ++r) out[size_t(r) * out_stride] = Reduce(d, acc[r][0]);
    return;
  }
  // Through memory, so that no accumulator is ever indexed at run time (which would keep them
  // all on the stack during the loop above).
  HWY_ALIGN float spill[R * C * kMaxLanes];
  KVP_UNROLL(16)
  for (int r = 0; r < R; ++r) {
    KVP_UNROLL(16)
    for (int c = 0; c < C; ++c) hn::Store(acc[r][c], d, spill + size_t(r * C + c) * L);
  }
  VF v[kMaxLanes];
  for (int r = 0; r < R; ++r)
    for (size_t c0 = 0; c0 < size_t(C); c0 += L) {
      const size_t n = std::min(L, size_t(C) - c0);
      for (size_t c = 0; c < n; ++c) v[c] = hn::Load(d, spill + (size_t(r * C) + c0 + c) * L);
      ReduceMany(d, v, n, out + size_t(r) * out_stride + c0);
    }
}

// Copies the last K % L elements of rows [0, M) of x into zero-padded vectors (L floats per row).
void FillXTails(const float* x, size_t M, size_t K, size_t nv, size_t tail, float* xt) {
  const size_t L = hn::Lanes(DF());
  for (size_t m = 0; m < M; ++m) {
    float* dst = xt + m * L;
    std::fill(dst, dst + L, 0.0f);
    std::copy(x + m * K + nv * L, x + m * K + nv * L + tail, dst);
  }
}

template <int R, typename WT>
HWY_INLINE void DirectRows(const float* x, const float* xt, size_t m, const WT* W, size_t K, size_t N, size_t nb,
                           size_t ne, size_t nv, size_t tail, float* y) {
  const size_t L = hn::Lanes(DF());
  const float* xs[R];
  const float* xts[R];
  for (int r = 0; r < R; ++r) {
    xs[r] = x + (m + size_t(r)) * K;
    xts[r] = xt + (m + size_t(r)) * L;
  }
  size_t n = nb;
  for (; n + kDC <= ne; n += kDC) {
    const WT* ws[kDC];
    for (int c = 0; c < kDC; ++c) ws[c] = W + (n + size_t(c)) * K;
    DirectTile<R, kDC>(xs, xts, ws, nv, tail, y + m * N + n, N);
  }
  for (; n < ne; ++n) {
    const WT* w = W + n * K;
    DirectTile<R, 1>(xs, xts, &w, nv, tail, y + m * N + n, N);
  }
}

template <typename WT>
void MatmulDirectT(const float* x, size_t M, const WT* W, size_t K, size_t N, size_t n0, size_t n1, float* y) {
  const size_t L = hn::Lanes(DF());
  const size_t nv = K / L, tail = K % L;
  HWY_ALIGN float xt_small[4 * kMaxLanes];
  std::vector<float> xt_big;
  float* xt = xt_small;
  if (tail > 0) {
    if (M > 4) {
      xt_big.resize(M * L);
      xt = xt_big.data();
    }
    FillXTails(x, M, K, nv, tail, xt);
  }
  if (M == 1) {
    // The rows are walked as kStreams contiguous parts side by side, one row of each per tile:
    // long sequential streams for the hardware prefetchers, as in the standard policy's GEMV
    // (DotRowsT in standard_simd.cpp, which has the measurements), and kStreams independent FMA
    // chains, which one chain per output needs to keep the core from waiting on FMA latency.
    ForStreamRows(
        n0, n1,
        [&](const size_t* rows) {
          const WT* ws[kStreams];
          for (size_t s = 0; s < kStreams; ++s) ws[s] = W + rows[s] * K;
          float out[kStreams];
          DirectTile<1, kStreams>(&x, &xt, ws, nv, tail, out, 0);
          for (size_t s = 0; s < kStreams; ++s) y[rows[s]] = out[s];
        },
        [&](size_t n) {
          const WT* w = W + n * K;
          DirectTile<1, 1>(&x, &xt, &w, nv, tail, y + n, 0);
        });
    return;
  }
  // A block of W rows small enough to stay in L2 is reused by every group of four x rows.
  const size_t block = std::max<size_t>(kDC, (256u << 10) / (K * sizeof(WT)) / kDC * kDC);
  for (size_t nb = n0; nb < n1; nb += block) {
    const size_t ne = std::min(n1, nb + block);
    size_t m = 0;
    for (; m + 4 <= M; m += 4) DirectRows<4>(x, xt, m, W, K, N, nb, ne, nv, tail, y);
    switch (M - m) {
      case 3: DirectRows<3>(x, xt, m, W, K, N, nb, ne, nv, tail, y); break;
      case 2: DirectRows<2>(x, xt, m, W, K, N, nb, ne, nv, tail, y); break;
      case 1: DirectRows<1>(x, xt, m, W, K, N, nb, ne, nv, tail, y); break;
      default: break;
    }
  }
}

void MatmulDirect(const float* x, size_t M, const void* W, DType wt, size_t K, size_t N, size_t n0, size_t n1,
                  float* y) {
  switch (wt) {
    case DType::F32: return MatmulDirectT(x, M, static_cast<const float*>(W), K, N, n0, n1, y);
    case DType::F16: return MatmulDirectT(x, M, static_cast<const hwy::float16_t*>(W), K, N, n0, n1, y);
    case DType::BF16: return MatmulDirectT(x, M, static_cast<const hwy::bfloat16_t*>(W), K, N, n0, n1, y);
  }
}

// ---------------------------------------------------------------------------------------------
// Blocked GEMM. Both operands are packed so that the micro-kernel reads two sequential streams:
//  x (once per call, shared by all threads): for each kMB-row block and each K block, row tiles
//    of kBR rows, each [vector v][row r][L lanes]; rows past M are zero;
//  W (per thread, per kNB x kKC block): tiles of kBC rows, each [vector v][row c][L lanes],
//    widened to fp32; rows past the block are zero.
// In both, the last vector of a row holds the K % L tail zero-padded, exactly the vector the
// direct path builds, so the per-output chain is the same sequence of FMAs.
HWY_INLINE size_t TotalVectors(size_t K, size_t L) { return (K + L - 1) / L; }

size_t PackedXFloats(size_t M, size_t K) {
  const size_t L = hn::Lanes(DF());
  return round_up(M, kBR) * TotalVectors(K, L) * L + L;
}

// Packs rows [mb0 * kMB, ...) of x for m-blocks [mb0, mb1).
void PackX(const float* x, size_t M, size_t K, size_t mb0, size_t mb1, float* xp) {
  const size_t L = hn::Lanes(DF());
  const size_t nvt = TotalVectors(K, L), kcv = kKC / L;
  for (size_t b = mb0; b < mb1; ++b) {
    const size_t m0 = b * kMB;
    if (m0 >= M) break;
    const size_t mbp = round_up(std::min(kMB, M - m0), size_t(kBR));
    float* block = xp + m0 * nvt * L;
    for (size_t kv0 = 0; kv0 < nvt; kv0 += kcv) {
      const size_t kvn = std::min(kcv, nvt - kv0);
      float* kb = block + kv0 * mbp * L;
      for (size_t t = 0; t < mbp / kBR; ++t)
        for (size_t v = 0; v < kvn; ++v)
          for (size_t r = 0; r < size_t(kBR); ++r) {
            float* dst = kb + ((t * kvn + v) * kBR + r) * L;
            const size_t row = m0 + t * kBR + r;
            const size_t k = (kv0 + v) * L;
            const size_t n = row < M ? std::min(L, K - k) : 0;
            if (n > 0) std::copy(x + row * K + k, x + row * K + k + n, dst);
            std::fill(dst + n, dst + L, 0.0f);
          }
    }
  }
}

// Widens W rows [row0, row0+rows) x vectors [kv0, kv0+kvn) into kBC-row tiles (see above);
// rows up to a multiple of kBC are zero.
template <typename WT>
void PackW(const WT* W, size_t K, size_t row0, size_t rows, size_t kv0, size_t kvn, float* dst) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const size_t rows_p = round_up(rows, kBC);
  const size_t full = K / L;  // vectors with no tail
  const size_t vfull = std::min(kvn, full > kv0 ? full - kv0 : 0);  // whole vectors in this block
  for (size_t i = 0; i < rows_p; ++i) {
    float* out = dst + (i / kBC) * kvn * kBC * L + (i % kBC) * L;
    if (i >= rows) {
      for (size_t v = 0; v < kvn; ++v) hn::Store(hn::Zero(d), d, out + v * kBC * L);
      continue;
    }
    const WT* src = W + (row0 + i) * K + kv0 * L;
    for (size_t v = 0; v < vfull; ++v) hn::Store(LoadF(d, src + v * L), d, out + v * kBC * L);
    if (vfull < kvn) hn::Store(LoadTail(d, src + vfull * L, K - (kv0 + vfull) * L), d, out + vfull * kBC * L);
  }
}

// One kBR x kBC register tile over kvn vectors of one K block. The accumulators start at zero on
// the first K block and otherwise resume from `accb`, so each output's chain runs on exactly as if
// K had not been blocked.
HWY_INLINE void BlockTile(const float* xp, const float* wp, size_t kvn, float* accb, size_t acc_stride, bool first) {
  const DF d;
  const size_t L = hn::Lanes(d);
  VF acc[kBR][kBC];
  KVP_UNROLL(16)
  for (int r = 0; r < kBR; ++r) {
    KVP_UNROLL(16)
    for (int c = 0; c < kBC; ++c)
      acc[r][c] = first ? hn::Zero(d) : hn::Load(d, accb + size_t(r) * acc_stride + size_t(c) * L);
  }
  for (size_t v = 0; v < kvn; ++v) {
    VF xv[kBR];
    KVP_UNROLL(16)
    for (int r = 0; r < kBR; ++r) xv[r] = hn::Load(d, xp + size_t(r) * L);
    KVP_UNROLL(16)
    for (int c = 0; c < kBC; ++c) {
      const VF w = hn::Load(d, wp + size_t(c) * L);
      KVP_UNROLL(16)
      for (int r = 0; r < kBR; ++r) acc[r][c] = hn::MulAdd(xv[r], w, acc[r][c]);
    }
    xp += kBR * L;
    wp += kBC * L;
  }
  KVP_UNROLL(16)
  for (int r = 0; r < kBR; ++r) {
    KVP_UNROLL(16)
    for (int c = 0; c < kBC; ++c) hn::Store(acc[r][c], d, accb + size_t(r) * acc_stride + size_t(c) * L);
  }
}

size_t BlockedScratchFloats(size_t M, size_t K) {
  const size_t L = hn::Lanes(DF());
  return kNB * kKC + round_up(M, kBR) * kNB * L + L;
}

template <typename WT>
void MatmulBlockedT(const float* xp, size_t M, const WT* W, size_t K, size_t N, size_t n0, size_t n1, float* y,
                    float* scratch) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const size_t nvt = TotalVectors(K, L), kcv = kKC / L;
  float* wc = reinterpret_cast<float*>(round_up(reinterpret_cast<uintptr_t>(scratch), L * sizeof(float)));
  // The accumulators of all M rows for one W block are revisited once per K block; the block is
  // narrowed for large M so that they (up to 384 KB) stay in L2 next to the x and W blocks.
  const size_t nbk = std::max<size_t>(kBC, std::min(kNB, (size_t(384) << 10) / (round_up(M, kBR) * L * sizeof(float)) / kBC * kBC));
  float* accb = wc + kNB * kKC;  // [M rows][nbk columns] vector accumulators
  const size_t acc_stride = nbk * L;
  // W is read from memory once per call: each kNB x kKC block is widened once and then used by
  // all M rows, block by block of kMB rows (whose packed x stays in L2).
  for (size_t nb0 = n0; nb0 < n1; nb0 += nbk) {
    const size_t nb = std::min(nbk, n1 - nb0);
    const size_t ctiles = round_up(nb, kBC) / kBC;
    for (size_t kv0 = 0; kv0 < nvt; kv0 += kcv) {
      const size_t kvn = std::min(kcv, nvt - kv0);
      PackW(W, K, nb0, nb, kv0, kvn, wc);
      // The block packed next is prefetched over this block's tiles (prefetch_rows.h says why).
      PrefetchRows next;
      next.stride = K * sizeof(WT);
      if (kv0 + kcv < nvt) {
        next.base = reinterpret_cast<const char*>(W + nb0 * K + (kv0 + kcv) * L);
        next.rows = nb;
        next.row_bytes = std::min(kcv * L, K - (kv0 + kcv) * L) * sizeof(WT);
      } else if (nb0 + nb < n1) {
        next.base = reinterpret_cast<const char*>(W + (nb0 + nb) * K);
        next.rows = std::min(nbk, n1 - nb0 - nb);
        next.row_bytes = std::min(kcv * L, K) * sizeof(WT);
      }
      // Issued a few lines per register tile: one burst per W tile was ~100 lines at M = 64, most
      // of them dropped, and widening W then waited on memory (perf: ~5% of a 7B GEMM).
      SpreadPrefetch prefetch(next);
      const size_t calls = ctiles * (round_up(M, kBR) / kBR);
      size_t call = 0;
      for (size_t m0 = 0; m0 < M; m0 += kMB) {
        const size_t tiles = round_up(std::min(kMB, M - m0), kBR) / kBR;
        const float* xk = xp + m0 * nvt * L + kv0 * tiles * kBR * L;
        float* acc_m = accb + m0 * acc_stride;
        // One W tile (in L1) against every row tile of the block.
        for (size_t ct = 0; ct < ctiles; ++ct)
          for (size_t t = 0; t < tiles; ++t) {
            prefetch.upto(++call, calls);
            BlockTile(xk + t * kvn * kBR * L, wc + ct * kvn * kBC * L, kvn, acc_m + t * kBR * acc_stride + ct * kBC * L,
                      acc_stride, kv0 == 0);
          }
      }
    }
    VF v[kMaxLanes];
    for (size_t r = 0; r < M; ++r) {
      float* yr = y + r * N + nb0;
      for (size_t c0 = 0; c0 < nb; c0 += L) {
        const size_t n = std::min(L, nb - c0);
        for (size_t c = 0; c < n; ++c) v[c] = hn::Load(d, accb + r * acc_stride + (c0 + c) * L);
        ReduceMany(d, v, n, yr + c0);
      }
    }
  }
}

void MatmulBlocked(const float* xp, size_t M, const void* W, DType wt, size_t K, size_t N, size_t n0, size_t n1,
                   float* y, float* scratch) {
  switch (wt) {
    case DType::F32: return MatmulBlockedT(xp, M, static_cast<const float*>(W), K, N, n0, n1, y, scratch);
    case DType::F16: return MatmulBlockedT(xp, M, static_cast<const hwy::float16_t*>(W), K, N, n0, n1, y, scratch);
    case DType::BF16: return MatmulBlockedT(xp, M, static_cast<const hwy::bfloat16_t*>(W), K, N, n0, n1, y, scratch);
  }
}

// ---------------------------------------------------------------------------------------------
// Attention.
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

size_t AttnRowScratchFloats(int head_dim, int n_q) {
  const size_t L = hn::Lanes(DF());
  const size_t tpad = round_up(size_t(kAttnTile), L);
  return 2 * size_t(kAttnTile) * size_t(head_dim) + tpad + 2 * size_t(n_q) + L;
}

void AttnRowImpl(const AttnRow& a) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const size_t hd = size_t(a.head_dim);
  const size_t T = size_t(kAttnTile);
  const size_t nv = hd / L, tail = hd % L;
  float* kt = a.scratch;
  float* vt = kt + T * hd;
  float* s = vt + T * hd;
  float* m = s + round_up(T, L);
  float* l = m + a.n_q;
  float* qt = l + a.n_q;  // the current head's zero-padded last q vector
  start_softmax_state(a.sinks, a.n_q, m, l);
  std::fill(a.out, a.out + size_t(a.n_q) * hd, 0.0f);
  const VF div = hn::Set(d, a.score_divisor);
  const bool scalar_scores = a.score_scale > 0.0f || a.softcap > 0.0f;

  for (int c = a.first / kAttnTile; c <= a.last / kAttnTile; ++c) {
    const int js = std::max(a.first, c * kAttnTile);
    const int je = std::min(a.last + 1, (c + 1) * kAttnTile);
    const size_t n = size_t(je - js);
    const size_t npad = round_up(n, L);
    // Rows [js, je) of one head are contiguous, so each tile is one span conversion.
    WidenKv(a.k, a.kv, size_t(js) * hd, n * hd, kt);
    WidenKv(a.v, a.kv, size_t(js) * hd, n * hd, vt);
    for (int g = 0; g < a.n_q; ++g) {
      const float* q = a.q + size_t(g) * hd;
      if (tail > 0) FillXTails(q, 1, hd, nv, tail, qt);
      // Scores: each one the matmul order over head_dim (a key is one "W row").
      size_t j = 0;
      for (; j + 4 <= n; j += 4) {
        const float* ks[4] = {kt + j * hd, kt + (j + 1) * hd, kt + (j + 2) * hd, kt + (j + 3) * hd};
        DirectTile<1, 4>(&q, &qt, ks, nv, tail, s + j, 0);
      }
      for (; j < n; ++j) {
        const float* kr = kt + j * hd;
        DirectTile<1, 1>(&q, &qt, &kr, nv, tail, s + j, 0);
      }
      // Padding lanes are -inf: they never win the max and exp() turns them into 0.
      for (size_t jj = n; jj < npad; ++jj) s[jj] = kNegInf;
      VF vmax = hn::Set(d, kNegInf);
      if (scalar_scores) {
        for (size_t jj = 0; jj < n; ++jj)
          s[jj] = attention_score(s[jj], a.score_divisor, a.score_scale, a.softcap, a.act);
        for (size_t jj = 0; jj < npad; jj += L) vmax = hn::Max(vmax, hn::LoadU(d, s + jj));
      } else {
        // attention_score's divisor path, lane by lane (RoundAct is round_to bit for bit).
        for (size_t jj = 0; jj < npad; jj += L) {
          const VF v = RoundAct(d, hn::Div(RoundAct(d, hn::LoadU(d, s + jj), a.act), div), a.act);
          hn::StoreU(v, d, s + jj);
          vmax = hn::Max(vmax, v);
        }
      }
      const float tile_max = hn::GetLane(hn::MaxOfLanes(d, vmax));
      const float m_old = m[g];
      const float m_new = std::max(m_old, tile_max);
      const float scale = (m_old == kNegInf) ? 0.0f : std::exp(m_old - m_new);
      const VF vm = hn::Set(d, m_new);
      VF vsum = hn::Zero(d);
      for (size_t jj = 0; jj < npad; jj += L) {
        const VF p = hn::Exp(d, hn::Sub(hn::LoadU(d, s + jj), vm));
        vsum = hn::Add(vsum, p);
        // As FlashAttention: the sum keeps fp32 probabilities, P.V uses them rounded to act.
        hn::StoreU(RoundAct(d, p, a.act), d, s + jj);
      }
      l[g] = l[g] * scale + Reduce(d, vsum);
      m[g] = m_new;

      ScaleAccumulatePV(a.out + size_t(g) * hd, s, vt, n, hd, scale,
                        [](VF x, VF y, VF z) { return hn::MulAdd(x, y, z); });
    }
  }
  for (int g = 0; g < a.n_q; ++g) {
    float* o = a.out + size_t(g) * hd;
    for (size_t dd = 0; dd < hd; ++dd) o[dd] /= l[g];
  }
}

// ---------------------------------------------------------------------------------------------
float SumSquares(const float* x, size_t dim) {
  size_t i = 0;
  float ss = Reduce(DF(), SquaresByLane(x, dim, &i));
  for (; i < dim; ++i) ss = std::fma(x[i], x[i], ss);
  return ss;
}

void RmsnormRow(const float* x, size_t dim, const float* w, float eps, DType act, float* y) {
  NormRowFromSquares(x, dim, w, false, SumSquares(x, dim), eps, act, y);
}

void RmsnormRowFp32Gain(const float* x, size_t dim, const float* g, float eps, DType act, float* y) {
  NormRowFromSquares(x, dim, g, true, SumSquares(x, dim), eps, act, y);
}

size_t FloatLanes() { return hn::Lanes(DF()); }
size_t PackedXBlockRows() { return kMB; }

}  // namespace HWY_NAMESPACE
}  // namespace kvp::isimd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvp::isimd {

HWY_EXPORT(FloatLanes);
HWY_EXPORT(MatmulDirect);
HWY_EXPORT(BlockedScratchFloats);
HWY_EXPORT(PackedXFloats);
HWY_EXPORT(PackX);
HWY_EXPORT(PackedXBlockRows);
HWY_EXPORT(MatmulBlocked);
HWY_EXPORT(AttnRowScratchFloats);
HWY_EXPORT(AttnRowImpl);
HWY_EXPORT(RmsnormRow);
HWY_EXPORT(RmsnormRowFp32Gain);

size_t float_lanes() { return HWY_DYNAMIC_DISPATCH(FloatLanes)(); }
void matmul_direct(const float* x, size_t M, const void* W, DType wt, size_t K, size_t N, size_t n0, size_t n1,
                   float* y) {
  HWY_DYNAMIC_DISPATCH(MatmulDirect)(x, M, W, wt, K, N, n0, n1, y);
}
size_t matmul_blocked_scratch_floats(size_t M, size_t K) { return HWY_DYNAMIC_DISPATCH(BlockedScratchFloats)(M, K); }
size_t packed_x_floats(size_t M, size_t K) { return HWY_DYNAMIC_DISPATCH(PackedXFloats)(M, K); }
size_t packed_x_blocks(size_t M) { return (M + HWY_DYNAMIC_DISPATCH(PackedXBlockRows)() - 1) / HWY_DYNAMIC_DISPATCH(PackedXBlockRows)(); }
void pack_x(const float* x, size_t M, size_t K, size_t b0, size_t b1, float* xp) {
  HWY_DYNAMIC_DISPATCH(PackX)(x, M, K, b0, b1, xp);
}
void matmul_blocked(const float* xp, size_t M, const void* W, DType wt, size_t K, size_t N, size_t n0, size_t n1,
                    float* y, float* scratch) {
  HWY_DYNAMIC_DISPATCH(MatmulBlocked)(xp, M, W, wt, K, N, n0, n1, y, scratch);
}
size_t attn_row_scratch_floats(int head_dim, int n_q) { return HWY_DYNAMIC_DISPATCH(AttnRowScratchFloats)(head_dim, n_q); }
void attn_row(const AttnRow& a) { HWY_DYNAMIC_DISPATCH(AttnRowImpl)(a); }
void rmsnorm_row(const float* x, size_t dim, const float* w, float eps, DType act, float* y) {
  HWY_DYNAMIC_DISPATCH(RmsnormRow)(x, dim, w, eps, act, y);
}
void rmsnorm_row_fp32_gain(const float* x, size_t dim, const float* g, float eps, DType act, float* y) {
  HWY_DYNAMIC_DISPATCH(RmsnormRowFp32Gain)(x, dim, g, eps, act, y);
}

const FixedOrderSimd& ops() {
  static const FixedOrderSimd table{matmul_direct,   packed_x_floats,         packed_x_blocks,
                                    pack_x,          matmul_blocked_scratch_floats, matmul_blocked,
                                    attn_row_scratch_floats, attn_row,     rmsnorm_row,
                                    rmsnorm_row_fp32_gain};
  return table;
}

}  // namespace kvp::isimd
#endif  // HWY_ONCE
