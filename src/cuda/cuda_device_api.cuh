#pragma once
// What the kernels use of CUDA, and the device-side rounding and loads that mirror core/dtype.h
// bit for bit (RNE to fp16/bf16, NaN kept). Under nvcc the CUDA headers; elsewhere the host
// stand-ins of simt_host.h, with which the CPU suite runs the fixed-order kernels' source.
#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#else
#include "cuda/simt_host.h"
#endif

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/dtype.h"

namespace kvp::cuda {

// Storage types as kernel template arguments.
enum StoreT : int { kF32 = 0, kF16 = 1, kBF16 = 2 };
inline int store_of(DType t) { return t == DType::F32 ? kF32 : t == DType::F16 ? kF16 : kBF16; }

// Blocks of `threads` that cover n (at least 1, at most cap; grid-stride loops do the rest).
inline unsigned blocks_for(size_t n, unsigned threads, unsigned cap = 65535u * 8u) {
  const size_t b = (n + threads - 1) / threads;
  return unsigned(b < 1 ? 1 : (b > cap ? cap : b));
}

__device__ __forceinline__ float round_act(float x, int act) {
  if (act == kF16) return __half2float(__float2half_rn(x));
  if (act == kBF16) return __bfloat162float(__float2bfloat16_rn(x));
  return x;
}

// A T (uint4, uint32_t) at p as one vector access on the GPU; on the host (the CPU suite),
// through memcpy, since the buffers hold uint16_t and C++ forbids reading them as another type.
template <class T>
__device__ __forceinline__ T load_raw(const void* p) {
#ifdef __CUDA_ARCH__
  return *static_cast<const T*>(p);
#else
  // The GPU faults on a vector access that is not aligned to its size; so does the CPU suite.
  if ((sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16) && reinterpret_cast<uintptr_t>(p) % sizeof(T) != 0) {
    std::fprintf(stderr, "simt: a %zu-byte load from an address not aligned to it\n", sizeof(T));
    std::abort();
  }
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}

// The 16-bit pattern of x rounded to S (kF16 or kBF16), RNE.
template <int S>
__device__ __forceinline__ uint16_t bits_of(float x) {
  if constexpr (S == kF16) return __half_as_ushort(__float2half_rn(x));
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

template <int S>
__device__ __forceinline__ float load_as_f32(const void* base, size_t i) {
  if constexpr (S == kF32) return static_cast<const float*>(base)[i];
  if constexpr (S == kF16) return __half2float(static_cast<const __half*>(base)[i]);
  if constexpr (S == kBF16) return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
  return 0.0f;
}

// Two 16-bit values of S (kF16 or kBF16) packed in a word, the lower first, widened.
template <int S>
__device__ __forceinline__ void unpack2(unsigned w, float* out) {
  const auto lo = static_cast<unsigned short>(w & 0xffffu), hi = static_cast<unsigned short>(w >> 16);
  if constexpr (S == kF16) {
    out[0] = __half2float(__ushort_as_half(lo));
    out[1] = __half2float(__ushort_as_half(hi));
  } else {
    out[0] = __bfloat162float(__ushort_as_bfloat16(lo));
    out[1] = __bfloat162float(__ushort_as_bfloat16(hi));
  }
}

// Eight 16-bit values of S packed in a 16-byte piece, the lowest first, widened.
template <int S>
__device__ __forceinline__ void unpack8(const uint4 r, float (&out)[8]) {
  unpack2<S>(r.x, out), unpack2<S>(r.y, out + 2), unpack2<S>(r.z, out + 4), unpack2<S>(r.w, out + 6);
}

// Whether the [rows, K] 16-bit matrices at x and W load as 16-byte pieces (K % 8 == 0, both
// 16-byte aligned): what the vector GEMM kernels need.
inline bool rows_load_16_bytes(const void* x, const void* W, int K) {
  return K % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(W) % 16 == 0;
}

// Elements i .. i+N-1 of an S array, widened, through the widest aligned loads that hold them
// (i a multiple of N; N = 1, 2, 4 or 8): one access where a loop of scalar loads would be N.
template <int S, int N>
__device__ __forceinline__ void load_vec(const void* base, size_t i, float (&out)[N]) {
  static_assert(N == 1 || N == 2 || N == 4 || N == 8);
  if constexpr (S == kF32) {
    const float* p = static_cast<const float*>(base) + i;
    if constexpr (N == 1) {
      out[0] = *p;
    } else if constexpr (N == 2) {
      const float2 v = load_raw<float2>(p);
      out[0] = v.x, out[1] = v.y;
    } else {
#pragma unroll
      for (int g = 0; g < N / 4; ++g) {
        const float4 v = load_raw<float4>(p + 4 * g);
        out[4 * g] = v.x, out[4 * g + 1] = v.y, out[4 * g + 2] = v.z, out[4 * g + 3] = v.w;
      }
    }
  } else {
    const uint16_t* p = static_cast<const uint16_t*>(base) + i;
    if constexpr (N == 1) {
      out[0] = load_as_f32<S>(base, i);
    } else if constexpr (N == 2) {
      unpack2<S>(load_raw<uint32_t>(p), out);
    } else if constexpr (N == 4) {
      const uint2 r = load_raw<uint2>(p);
      unpack2<S>(r.x, out), unpack2<S>(r.y, out + 2);
    } else {
      unpack8<S>(load_raw<uint4>(p), out);
    }
  }
}

template <int S>
__device__ __forceinline__ void store_from_f32(void* base, size_t i, float v) {
  if constexpr (S == kF32) static_cast<float*>(base)[i] = v;
  if constexpr (S == kF16) static_cast<__half*>(base)[i] = __float2half_rn(v);
  if constexpr (S == kBF16) static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v);
}

// 16 bytes from global to shared memory without passing through registers (zeros when !valid);
// on the host, simt_host.h's stand-in. The copies a thread issued land by its wait_copies<N>()
// (every group but the newest N), and are seen by the block after a barrier.
__device__ __forceinline__ void copy16(void* smem, const void* gmem, bool valid) {
#ifdef __CUDA_ARCH__
  const auto dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0));
