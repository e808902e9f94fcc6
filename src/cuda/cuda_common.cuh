#pragma once
// Shared by the backend's .cu files: error checks, the process's stream, and the device-side
// rounding and loads that mirror core/dtype.h bit for bit (RNE to fp16/bf16, NaN kept).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "cuda/cuda_fail.h"

namespace kvp::cuda {

// Throws Error(BadInput) "CUDA error in WHAT: <name> (<description>)".
void check(cudaError_t e, const char* what);
#define KVP_CUDA_CHECK(call) ::kvp::cuda::check((call), #call)
// The stream every operation of the backend is queued on (created by open()).
cudaStream_t stream();
// Multiprocessors of the open GPU (launch shapes of the split-KV decode).
int sm_count();

// Storage types as kernel template arguments.
enum StoreT : int { kF32 = 0, kF16 = 1, kBF16 = 2 };
inline int store_of(DType t) { return t == DType::F32 ? kF32 : t == DType::F16 ? kF16 : kBF16; }

__device__ __forceinline__ float round_act(float x, int act) {
  if (act == kF16) return __half2float(__float2half_rn(x));
  if (act == kBF16) return __bfloat162float(__float2bfloat16_rn(x));
  return x;
}

template <int S>
__device__ __forceinline__ float load_as_f32(const void* base, size_t i) {
  if constexpr (S == kF32) return static_cast<const float*>(base)[i];
  if constexpr (S == kF16) return __half2float(static_cast<const __half*>(base)[i]);
  if constexpr (S == kBF16) return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
  return 0.0f;
}

template <int S>
__device__ __forceinline__ void store_from_f32(void* base, size_t i, float v) {
  if constexpr (S == kF32) static_cast<float*>(base)[i] = v;
  if constexpr (S == kF16) static_cast<__half*>(base)[i] = __float2half_rn(v);
  if constexpr (S == kBF16) static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v);
}

inline unsigned blocks_for(size_t n, unsigned threads, unsigned cap = 65535u * 8u) {
  const size_t b = (n + threads - 1) / threads;
  return unsigned(b < 1 ? 1 : (b > cap ? cap : b));
}

}  // namespace kvp::cuda
