// Launcher of the wgmma family of the `invariant` GEMM (cuda_wgmma_gemm_kernel.cuh has the
// kernel, the argument why its bits depend on K alone, and its dispatch; cuda_wgmma_tma_gemm.cu the
// TMA-fed kernel of the same family).
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/cuda_common.cuh"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_runtime_api.h"
#include "cuda/cuda_wgmma_gemm_kernel.cuh"

namespace kvp::cuda {

// KVPARITY_CUDA_SM90A: the build's architectures include 90a (CMakeLists.txt), whose machine code
// the driver loads on compute capability 9.0 (H100, H200, GH200) and nowhere else. Not probed by a
// launch, which could fall inside a stream capture; a kernel without that code traps instead.
bool wgmma_kernels_available() {
#if defined(KVPARITY_CUDA_SM90A)
  static const bool ok = compute_capability() == 90;
  return ok;
#else
  return false;
#endif
}

void launch_wgmma_gemm(const void* xh, int M, const void* W, int store, int K, int N, const GemmOut& y,
                       WgmmaTile tile) {
  if (is_tma(tile)) return launch_wgmma_tma_gemm(xh, M, W, store, K, N, y, tile);
  const auto* x16 = static_cast<const uint16_t*>(xh);
  const auto* w16 = static_cast<const uint16_t*>(W);
  if (store == kF16) wgmma::gemm_as<kF16>(StreamLaunch{}, x16, M, w16, K, N, y, tile, gemm_tile_group());
  if (store == kBF16) wgmma::gemm_as<kBF16>(StreamLaunch{}, x16, M, w16, K, N, y, tile, gemm_tile_group());
}

}  // namespace kvp::cuda
