#pragma once
// Where a GEMM kernel stores its outputs. One matrix y[M, N]; or a group of matrices that read
// the same x (q/k/v, gate/up), whose weights lie side by side in device memory so that one launch
// covers them all: columns [0, end0) of the product go to member 0's own [M, end0] matrix,
// [end0, end1) to member 1's, the rest to member 2's. Only where an output is stored changes: each
// is computed exactly as it would be without the group (the invariant kernels' order depends on K
// alone), so a group of launches becomes one node of a decode step's graph at no cost in bits.
#include <climits>
#include <cstddef>
#include <cstdint>

#include "cuda/cuda_device_api.cuh"

namespace kvp::cuda {

struct GemmOut {
  float* y0 = nullptr;
  float* y1 = nullptr;
  float* y2 = nullptr;
  int end0 = INT_MAX, end1 = INT_MAX;  // first column of member 1, of member 2 (INT_MAX: none)

  GemmOut() = default;
  GemmOut(float* y) : y0(y) {}  // NOLINT(google-explicit-constructor): a plain matrix

  // Output (m, n) of a product N columns wide.
  __host__ __device__ __forceinline__ float* at(int m, int n, int N) const {
    if (n < end0) return y0 + size_t(m) * size_t(end0 < N ? end0 : N) + n;
    if (n < end1) return y1 + size_t(m) * size_t((end1 < N ? end1 : N) - end0) + (n - end0);
    return y2 + size_t(m) * size_t(N - end1) + (n - end1);
  }
  // Whether outputs (m, n) and (m, n + 1), n even, lie next to each other in one member, 8-byte
  // aligned (one float2 store).
  __host__ __device__ __forceinline__ bool pairs(int N) const {
    return N % 2 == 0 && (end0 == INT_MAX || (end0 % 2 == 0 && aligned(y1))) &&
           (end1 == INT_MAX || (end1 % 2 == 0 && aligned(y2))) && aligned(y0);
  }
  __host__ __device__ __forceinline__ static bool aligned(const float* p) {
    return reinterpret_cast<uintptr_t>(p) % 8 == 0;
  }
};

}  // namespace kvp::cuda
