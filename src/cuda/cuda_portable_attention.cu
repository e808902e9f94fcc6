// Launcher of the `portable` policy's attention (cuda_portable_attention_kernel.cuh has the kernel).
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_portable_attention_kernel.cuh"

namespace kvp::cuda {

void launch_portable_attention(const AttnDesc* descs, int n, int max_rows, const AttnShape& s) {
  portable::attention(StreamLaunch{}, descs, n, max_rows, s);
  check(cudaGetLastError(), "attention (portable)");
}

}  // namespace kvp::cuda