#elif !defined(__CUDACC__)  // nvcc's host pass never runs it
  simt::async_copy16(smem, gmem, valid);
#endif
}
__device__ __forceinline__ void commit_copies() {
#ifdef __CUDA_ARCH__
  asm volatile("cp.async.commit_group;\n" ::);
#elif !defined(__CUDACC__)  // nvcc's host pass never runs it
  simt::async_commit();
#endif
}
template <int N>
__device__ __forceinline__ void wait_copies() {
#ifdef __CUDA_ARCH__
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#elif !defined(__CUDACC__)  // nvcc's host pass never runs it
  simt::async_wait(N);
#endif
}

// The first statement of every kernel of the backend. Under programmatic dependent launch
// (KVPARITY_CUDA_PDL=1, sm_90: StreamLaunch) a kernel may start while the one before it in the
// stream still runs; griddepcontrol.wait holds every thread here until that kernel has completed
// and its writes are visible, so nothing before this line may read or write global memory. Then
// launch_dependents lets the next kernel be scheduled (it waits in its own pdl_entry). Launched
// the ordinary way, or before sm_90, both are no-ops: the bits never change, only the gaps.
__device__ __forceinline__ void pdl_entry() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// A kernel's dynamic shared memory (the size given at launch; above 48 KB the kernel must have
// been allowed it, which StreamLaunch::with_smem does); on the host, simt_host.h's buffer.
#if defined(__CUDACC__)
#define KVP_DYNAMIC_SHARED(T, name) extern __shared__ __align__(16) T name[]
#else
#define KVP_DYNAMIC_SHARED(T, name) T* name = ::kvp::simt::dynamic_shared<T>()
#endif

}  // namespace kvp::cuda
