// Launcher of the tensor-core flash attention (cuda_attention_mma_kernel.cuh has the kernel and
// why the `invariant` policy may run decode steps through it; cuda_attention_split_kernel.cuh its
// decode steps).

#include <string>

#include "core/env.h"
#include "cuda/cuda_attention_split_kernel.cuh"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_fail.h"

namespace kvp::cuda {

// One stage copies each K/V tile before computing it; two overlap the next tile's copies with this
// one's arithmetic. The same bits, so $KVPARITY_CUDA_ATTN_STAGES=1 or 2 picks for every launch and
// one binary measures both. Unset: two for prefill rows, one for decode steps, whose blocks are
// many and short: with half the shared memory more of them run at once (an H100, 7B geometry:
// a batch of 64 steps over 512 keys 645 -> 385 us a layer, one step over 2048 keys 74 -> 52 us,
// over 512 level; docs/performance.md).
int forced_attention_stages() {
  static const int forced = env_int("KVPARITY_CUDA_ATTN_STAGES", 0, 1, 2);
  return forced;
}
static int attention_stages(bool decode) {
  const int forced = forced_attention_stages();
  return forced != 0 ? forced : decode ? 1 : 2;
}

bool launch_attention_prefill_mma(const AttnDesc* descs, int n, int max_rows, const AttnShape& s, bool chunked,
                                  const AttnStore& store) {
  const bool ok = attn_mma::prefill(StreamLaunch{}, descs, n, max_rows, s, attention_stages(false), chunked, store);
  if (ok) check(cudaGetLastError(), "attention (prefill, tensor cores)");
  return ok;
}

bool attention_mma_applies(const AttnShape& s) { return attn_mma::applies(s); }
int attention_mma_max_rows() { return attn_mma::kMaxRows; }

int attention_split_slots(int max_pos) { return attn_mma::split_slots(max_pos); }

// Warps a decode block: $KVPARITY_CUDA_SPLIT_WARPS = 1 (one warp copies and multiplies a chunk alone,
// the kernel before 2026-11-27) or 4 (the default); the same bits.
static int split_warps() {
  static const int warps = [] {
    const int w = env_int("KVPARITY_CUDA_SPLIT_WARPS", attn_mma::kSplitWarps, 1, attn_mma::kSplitWarps);
    if (w != 1 && w != attn_mma::kSplitWarps)
      fail_usage("KVPARITY_CUDA_SPLIT_WARPS=" + std::to_string(w) + ": 1 or " + std::to_string(attn_mma::kSplitWarps));
    return w;
  }();
  return warps;
}

bool launch_attention_split_decode_mma(const AttnDesc* descs, int n, const AttnShape& s, float* parts, int slots,
                                       unsigned* counts, const AttnStore& store) {
  const bool ok = attn_mma::split_decode(StreamLaunch{}, descs, n, s, parts, slots, counts, store,
                                         attention_stages(true), split_warps());
  if (ok) check(cudaGetLastError(), "attention (decode by chunks, tensor cores)");
  return ok;
}

}  // namespace kvp::cuda
