#include "kernels/cpu_kernels.h"

#include <algorithm>
#include <cstring>

#include "kernels/simd_ops.h"

namespace kvp {

void CpuKernels::attention_batch(const AttentionParams* p, int n) {
  for (int i = 0; i < n; ++i) attention(p[i]);
}

void CpuKernels::embed(const TensorView& table, const int* tokens, int M, float* x) {
  const size_t dim = size_t(table.cols());
  for (int m = 0; m < M; ++m) view_to_f32(table, size_t(tokens[m]) * dim, dim, x + size_t(m) * dim);
}

void CpuKernels::add_bias(float* y, int M, const TensorView& b) {
  const auto* bias = static_cast<const float*>(b.data);
  const size_t n = size_t(b.numel());
  for (int m = 0; m < M; ++m)
    for (size_t i = 0; i < n; ++i) y[size_t(m) * n + i] += bias[i];
}

void CpuKernels::rope(float* x, int M, int n_heads, const int* row_pos, const RopeTable& table, DType act,
                      RopePairs pairs) {
  // Runs of consecutive positions (one per sequence of a batch) go to apply_rope together.
  const size_t width = size_t(n_heads) * size_t(table.head_dim());
  for (int m = 0; m < M;) {
    int e = m + 1;
    while (e < M && row_pos[e] == row_pos[e - 1] + 1) ++e;
    apply_rope(x + size_t(m) * width, e - m, n_heads, row_pos[m], table, act, pairs);
    m = e;
  }
}

void CpuKernels::silu_mul(float* gate, const float* up, size_t n, DType act) { kvp::silu_mul(gate, up, n, act); }
void CpuKernels::clamped_swiglu(float* gate, const float* up, size_t n, float alpha, float limit, DType act) {
  kvp::clamped_swiglu(gate, up, n, alpha, limit, act);
}
void CpuKernels::gelu_tanh_mul(float* gate, const float* up, size_t n, DType act) {
  kvp::gelu_tanh_mul(gate, up, n, act);
}
void CpuKernels::softcap(float* x, size_t n, float cap, DType act) { softcap_inplace(x, n, cap, act); }
void CpuKernels::scale(float* x, size_t n, float s, DType act, ScaleBy by) { scale_inplace(x, n, s, act, by); }
void CpuKernels::add(float* x, const float* y, size_t n, DType act) { add_inplace(x, y, n, act); }
void CpuKernels::copy(float* dst, const float* src, size_t n) { std::copy_n(src, n, dst); }

void CpuKernels::kv_write(const KvWrite* w, int n) {
  for (int i = 0; i < n; ++i) {
    const KvWrite& k = w[i];
    auto* base = static_cast<uint8_t*>(k.cache);
    const size_t hd = size_t(k.head_dim);
    for (int m = 0; m < k.n_rows; ++m)
      for (int h = 0; h < k.n_kv_heads; ++h) {
        const size_t at = (size_t(h) * size_t(k.capacity) + size_t(k.start_pos + m)) * hd;
        kv_encode(k.kv, k.rows + (size_t(m) * k.n_kv_heads + h) * hd, hd, base + k.kv.bytes(at));
      }
  }
}

long CpuKernels::round_check(DType t, float* x, size_t n, int) { return simd::round_find_nonfinite(t, x, n); }

void CpuKernels::to_host(void* host_dst, const void* src, size_t bytes) { std::memcpy(host_dst, src, bytes); }
void CpuKernels::to_device(void* dst, const void* host_src, size_t bytes) { std::memcpy(dst, host_src, bytes); }

}  // namespace kvp
