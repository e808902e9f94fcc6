#pragma once
// GPT-OSS's attention sinks on the GPU (AttentionParams::sinks; AttnShape::sinks holds the device
// copy): head h's sink is one more softmax column with no value. Every CUDA attention kernel
// starts the online-softmax state that it finally divides by here, as the CPU policies start
// theirs at start_softmax_state (kernels.h): m = sink, l = 1 where the layer has sinks, else the
// empty state m = -inf, l = 0. One place, so that no kernel counts the sink twice or forgets it:
//  - the kernels with one running state a row (the standard prefill, tiled and tensor-core Whole;
//    the portable kernel) start it here;
//  - those that merge partial states (the standard split-KV decode, the invariant chunked prefill
//    and chunked decode) start their partial states empty and the merged state here, so the sink
//    joins as one more chunk, once, whatever the number of chunks.
#include <cmath>

#include "cuda/cuda_device_api.cuh"
#include "cuda/cuda_ops.h"

namespace kvp::cuda {

__device__ __forceinline__ void start_state(const AttnShape& s, int h, float& m, float& l) {
  m = s.sinks != nullptr ? s.sinks[h] : -INFINITY;
  l = s.sinks != nullptr ? 1.0f : 0.0f;
}

}  // namespace kvp::cuda
