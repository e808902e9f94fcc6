#pragma once
// What the CPU suite's runs of the CUDA kernels' own source share (src/cuda/simt_host.h): the
// launcher the kernels' dispatch functions take, and the invariant GEMM's mma.sync kernels by
// name. Include it after the kernel headers, which come after every other header (simt_host.h
// defines the CUDA keywords as macros).
#include <utility>

#include "cuda/cuda_invariant_gemm_kernel.cuh"

namespace kvp::test {

struct HostLaunch {
  template <class Kernel, class... Args>
  void operator()(Kernel kernel, dim3 grid, dim3 block, Args... args) const {
    simt::launch(grid, block, kernel, args...);
  }
  template <class Kernel, class... Args>
  void with_smem(size_t bytes, Kernel kernel, dim3 grid, dim3 block, Args... args) const {
    simt::launch_with_smem(bytes, grid, block, kernel, args...);
  }
};

inline constexpr std::pair<cuda::invariant::GemmKernel, const char*> kMmaSyncGemmKernels[] = {
    {cuda::invariant::GemmKernel::Auto, "auto"},
    {cuda::invariant::GemmKernel::Mma, "mma"},
    {cuda::invariant::GemmKernel::Ring, "ring"},
    {cuda::invariant::GemmKernel::Registers, "registers"},
    {cuda::invariant::GemmKernel::Pipelined, "pipelined"},
    {cuda::invariant::GemmKernel::Tiles64x128, "tiles64x128"},
    {cuda::invariant::GemmKernel::Tiles128x128, "tiles128x128"},
    {cuda::invariant::GemmKernel::Tiles128x256, "tiles128x256"},
    {cuda::invariant::GemmKernel::Tiles128x128k64, "tiles128x128k64"},
};

}  // namespace kvp::test
