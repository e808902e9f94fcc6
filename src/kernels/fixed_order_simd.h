#pragma once
// What the two fixed-order policies have in common: `invariant` (invariant_simd.h) and `portable`
// (portable_simd.h) each supply these per-block primitives, and one CPU kernel class
// (fixed_order_kernels.cpp) splits the work across threads the same way for both. The primitives
// decide the reduction orders; the threading only ever splits independent outputs, so it cannot
// change them.
#include <cstddef>

#include "core/dtype.h"
#include "core/kv_type.h"

namespace kvp {

// One query row of attention for a run of query heads that share a KV head.
struct AttnRow {
  const float* q = nullptr;  // n_q heads * head_dim, contiguous
  int n_q = 1;
  int head_dim = 0;
  const void* k = nullptr;   // this KV head's rows: element (j, d) at j*head_dim + d
  const void* v = nullptr;
  KvType kv;
  int first = 0, last = 0;   // keys [first, last] (inclusive)
  float score_divisor = 1.0f;
  float score_scale = 0.0f;  // see AttentionParams
  float softcap = 0.0f;
  const float* sinks = nullptr;  // n_q values (host) or null: see AttentionParams
  DType act = DType::F32;
  float* out = nullptr;      // n_q * head_dim, unrounded
  float* scratch = nullptr;  // attn_row_scratch_floats(head_dim, n_q) floats
};

// Keys per attention tile; tiles are anchored at position 0, so a row's tiles do not depend on how
// many keys came from the cache.
constexpr int kAttnTile = 64;

struct FixedOrderSimd {
  // y[m, n] for m < M, n in [n0, n1), W [N, K] row-major, widened in registers (small M).
  void (*matmul_direct)(const float* x, size_t M, const void* W, DType wt, size_t K, size_t N, size_t n0, size_t n1,
                        float* y);
  // The same bits for large M: x packed once (m-blocks [b0, b1) of packed_x_blocks(M), so the
  // packing can be split across threads), W widened block by block into per-thread scratch.
  size_t (*packed_x_floats)(size_t M, size_t K);
  size_t (*packed_x_blocks)(size_t M);
  void (*pack_x)(const float* x, size_t M, size_t K, size_t b0, size_t b1, float* xp);
  size_t (*matmul_blocked_scratch_floats)(size_t M, size_t K);
  void (*matmul_blocked)(const float* xp, size_t M, const void* W, DType wt, size_t K, size_t N, size_t n0,
                         size_t n1, float* y, float* scratch);
  size_t (*attn_row_scratch_floats)(int head_dim, int n_q);
  void (*attn_row)(const AttnRow& a);
  void (*rmsnorm_row)(const float* x, size_t dim, const float* w, float eps, DType act, float* y);
  void (*rmsnorm_row_fp32_gain)(const float* x, size_t dim, const float* g, float eps, DType act, float* y);
  // Element-wise operations with elementary functions (exp, tanh): null means the CPU ones that
  // every policy shares (elementwise.h, which call libm).
  void (*silu_mul)(float* gate, const float* up, size_t n, DType act) = nullptr;
  void (*gelu_tanh_mul)(float* gate, const float* up, size_t n, DType act) = nullptr;
  void (*softcap)(float* x, size_t n, float cap, DType act) = nullptr;
  void (*clamped_swiglu)(float* gate, const float* up, size_t n, float alpha, float limit, DType act) = nullptr;
  // RoPE from the table's libm-free twin (RopeTable::portable()) instead of the table itself.
  bool portable_rope = false;
};

}  // namespace kvp
