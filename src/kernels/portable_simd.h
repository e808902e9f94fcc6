#pragma once
// Block-level primitives of the `portable` policy (Highway, dispatched at run time like
// invariant_simd.h, whose guarantees they keep). Their results are a function of the inputs alone:
// the same bits on AVX-512, AVX2 and the scalar fallback (and, by the same specification, any other
// machine with IEEE-754 fp32), because
//  - every reduction runs in one abstract order of kLanes = 16 fp32 lanes that no target's vector
//    width changes: lane i accumulates the terms k = i, i + 16, i + 32, ... in increasing k, the
//    last group of 16 zero-padded; an AVX-512 target holds the 16 lanes in one register, AVX2 in
//    two, the 128-bit fallback in four, a scalar target in sixteen. The 16 lane sums are then
//    added in one fixed tree, folding halves: t[i] += t[i + 8] (i < 8), t[i] += t[i + 4],
//    t[i] += t[i + 2], t[0] += t[1];
//  - only correctly rounded operations are used (+, -, *, /, sqrt, fused multiply-add where the
//    specification says fma), and the compiler may not contract a*b+c into an fma on its own
//    (the project builds with -ffp-contract=off); targets without an fma instruction call
//    std::fma, which is exact everywhere;
//  - exp and tanh are this file's own, built from those operations with fixed constants (no libm,
//    no Highway approximations), and RoPE's cos/sin table comes from portable_math.h.
// The orders, per output:
//  - matmul: the 16-lane order over K with acc = fma(x[k], W[n, k], acc), then the tree;
//  - attention row: keys in tiles of kAttnTile anchored at position 0, online softmax folded tile
//    by tile; a score is the matmul order over head_dim; a tile's exp-sum is the 16-lane order over
//    the tile's keys (padding keys contribute exp(-inf) = 0) then the tree; the running sum is
//    l = l * scale + tile_sum (a multiply, then an add); P.V is one fma chain over the tile's keys
//    per output element; the output is divided by l at the end;
//  - rmsnorm row: sum of x^2 in the 16-lane order with fma, the tree, then
//    1 / sqrt(sum / dim + eps).
#include <cstddef>

#include "kernels/fixed_order_simd.h"

namespace kvp::psimd {

constexpr size_t kLanes = 16;  // the abstract vector of every reduction

const FixedOrderSimd& ops();

// The elementary functions, one value at a time through the dispatched target's vector code (for
// tests and for callers that need the kernels' exact values).
float exp_f32(float x);
float tanh_f32(float x);

}  // namespace kvp::psimd
