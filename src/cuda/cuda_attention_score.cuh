#pragma once
// The attention score of one query-key dot product, rounded where HF's eager code rounds it
// (attention_score in kernels.h): the dot to P, the scale (or division) to P, then Gemma-2's
// soft cap (/cap, tanh, *cap, each to P). Shared by the CUDA-core and tensor-core kernels.
#include "cuda/cuda_device_api.cuh"
#include "cuda/cuda_ops.h"

namespace kvp::cuda {

__device__ __forceinline__ float attn_score(float dot, const AttnShape& s) {
  float x = round_act(dot, s.act);
  x = s.score_scale > 0.0f ? round_act(x * s.score_scale, s.act) : round_act(x / s.score_divisor, s.act);
  if (s.softcap > 0.0f) x = round_act(round_act(tanhf(round_act(x / s.softcap, s.act)), s.act) * s.softcap, s.act);
  return x;
}

}  // namespace kvp::cuda
