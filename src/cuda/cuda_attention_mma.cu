// Launcher of the tensor-core flash attention (cuda_attention_mma_kernel.cuh has the kernel and
// why the `invariant` policy may run decode steps through it).
#include "cuda/cuda_attention_mma_kernel.cuh"
#include "cuda/cuda_common.cuh"

namespace kvp::cuda {

bool launch_attention_prefill_mma(const AttnDesc* descs, int n, int max_rows, const AttnShape& s) {
  const bool ok = attn_mma::prefill(StreamLaunch{}, descs, n, max_rows, s);
  if (ok) check(cudaGetLastError(), "attention (prefill, tensor cores)");
  return ok;
}

}  // namespace kvp::cuda
