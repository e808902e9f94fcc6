#pragma once
// A fused rounding point's NaN/Inf report, shared by every kernel that rounds its own output
// (cuda_ops.h's NonFiniteSlot): the smallest flat index wins, as round_check_kernel's.
#include "cuda/cuda_device_api.cuh"
#include "cuda/cuda_ops.h"

namespace kvp::cuda {

__device__ __forceinline__ void note_nonfinite(const NonFiniteSlot& c, size_t i, float v) {
  if (c.hits == nullptr || isfinite(v)) return;
  const unsigned long long kind = isnan(v) ? 0ull : (v > 0.0f ? 1ull : 2ull);
  atomicMin(c.hits + c.slot, (static_cast<unsigned long long>(i) << 2) | kind);
  *c.any = 1;
}

}  // namespace kvp::cuda
