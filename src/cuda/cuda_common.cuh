#pragma once
// Shared by the backend's .cu files: error checks, the process's stream, launch sizes, and (from
// cuda_device_api.cuh) the device-side rounding and loads.
#include <cstdint>

#include "core/dtype.h"
#include "cuda/cuda_device_api.cuh"
#include "cuda/cuda_fail.h"

namespace kvp::cuda {

// Throws Error(BadInput) "CUDA error in WHAT: <name> (<description>)".
void check(cudaError_t e, const char* what);
#define KVP_CUDA_CHECK(call) ::kvp::cuda::check((call), #call)
// The stream every operation of the backend is queued on (created by open()).
cudaStream_t stream();
// Multiprocessors of the open GPU (launch shapes of the split-KV decode).
int sm_count();

// cudaFuncSetAttribute(MaxDynamicSharedMemorySize) once per kernel and size.
void allow_smem(const void* kernel, size_t bytes);

// Launches kernel<<<grid, block>>> on the backend's stream: the launcher the kernel headers'
// dispatch functions take (tests/test_cuda_kernels_on_cpu.cpp passes one that runs them on the CPU).
struct StreamLaunch {
  template <class Kernel, class... Args>
  void operator()(Kernel kernel, dim3 grid, dim3 block, Args... args) const {
    kernel<<<grid, block, 0, stream()>>>(args...);
  }
  // With `bytes` of dynamic shared memory; a kernel is allowed more than 48 KB on its first such
  // launch (an eager one: a pass is captured into a graph only when it recurs).
  template <class Kernel, class... Args>
  void with_smem(size_t bytes, Kernel kernel, dim3 grid, dim3 block, Args... args) const {
    if (bytes > (size_t(48) << 10)) allow_smem(reinterpret_cast<const void*>(kernel), bytes);
    kernel<<<grid, block, bytes, stream()>>>(args...);
  }
};

}  // namespace kvp::cuda
