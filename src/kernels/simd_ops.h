#pragma once
// Block-level SIMD primitives of the `standard` policy. They are implemented once per instruction
// set with Google Highway (standard_simd.cpp) and dispatched at run time to the best one the CPU
// has, so one binary is fast on AVX-512 machines and still correct on plain SSE4 ones.
//
// Each entry point does a whole block of work: the dispatch is an indirect call, cheap per block
// but not per element. Threading lives in the callers (standard_kernels.cpp); these run on one
// thread and touch only the ranges they are given.
//
// The summation order each primitive uses is part of its contract, because that order is what the
// project measures:
//  - dot_rows / gemm_small: per output, two vector accumulators striped over k (vector i goes to
//    accumulator i%2), combined lane-wise, then a horizontal tree sum, then the k tail (fewer
//    than one vector) added in index order. Independent of how rows are grouped or threaded.
//  - gemm_packed_block: per output, one FMA chain in k order (outer-product micro-kernel), which
//    continues across k slices because the partial result is stored in fp32 and reloaded.
//  - attn_tile: a score is one FMA chain over d on full tiles (K transposed, keys along lanes) and
//    a dot_rows-style dot on short tiles; exp sums are lane-striped then tree-summed; P.V is one
//    FMA chain over the tile's keys per output lane, rescaled between tiles.
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/kv_type.h"
#include "core/quant.h"
#include "kernels/prefetch_rows.h"

namespace kvp::simd {

// fp32 lanes per vector of the dispatched target (16 on AVX-512, 8 on AVX2, 4 on SSE4).
size_t float_lanes();
// Rows of W per packed-GEMM micro-tile on the dispatched target.
size_t gemm_nr();
// Rows of x per packed-GEMM x^T panel on the dispatched target (a multiple of float_lanes()).
size_t gemm_panel_rows();

// y[n] = sum_{k in [k0,k1)} x[k] * W[n, k] for n in [n0, n1); W is [*, K] row-major in `wt`.
void dot_rows(const float* x, const void* W, DType wt, size_t K, size_t n0, size_t n1, size_t k0, size_t k1,
              float* y);

// dot_rows for a quantised W ([*, K] rows of blocks), each vector decoded in registers: bitwise
// dot_rows on the dequantised matrix. Returns false, having done nothing, when it cannot keep
// dot_rows' order: k0, k1 or K not whole blocks, or blocks not whole vector pairs.
bool dot_rows_quant(const float* x, const void* W, QuantType q, size_t K, size_t n0, size_t n1, size_t k0,
                    size_t k1, float* y);

// y[m, n] for all m < M and n in [n0, n1), with the dot_rows order (so each row of the result is
// bitwise what dot_rows gives for that x row). Meant for small M, where packing does not pay.
void gemm_small(const float* x, size_t M, const void* W, DType wt, size_t K, size_t N, size_t n0, size_t n1,
                float* y);

// Packed GEMM. x^T panels: panel p holds rows [p*P, p*P + w) with P = gemm_panel_rows() and
// w = P, or for a last panel with fewer rows the least multiple of float_lanes() that holds them;
// element (row r0+j, k) sits at xT[r0*K + k*w + j], rows past M are zero. The buffer needs
// ceil(M/P)*P*K floats.
void gemm_pack_x(const float* x, size_t M, size_t K, size_t p0, size_t p1, float* xT);
// Floats of the accumulator buffer gemm_packed_block needs for `panels` x^T panels and `rows` W rows.
size_t gemm_acc_floats(size_t panels, size_t rows);
// y[r, n0+i] = sum over k of xT(r, k) * W[i, k] for rows r of panels [p0, p1) and i < rows, one
// k slice [k0, k0+kc) per call, slices in order: the first (k0 == 0) starts each chain at zero,
// later ones resume it from `acc`, the last (k0 + kc >= K) writes y. W points at element
// (0, k0) of the block's rows, `ldw` elements apart; each micro-tile of gemm_nr() rows is widened
// to fp32 into `wtile` (gemm_nr() * kc floats) just before use. `next` (the W slice the caller
// multiplies next) is prefetched meanwhile.
void gemm_packed_block(const float* xT, size_t M, size_t K, size_t p0, size_t p1, const void* W, DType wt,
                       size_t ldw, size_t rows, size_t k0, size_t kc, float* wtile, float* acc, float* y, size_t N,
                       size_t n0, const PrefetchRows& next);

// One key tile of attention for the `group` query heads that share a KV head, folded into their
// running online-softmax state (m: running max, l: running sum of unrounded exp, acc: unnormalised
// P.V). Reads cache rows [j0, j1) only.
struct AttnTile {
  const float* q = nullptr;  // group * head_dim, heads contiguous
  int group = 1;
  int head_dim = 0;
  const void* k = nullptr;   // this KV head's rows: element (j, d) at j*head_dim + d
  const void* v = nullptr;
  KvType kv;
  int j0 = 0, j1 = 0;
  float score_divisor = 1.0f;
  float score_scale = 0.0f;  // see AttentionParams
  float softcap = 0.0f;
  DType act = DType::F32;
  float* m = nullptr;        // [group]
  float* l = nullptr;        // [group]
  float* acc = nullptr;      // [group * head_dim]
  float* scratch = nullptr;  // attn_tile_scratch_floats(...) floats
};
size_t attn_tile_scratch_floats(int group, int head_dim, int max_tile);
void attn_tile(const AttnTile& t);

// HF Llama RMSNorm of one row (see Kernels::rmsnorm); sum of squares over vector lanes.
void rmsnorm_row(const float* x, size_t dim, const float* w, float eps, DType act, float* y);
// Gemma-2 variant (see Kernels::rmsnorm_fp32_gain): one rounding after the fp32 gain.
void rmsnorm_row_fp32_gain(const float* x, size_t dim, const float* g, float eps, DType act, float* y);

// Rounds n values in place to `t` (RNE), as round_to() does per value.
void round_inplace(DType t, float* x, size_t n);
// round_inplace, then the index of the first value that is NaN or Inf, or -1: what round_span()
// in core/dtype.h returns, vectorised for the forward pass's rounding points.
long round_find_nonfinite(DType t, float* x, size_t n);

// Streaming read of n floats; returns their sum so the reads cannot be optimised away.
float read_sum(const float* p, size_t n);

}  // namespace kvp::simd
