#pragma once
// Block-level SIMD primitives of the `invariant` policy (Highway, dispatched at run time like
// simd_ops.h). Threading lives in invariant_kernels.cpp and only ever splits independent outputs.
//
// The reduction order of every output is part of the contract, and it is a function of the
// reduction length alone — never of M, of how rows/columns are grouped into tiles, of blocking,
// of the thread that runs it, or of how many keys sit in the cache:
//  - matmul (all entry points): output (m, n) is ONE vector accumulator of L = float_lanes() lanes,
//    acc = 0, then acc = fma(x[m, vL..vL+L), W[n, vL..vL+L), acc) for v = 0, 1, ... in order, the
//    last vector zero-padded when L does not divide K; then one fixed horizontal tree
//    (Highway's SumOfLanes for the dispatched target). fp16/bf16 weights are widened exactly, so
//    whether they are widened in registers (matmul_direct) or into an fp32 block first
//    (matmul_blocked) does not change a bit. K blocking spills the vector accumulator itself, so
//    the chain continues unchanged across blocks.
//  - attention row: keys in fixed tiles [cT, (c+1)T) anchored at position 0 (clipped to the
//    row's causal/window range), online softmax folded tile by tile in increasing c. A score is
//    the matmul order over head_dim; a tile's exp-sum is lane-striped over the tile's keys then
//    tree-summed; P.V is one FMA chain over the tile's keys per output lane. Each query head is
//    computed on its own, so heads may be grouped or split across threads freely.
//  - rmsnorm row: sum of squares in four vector accumulators striped over dim, a fixed combine,
//    a tree sum, then the tail in index order.
#include <cstddef>

#include "core/dtype.h"
#include "kernels/fixed_order_simd.h"

namespace kvp::isimd {

size_t float_lanes();

// y[m, n] for m < M, n in [n0, n1), W [N, K] row-major in `wt`, widened in registers. Best for
// small M (decode, batched decode), where the weights stream from memory once.
void matmul_direct(const float* x, size_t M, const void* W, DType wt, size_t K, size_t N, size_t n0, size_t n1,
                   float* y);

// Same results bit for bit, for large M. x is first packed (pack_x, once per call, shared by all
// threads; m-blocks [b0, b1) of packed_x_blocks(M) so the packing can be split too); then each
// thread widens its W blocks once into fp32 scratch that all rows reuse, and the vector
// accumulators live in scratch between K blocks.
size_t packed_x_floats(size_t M, size_t K);
size_t packed_x_blocks(size_t M);
void pack_x(const float* x, size_t M, size_t K, size_t b0, size_t b1, float* xp);
size_t matmul_blocked_scratch_floats(size_t M, size_t K);
void matmul_blocked(const float* xp, size_t M, const void* W, DType wt, size_t K, size_t N, size_t n0, size_t n1,
                    float* y, float* scratch);

size_t attn_row_scratch_floats(int head_dim, int n_q);
void attn_row(const AttnRow& a);

void rmsnorm_row(const float* x, size_t dim, const float* w, float eps, DType act, float* y);
void rmsnorm_row_fp32_gain(const float* x, size_t dim, const float* g, float eps, DType act, float* y);

// The functions above, for fixed_order_kernels.cpp.
const FixedOrderSimd& ops();

}  // namespace kvp::isimd
