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

bool launch_attention_prefill_mma(const AttnDesc* descs, int n, int max_rows, const AttnShape& s, bool chunked) {
  const bool ok = attn_mma::prefill(StreamLaunch{}, descs, n, max_rows, s, attention_stages(), chunked);
  if (ok) check(cudaGetLastError(), "attention (prefill, tensor cores)");
  return ok;
}

bool attention_mma_applies(const AttnShape& s) { return attn_mma::applies(s); }
int attention_mma_max_rows() { return attn_mma::kMaxRows; }

int attention_split_slots(int max_pos) { return attn_mma::split_slots(max_pos); }

bool launch_attention_split_decode_mma(const AttnDesc* descs, int n, const AttnShape& s, float* parts, int slots,
                                       unsigned* counts, const AttnStore& store) {
  const bool ok = attn_mma::split_decode(StreamLaunch{}, descs, n, s, parts, slots, counts, store, attention_stages());
  if (ok) check(cudaGetLastError(), "attention (decode by chunks, tensor cores)");
  return ok;
}

}  // namespace kvp::cuda
