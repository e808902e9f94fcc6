#pragma once
// The `portable` primitives that live in files of their own (portable_gemm_blocked.cpp,
// portable_attention.cpp); portable_simd.cpp gathers them into psimd::ops(). The contracts are
// FixedOrderSimd's and the orders portable_simd.h's.
#include <cstddef>

#include "kernels/fixed_order_simd.h"

namespace kvp::psimd {

size_t packed_x_floats(size_t M, size_t K);
size_t packed_x_blocks(size_t M);
void pack_x(const float* x, size_t M, size_t K, size_t b0, size_t b1, float* xp);
size_t matmul_blocked_scratch_floats(size_t M, size_t K);
void matmul_blocked(const float* xp, size_t M, const void* W, DType wt, size_t K, size_t N, size_t n0, size_t n1,
                    float* y, float* scratch);

size_t attn_row_scratch_floats(int head_dim, int n_q);
void attn_row(const AttnRow& a);

}  // namespace kvp::psimd
