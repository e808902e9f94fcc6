#pragma once
// Shared by the backend's .cu files: error checks, the process's stream, launch sizes, and (from
// cuda_device_api.cuh) the device-side rounding and loads.
#include <cstdint>
#include <string>

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
// The open GPU's compute capability, 10 major + minor (90 on an H100).
int compute_capability();
// The open GPU's name ("NVIDIA H100 80GB HBM3").
std::string gpu_name();

// cudaFuncSetAttribute(MaxDynamicSharedMemorySize) once per kernel and size.
void allow_smem(const void* kernel, size_t bytes);

// True when kernels launch with programmatic stream serialisation (set_programmatic_launch; only
// where pdl_entry waits: sm_90 code on an sm_90 GPU; never while operations are timed).
bool pdl_launch();

// Launches a kernel on the backend's stream, with `smem` bytes of dynamic shared memory: the
// launcher the kernel headers' dispatch functions take (tests/test_cuda_kernels_on_cpu.cpp passes
// one that runs them on the CPU). Every kernel launched here begins with pdl_entry().
template <class... Params, class... Args>
void launch_on_stream(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, Args... args) {
  if (!pdl_launch()) {
    kernel<<<grid, block, smem, stream()>>>(args...);
    return;
  }
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream();
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  // As with <<<>>>, a failed launch stays in cudaGetLastError for the caller's check, which names
  // the operation.
  (void)cudaLaunchKernelEx(&cfg, kernel, args...);
}

struct StreamLaunch {
  template <class Kernel, class... Args>
  void operator()(Kernel kernel, dim3 grid, dim3 block, Args... args) const {
    launch_on_stream(kernel, grid, block, 0, args...);
  }
  // With `bytes` of dynamic shared memory; a kernel is allowed more than 48 KB on its first such
  // launch (an eager one: a pass is captured into a graph only when it recurs).
  template <class Kernel, class... Args>
  void with_smem(size_t bytes, Kernel kernel, dim3 grid, dim3 block, Args... args) const {
    if (bytes > (size_t(48) << 10)) allow_smem(reinterpret_cast<const void*>(kernel), bytes);
    launch_on_stream(kernel, grid, block, bytes, args...);
  }
};

}  // namespace kvp::cuda
