// Attention on the GPU for the `standard` policy, as GPU stacks do it:
//  prefill (a slice of several rows): the tensor-core kernel where it applies
//    (cuda_attention_mma.cu), else FlashAttention-2 style on CUDA cores
//    (cuda_attention_prefill_kernel.cuh): one warp per (row, query head) folds the keys in 64-key
//    tiles anchored at position 0 into an online softmax.
//  decode (a slice of one row): split-KV "flash decoding" (cuda_attention_decode_kernel.cuh),
//    whose split depends on the number of cached keys: a decode step sums in another order than
//    the prefill row of the same position, the phenomenon measured.
// Scores are rounded where HF's eager code rounds them (attention_score in kernels.h); as in
// FlashAttention the softmax sum keeps the fp32 probabilities while P.V uses them rounded to the
// compute dtype (the CPU standard policy does the same, standard_simd.cpp).
#include "core/env.h"
#include "cuda/cuda_attention_decode_kernel.cuh"
#include "cuda/cuda_attention_prefill_kernel.cuh"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_runtime_api.h"

namespace kvp::cuda {

void launch_attention_prefill(const AttnDesc* descs, int n, int max_rows, const AttnShape& s, const AttnStore& store) {
  if (launch_attention_prefill_mma(descs, n, max_rows, s, false, store)) return;
  attn_prefill::prefill(StreamLaunch{}, descs, n, max_rows, s, store);
  check(cudaGetLastError(), "attention (prefill)");
}

// $KVPARITY_CUDA_DECODE_WHOLE=0: 16-bit K/V through the 8-loads-a-round path as before
// 2026-11-27 (the same bits), for scripts/gpu_session.sh to time both; set_decode_whole_rows for
// the CUDA suite to compare them.
namespace {
EnvSwitch g_whole{"KVPARITY_CUDA_DECODE_WHOLE", true};
}  // namespace
void set_decode_whole_rows(bool on) { g_whole.set(on); }
bool decode_whole_rows() { return g_whole.on(); }

void launch_attention_decode(const AttnDesc* descs, int n, int max_splits, const AttnShape& s, float* parts,
                             unsigned* counts, const AttnStore& store) {
  attn_decode::decode(StreamLaunch{}, descs, n, max_splits, s, parts, counts, store, decode_whole_rows());
  check(cudaGetLastError(), "attention (decode)");
}

}  // namespace kvp::cuda
