// The `portable` policy's blocked GEMM (prefill): per output the 16-lane fma order over K and the
// fixed tree (portable_simd.h), as the direct path computes it, with W widened once per block and
// reused by all rows.
//
// Both operands are packed split by register: within a K block, the kL-lane part s of every
// abstract 16-lane vector (lanes [s*kL, (s+1)*kL)) lies in a stream of its own. The micro-kernel
// then runs the invariant policy's one-register-per-output tile once per part, each part's
// accumulator being one of the output's kSub registers: the tile stays as register-efficient as
// with one lane group, and each of the 16 lanes still sees its terms in increasing k.
//  x (once per call, shared by all threads): per kMB-row block and K block, [part s][row tile t]
//    [vector v][row r][kL lanes]; rows past M are zero;
//  W (per thread, per kNB x kKC block): [part s][column tile][vector v][row c][kL lanes], widened
//    to fp32; rows past the block are zero.
// The last vector of a row holds its K % 16 tail zero-padded, exactly as the direct path pads it.
#include <algorithm>
#include <cstring>

#include "kernels/portable_parts.h"
#include "kernels/prefetch_rows.h"
#include "kernels/unroll.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/portable_gemm_blocked.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "kernels/portable_common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvp::psimd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

HWY_INLINE size_t TotalVectors(size_t K) { return (K + kLanes - 1) / kLanes; }

size_t PackedXFloats(size_t M, size_t K) { return round_up(M, kBR) * TotalVectors(K) * kLanes + kL; }
size_t PackedXBlockRows() { return kMB; }

// Packs rows [mb0 * kMB, ...) of x for m-blocks [mb0, mb1).
void PackX(const float* x, size_t M, size_t K, size_t mb0, size_t mb1, float* xp) {
  const size_t nvt = TotalVectors(K), kcv = kKC / kLanes;
  for (size_t b = mb0; b < mb1; ++b) {
    const size_t m0 = b * kMB;
    if (m0 >= M) break;
    const size_t mbp = round_up(std::min(kMB, M - m0), size_t(kBR));
    const size_t tiles = mbp / kBR;
    float* block = xp + m0 * nvt * kLanes;
    for (size_t kv0 = 0; kv0 < nvt; kv0 += kcv) {
      const size_t kvn = std::min(kcv, nvt - kv0);
      float* kb = block + kv0 * mbp * kLanes;
      for (size_t s = 0; s < kSub; ++s)
        for (size_t t = 0; t < tiles; ++t)
          for (size_t v = 0; v < kvn; ++v)
            for (size_t r = 0; r < size_t(kBR); ++r) {
              float* dst = kb + (((s * tiles + t) * kvn + v) * kBR + r) * kL;
              const size_t row = m0 + t * kBR + r;
              const size_t k = (kv0 + v) * kLanes + s * kL;
              const size_t n = row < M && k < K ? std::min(kL, K - k) : 0;
              if (n > 0) std::copy(x + row * K + k, x + row * K + k + n, dst);
              std::fill(dst + n, dst + kL, 0.0f);
            }
    }
  }
}

// Widens W rows [row0, row0+rows) x abstract vectors [kv0, kv0+kvn) (see above); rows up to a
// multiple of kBC are zero.
template <typename WT>
void PackW(const WT* W, size_t K, size_t row0, size_t rows, size_t kv0, size_t kvn, float* dst) {
  const DF d;
  const size_t ctiles = round_up(rows, kBC) / kBC;
  for (size_t i = 0; i < ctiles * kBC; ++i) {
    const WT* src = i < rows ? W + (row0 + i) * K : nullptr;
    for (size_t s = 0; s < kSub; ++s) {
      float* out = dst + ((s * ctiles + i / kBC) * kvn * kBC + i % kBC) * kL;
      for (size_t v = 0; v < kvn; ++v) {
        const size_t k = (kv0 + v) * kLanes + s * kL;
        float* o = out + v * kBC * kL;
        if (src == nullptr || k >= K) {
          hn::Store(hn::Zero(d), d, o);
        } else if (k + kL <= K) {
          hn::Store(LoadF(d, src + k), d, o);
        } else {
          for (size_t j = 0; j < kL; ++j) o[j] = k + j < K ? ScalarF(src + k + j) : 0.0f;
        }
      }
    }
  }
}

// One kBR x kBC register tile over kvn vectors of one part of one K block. The accumulators (one
// register of each output's kSub) start at zero on the first K block and otherwise resume from
// `accb`, so each chain runs on as if K had not been blocked.
HWY_INLINE void BlockTile(const float* xp, const float* wp, size_t kvn, float* accb, size_t acc_stride, bool first) {
  const DF d;
  VF acc[kBR][kBC];
  KVP_UNROLL(16)
  for (int r = 0; r < kBR; ++r) {
    KVP_UNROLL(16)
    for (int c = 0; c < kBC; ++c)
      acc[r][c] = first ? hn::Zero(d) : hn::Load(d, accb + size_t(r) * acc_stride + size_t(c) * kLanes);
  }
  for (size_t v = 0; v < kvn; ++v) {
    VF xv[kBR];
    KVP_UNROLL(16)
    for (int r = 0; r < kBR; ++r) xv[r] = hn::Load(d, xp + size_t(r) * kL);
    KVP_UNROLL(16)
    for (int c = 0; c < kBC; ++c) {
      const VF w = hn::Load(d, wp + size_t(c) * kL);
      KVP_UNROLL(16)
      for (int r = 0; r < kBR; ++r) acc[r][c] = Fma(xv[r], w, acc[r][c]);
    }
    xp += kBR * kL;
    wp += kBC * kL;
  }
  KVP_UNROLL(16)
  for (int r = 0; r < kBR; ++r) {
    KVP_UNROLL(16)
    for (int c = 0; c < kBC; ++c) hn::Store(acc[r][c], d, accb + size_t(r) * acc_stride + size_t(c) * kLanes);
  }
}

