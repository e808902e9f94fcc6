// Launcher of the `invariant` policy's tensor-core GEMM (cuda_invariant_gemm_kernel.cuh has the
// kernel, the argument why its bits depend on K alone, and its dispatch).
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_invariant_gemm_kernel.cuh"
#include "cuda/cuda_ops.h"

namespace kvp::cuda {

void launch_invariant_gemm(const void* xh, int M, const void* W, int store, int K, int N, float* y) {
  invariant::gemm(StreamLaunch{}, xh, M, W, store, K, N, y);
  check(cudaGetLastError(), "matmul (invariant, tensor cores)");
}

}  // namespace kvp::cuda
