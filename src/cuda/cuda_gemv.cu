// Launcher of the `standard` policy's decode GEMM (cuda_gemv_kernel.cuh has the kernel and why).
#include "core/env.h"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_gemv_kernel.cuh"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_runtime_api.h"

namespace kvp::cuda {
namespace {
EnvSwitch g_gemv{"KVPARITY_CUDA_GEMV", false};
}  // namespace

void set_standard_gemv(bool on) { g_gemv.set(on); }
bool standard_gemv_on() { return g_gemv.on(); }

bool standard_gemv_takes(const void* x, int M, const void* W, int store, int K) {
  return g_gemv.on() && gemv::applies(M, store, x, W, K);
}

void launch_standard_gemv(const void* x, int M, const void* W, int store, int K, int N, float* y) {
  gemv::gemv(StreamLaunch{}, x, M, W, store, K, N, y);
  check(cudaGetLastError(), "matmul (standard, decode GEMV)");
}

}  // namespace kvp::cuda
