// Launchers of the `portable` policy's GPU kernels (cuda_portable_kernels.cuh has the kernels,
// their orders and their dispatch).
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_portable_kernels.cuh"

namespace kvp::cuda {

void launch_portable_matmul(const float* x, int M, const void* W, int store, int K, int N, float* y) {
  portable::matmul(StreamLaunch{}, x, M, W, store, K, N, y);
  check(cudaGetLastError(), "matmul (portable)");
}

void launch_portable_rmsnorm(const float* x, int M, int dim, const float* w, float eps, int act, bool fp32_gain,
                             float* y, NonFiniteSlot chk) {
  portable::rmsnorm(StreamLaunch{}, x, M, dim, w, eps, act, fp32_gain, y, chk);
  check(cudaGetLastError(), "rmsnorm (portable)");
}

void launch_portable_gated(float* gate, const float* up, size_t n, int act, GatedAct how, NonFiniteSlot chk) {
  const unsigned blocks = blocks_for(n, portable::kThreads);
  if (how.kind == GatedAct::kClampedSwiglu)
    portable::clamped_swiglu(StreamLaunch{}, blocks, gate, up, n, act, how.alpha, how.limit, chk);
  else
    portable::gated(StreamLaunch{}, blocks, gate, up, n, act, how.kind == GatedAct::kGeluTanh, chk);
  check(cudaGetLastError(), "gated activation (portable)");
}

void launch_portable_softcap(float* x, size_t n, float cap, int act) {
  portable::softcap(StreamLaunch{}, blocks_for(n, portable::kThreads), x, n, cap, act);
  check(cudaGetLastError(), "softcap (portable)");
}

}  // namespace kvp::cuda
