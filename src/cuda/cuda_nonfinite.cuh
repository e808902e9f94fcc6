#pragma once
// What a kernel that is also a rounding point does with the value it stores, shared by every such
// kernel: the NaN/Inf report (cuda_ops.h's NonFiniteSlot; the smallest flat index wins, as
// round_check_kernel's) and the 16-bit copy of a cuBLAS input (OutCopy).
#include "cuda/cuda_device_api.cuh"
#include "cuda/cuda_ops.h"

namespace kvp::cuda {

__device__ __forceinline__ void note_nonfinite(const NonFiniteSlot& c, size_t i, float v) {
  if (c.hits == nullptr || isfinite(v)) return;
  const unsigned long long kind = isnan(v) ? 0ull : (v > 0.0f ? 1ull : 2ull);
  atomicMin(c.hits + c.slot, (static_cast<unsigned long long>(i) << 2) | kind);
  *c.any = 1;
}

__device__ __forceinline__ void copy_out(const OutCopy& c, size_t i, float v) {
  if (c.dst == nullptr) return;
  if (c.store == kF16)
    store_from_f32<kF16>(c.dst, i, v);
  else if (c.store == kBF16)
    store_from_f32<kBF16>(c.dst, i, v);
  else
    store_from_f32<kF32>(c.dst, i, v);
}

// v stored at out as an attention launch's AttnStore says: rounded when it is the rounding point,
// reported and copied at its flat index from base, as launch_round_checks would have done after it.
__device__ __forceinline__ void store_attention(const AttnStore& st, float* out, float v) {
  if (st.act >= 0) v = round_act(v, st.act);
  if (!st.copy.only) *out = v;
  if (st.base == nullptr) return;
  const size_t at = size_t(out - st.base);
  note_nonfinite(st.chk, at, v);
  copy_out(st.copy, at, v);
}

}  // namespace kvp::cuda
