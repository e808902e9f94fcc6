// Launcher of the tensor-core flash attention (cuda_attention_mma_kernel.cuh has the kernel and
// why the `invariant` policy may run decode steps through it).
#include <cstdlib>
#include <cstring>

#include "cuda/cuda_attention_mma_kernel.cuh"
#include "cuda/cuda_common.cuh"

namespace kvp::cuda {

// $KVPARITY_CUDA_ATTN_STAGES=1 copies each K/V tile before computing it instead of overlapping the
// next tile's copies with this one's arithmetic: the same bits, so one binary measures the two.
static int attention_stages() {
  static const int stages = [] {
    const char* e = std::getenv("KVPARITY_CUDA_ATTN_STAGES");
    return e && std::strcmp(e, "1") == 0 ? 1 : 2;
  }();
  return stages;
}

bool launch_attention_prefill_mma(const AttnDesc* descs, int n, int max_rows, const AttnShape& s) {
  const bool ok = attn_mma::prefill(StreamLaunch{}, descs, n, max_rows, s, attention_stages());
  if (ok) check(cudaGetLastError(), "attention (prefill, tensor cores)");
  return ok;
}

}  // namespace kvp::cuda
