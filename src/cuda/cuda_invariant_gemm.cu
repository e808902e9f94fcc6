// Launcher of the `invariant` policy's tensor-core GEMM (cuda_invariant_gemm_kernel.cuh has the
// kernel, the argument why its bits depend on K alone, and its dispatch).
#include <cstdlib>
#include <cstring>

#include "cuda/cuda_common.cuh"
#include "cuda/cuda_invariant_gemm_kernel.cuh"
#include "cuda/cuda_ops.h"

namespace kvp::cuda {

// $KVPARITY_CUDA_GEMM_RING=0 takes the register-prefetch kernel for decode-sized M instead of the
// shared-memory ring: the same bits, so that one binary measures the two against each other.
static bool ring_on() {
  static const bool on = [] {
    const char* e = std::getenv("KVPARITY_CUDA_GEMM_RING");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

void launch_invariant_gemm(const void* xh, int M, const void* W, int store, int K, int N, float* y) {
  invariant::gemm(StreamLaunch{}, xh, M, W, store, K, N, y, ring_on());
  check(cudaGetLastError(), "matmul (invariant, tensor cores)");
}

}  // namespace kvp::cuda