size_t BlockedScratchFloats(size_t M, size_t K) { return kNB * kKC + round_up(M, kBR) * kNB * kLanes + kL; }

template <typename WT>
void MatmulBlockedT(const float* xp, size_t M, const WT* W, size_t K, size_t N, size_t n0, size_t n1, float* y,
                    float* scratch) {
  const size_t nvt = TotalVectors(K), kcv = kKC / kLanes;
  float* wc = reinterpret_cast<float*>(round_up(reinterpret_cast<uintptr_t>(scratch), kL * sizeof(float)));
  // The 16-lane accumulators of all M rows for one W block are revisited once per K block; the
  // block is narrowed for large M so that they (up to 384 KB) stay in L2 next to x and W.
  const size_t acc_row_bytes = round_up(M, kBR) * kLanes * sizeof(float);
  const size_t nbk = std::max<size_t>(kBC, std::min(kNB, (size_t(384) << 10) / acc_row_bytes / kBC * kBC));
  float* accb = wc + kNB * kKC;  // [row][column][16 lanes]
  const size_t acc_stride = nbk * kLanes;
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
        next.base = reinterpret_cast<const char*>(W + nb0 * K + (kv0 + kcv) * kLanes);
        next.rows = nb;
        next.row_bytes = std::min(kKC, K - (kv0 + kcv) * kLanes) * sizeof(WT);
      } else if (nb0 + nb < n1) {
        next.base = reinterpret_cast<const char*>(W + (nb0 + nb) * K);
        next.rows = std::min(nbk, n1 - nb0 - nb);
        next.row_bytes = std::min(kKC, K) * sizeof(WT);
      }
      // A few lines per register tile (bursts are dropped; see invariant_simd.cpp).
      SpreadPrefetch prefetch(next);
      const size_t calls = ctiles * kSub * (round_up(M, kBR) / kBR);
      size_t call = 0;
      for (size_t m0 = 0; m0 < M; m0 += kMB) {
        const size_t tiles = round_up(std::min(kMB, M - m0), kBR) / kBR;
        const float* xk = xp + m0 * nvt * kLanes + kv0 * tiles * kBR * kLanes;
        float* acc_m = accb + m0 * acc_stride;
        // One W tile part (in L1) against every row tile of the block.
        for (size_t ct = 0; ct < ctiles; ++ct)
          for (size_t s = 0; s < kSub; ++s) {
            const float* wt = wc + (s * ctiles + ct) * kvn * kBC * kL;
            for (size_t t = 0; t < tiles; ++t) {
              prefetch.upto(++call, calls);
              BlockTile(xk + (s * tiles + t) * kvn * kBR * kL, wt, kvn,
                        acc_m + t * kBR * acc_stride + ct * kBC * kLanes + s * kL, acc_stride, kv0 == 0);
            }
          }
      }
    }
    for (size_t r = 0; r < M; ++r)
      for (size_t c = 0; c < nb; ++c) y[r * N + nb0 + c] = Tree(accb + r * acc_stride + c * kLanes);
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

}  // namespace HWY_NAMESPACE
}  // namespace kvp::psimd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvp::psimd {

HWY_EXPORT(PackedXFloats);
HWY_EXPORT(PackedXBlockRows);
HWY_EXPORT(PackX);
HWY_EXPORT(BlockedScratchFloats);
HWY_EXPORT(MatmulBlocked);

size_t packed_x_floats(size_t M, size_t K) { return HWY_DYNAMIC_DISPATCH(PackedXFloats)(M, K); }
size_t packed_x_blocks(size_t M) {
  const size_t rows = HWY_DYNAMIC_DISPATCH(PackedXBlockRows)();
  return (M + rows - 1) / rows;
}
void pack_x(const float* x, size_t M, size_t K, size_t b0, size_t b1, float* xp) {
  HWY_DYNAMIC_DISPATCH(PackX)(x, M, K, b0, b1, xp);
}
size_t matmul_blocked_scratch_floats(size_t M, size_t K) { return HWY_DYNAMIC_DISPATCH(BlockedScratchFloats)(M, K); }
void matmul_blocked(const float* xp, size_t M, const void* W, DType wt, size_t K, size_t N, size_t n0, size_t n1,
                    float* y, float* scratch) {
  HWY_DYNAMIC_DISPATCH(MatmulBlocked)(xp, M, W, wt, K, N, n0, n1, y, scratch);
}

}  // namespace kvp::psimd
#endif  // HWY_ONCE
