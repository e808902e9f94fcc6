#pragma once
// What the three CPU policies share: the forward pass's element-wise operations, cache writes and
// rounding points on host memory. Each policy (reference, standard, invariant, portable) derives from this
// and supplies the reductions.
#include "kernels/kernels.h"

namespace kvp {

class CpuKernels : public Kernels {
 public:
  Device device() const final { return Device::Cpu; }
  void attention_batch(const AttentionParams* p, int n) final;
  void embed(const TensorView& table, const int* tokens, int M, float* x) final;
  void add_bias(float* y, int M, const TensorView& b) final;
  void rope(float* x, int M, int n_heads, const int* row_pos, const RopeTable& table, DType act,
            RopePairs pairs) override;
  // The elementary functions' ops: the portable policy brings its own exp/tanh and RoPE table.
  void silu_mul(float* gate, const float* up, size_t n, DType act) override;
  void gelu_tanh_mul(float* gate, const float* up, size_t n, DType act) override;
  void clamped_swiglu(float* gate, const float* up, size_t n, float alpha, float limit, DType act) override;
  void softcap(float* x, size_t n, float cap, DType act) override;
  void scale(float* x, size_t n, float s, DType act, ScaleBy by) final;
  void add(float* x, const float* y, size_t n, DType act) final;
  void copy(float* dst, const float* src, size_t n) final;
  void kv_write(const KvWrite* w, int n) final;
  long round_check(DType t, float* x, size_t n, int slot) final;
  std::vector<NonFiniteHit> pending_nonfinite() final { return {}; }
  void to_host(void* host_dst, const void* src, size_t bytes) final;
  void to_device(void* dst, const void* host_src, size_t bytes) final;
};

}  // namespace kvp
