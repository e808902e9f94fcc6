// The GPU's read bandwidth as bench reports it beside decode speed: one streaming pass over a
// buffer far larger than L2, 16-byte loads, the best of several passes.
#include <algorithm>

#include "cuda/cuda_common.cuh"
#include "cuda/cuda_runtime_api.h"

namespace kvp::cuda {
namespace {

__global__ void read_kernel(const float4* p, size_t n, float* sink) {
  pdl_entry();
  float acc = 0.0f;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float4 v = p[i];
    acc += v.x + v.y + v.z + v.w;
  }
  // Written only when impossible in practice, so the loads cannot be optimised away.
  if (acc == 1.2345e-30f) *sink = acc;
}

}  // namespace

double read_bandwidth(size_t bytes, int repeats) {
  const size_t n = std::max<size_t>(bytes / sizeof(float4), 1);
  void* buf = alloc(n * sizeof(float4) + sizeof(float));
  KVP_CUDA_CHECK(cudaMemsetAsync(buf, 0, n * sizeof(float4) + sizeof(float), stream()));
  cudaEvent_t a, b;
  KVP_CUDA_CHECK(cudaEventCreate(&a));
  KVP_CUDA_CHECK(cudaEventCreate(&b));
  const auto* p = static_cast<const float4*>(buf);
  auto* sink = reinterpret_cast<float*>(static_cast<char*>(buf) + n * sizeof(float4));
  const unsigned blocks = unsigned(sm_count()) * 8u;
  double best = 0.0;
  for (int r = 0; r < std::max(1, repeats) + 1; ++r) {  // the first pass warms up
    KVP_CUDA_CHECK(cudaEventRecord(a, stream()));
    read_kernel<<<blocks, 512, 0, stream()>>>(p, n, sink);
    KVP_CUDA_CHECK(cudaEventRecord(b, stream()));
    KVP_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0.0f;
    KVP_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (r > 0 && ms > 0.0f) best = std::max(best, double(n * sizeof(float4)) / (double(ms) * 1e-3));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  release(buf);
  return best;
}

}  // namespace kvp::cuda
