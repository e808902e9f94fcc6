// The forward pass's element-wise operations, cache writes, rounding points and RMSNorm on the
// GPU. Each computes, per element, exactly what its CPU counterpart computes (elementwise.cpp,
// CpuKernels) with the same roundings. The kernels that rounding points fold into are
// cuda_elementwise_kernels.cuh's, launched here.
#include <cmath>

#include "core/env.h"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_elementwise_kernels.cuh"
#include "cuda/cuda_nonfinite.cuh"
#include "cuda/cuda_ops.h"

namespace kvp::cuda {
namespace {

constexpr unsigned kThreads = 256;

#define KVP_GRID_STRIDE(i, n) \
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < (n); i += size_t(gridDim.x) * blockDim.x)

template <int S>
__global__ void embed_kernel(const void* table, const int* tokens, int M, int dim, float* x) {
  pdl_entry();
  KVP_GRID_STRIDE(i, size_t(M) * dim) {
    const size_t m = i / dim, d = i % dim;
    x[i] = load_as_f32<S>(table, size_t(tokens[m]) * dim + d);
  }
}

__global__ void add_bias_kernel(float* y, int M, int N, const float* b) {
  pdl_entry();
  KVP_GRID_STRIDE(i, size_t(M) * N) y[i] += b[i % N];
}

__global__ void softcap_kernel(float* x, size_t n, float cap, int act) {
  pdl_entry();
  KVP_GRID_STRIDE(i, n) x[i] = round_act(round_act(tanhf(round_act(x[i] / cap, act)), act) * cap, act);
}

__global__ void scale_kernel(float* x, size_t n, float s, int act) {
  pdl_entry();
  KVP_GRID_STRIDE(i, n) x[i] = round_act(x[i] * s, act);
}

void after_launch(const char* what) { check(cudaGetLastError(), what); }

}  // namespace

void launch_embed(const void* table, int table_t, const int* tokens, int M, int dim, float* x) {
  const unsigned b = blocks_for(size_t(M) * dim, kThreads);
  if (table_t == kF32) launch_on_stream(embed_kernel<kF32>, dim3(b), dim3(kThreads), 0, table, tokens, M, dim, x);
  if (table_t == kF16) launch_on_stream(embed_kernel<kF16>, dim3(b), dim3(kThreads), 0, table, tokens, M, dim, x);
  if (table_t == kBF16) launch_on_stream(embed_kernel<kBF16>, dim3(b), dim3(kThreads), 0, table, tokens, M, dim, x);
  after_launch("embed");
}

void launch_add_bias(float* y, int M, int N, const float* b) {
  launch_on_stream(add_bias_kernel, dim3(blocks_for(size_t(M) * N, kThreads)), dim3(kThreads), 0, y, M, N, b);
  after_launch("add_bias");
}

void launch_softcap(float* x, size_t n, float cap, int act) {
  launch_on_stream(softcap_kernel, dim3(blocks_for(n, kThreads)), dim3(kThreads), 0, x, n, cap, act);
  after_launch("softcap");
}

void launch_scale(float* x, size_t n, float s, int act) {
  launch_on_stream(scale_kernel, dim3(blocks_for(n, kThreads)), dim3(kThreads), 0, x, n, s, act);
  after_launch("scale");
}

void launch_rope(const RopeJob* jobs, int n, int M, int hd, int rd, const int* pos, const float* cos_t,
                 const float* sin_t, int act, bool adjacent_pairs, bool once, const RopeKv& kv) {
  // $KVPARITY_CUDA_ROPE_BLOCK=1: a block per (row, head) and a pair a thread, as before 2026-11-27,
  // to time against.
  static const bool one_unit = env_switch("KVPARITY_CUDA_ROPE_BLOCK", false);
  elementwise::rope(StreamLaunch{}, jobs, n, M, hd, rd, pos, cos_t, sin_t, act, adjacent_pairs, once, kv,
                    one_unit ? elementwise::RopeLayout::OneUnit : elementwise::RopeLayout::Auto);
  after_launch("rope");
}

void launch_gated(float* gate, float* up, size_t n, int act, GatedAct how, NonFiniteSlot chk, InRound gate_in,
                  InRound up_in, OutCopy copy) {
  if (how.kind == GatedAct::kClampedSwiglu)
    elementwise::clamped_swiglu(StreamLaunch{}, gate, up, n, act, how.alpha, how.limit, chk, gate_in, up_in, copy);
  else
    elementwise::gated(StreamLaunch{}, gate, up, n, act, how.kind == GatedAct::kGeluTanh, chk, gate_in, up_in, copy);
  after_launch("gated activation");
}

void launch_add(float* x, float* y, size_t n, int act, NonFiniteSlot chk, InRound y_in) {
  elementwise::add(StreamLaunch{}, x, y, n, act, chk, y_in);
  after_launch("add");
}

void launch_to_storage(const float* x, size_t n, void* dst, int store) {
  elementwise::to_storage(StreamLaunch{}, x, n, dst, store);
  after_launch("convert");
}

void launch_round_checks(const RoundJob* jobs, int n) {
  elementwise::round_checks(StreamLaunch{}, jobs, n);
  after_launch("round");
}

void launch_rmsnorm(const float* x, int M, int dim, const float* w, float eps, int act, bool fp32_gain, float* y,
                    NonFiniteSlot chk, OutCopy copy, AddIn add) {
  elementwise::rmsnorm(StreamLaunch{}, x, M, dim, w, eps, act, fp32_gain, y, chk, copy, add);
  after_launch("rmsnorm");
}

void launch_kv_write(const KvWriteDesc* descs, int n, int max_rows, int n_kv_heads, int head_dim, int store,
                     InRound in, const float* in_base, int in_first) {
  elementwise::kv_write(StreamLaunch{}, descs, n, max_rows, n_kv_heads, head_dim, store, in, in_base, in_first);
  after_launch("kv_write");
}

}  // namespace kvp::cuda
