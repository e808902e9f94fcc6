#pragma once
// The matmul launches of CudaKernels, for every policy: cuBLAS (`standard`: GemmEx with fp32
// accumulation, no TF32, cuBLAS's own choice of algorithm), the invariant tensor-core GEMM and the
// portable one. Queued through the pass's PassGraphs; which buffers they read and write, and when,
// is CudaKernels' business.
#include <cublas_v2.h>

#include "cuda/cuda_device_weights.cuh"
#include "cuda/cuda_gemm_out.cuh"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_pass_graphs.cuh"
#include "kernels/kernels.h"

namespace kvp::cuda {

class GemmLaunches {
 public:
  GemmLaunches(KernelPolicy policy, PassGraphs& graphs);
  ~GemmLaunches();
  GemmLaunches(const GemmLaunches&) = delete;
  GemmLaunches& operator=(const GemmLaunches&) = delete;

  // y = x W^T, W [N, K] in storage type `store` at wp. tensor_cores: the invariant tensor-core GEMM
  // (xa: x in W's 16-bit type; y may be a group's members stored apart); else the policy's own GEMM:
  // the portable one (from x), or cuBLAS (xa: x in W's type; y a plain matrix, or the one row of a
  // group's adjacent members). y16 (cuBLAS only): the output in W's 16-bit type at y16 instead of
  // fp32 at y, rounded by cuBLAS's epilogue (Kernels::rounded_output).
  void gemm(const float* x, const void* xa, int M, const void* wp, int store, int K, int N, GemmOut y,
            bool tensor_cores, void* y16 = nullptr);
  // Whether gemm() gives this call (16-bit operands) to cuBLAS: where a y16 may go.
  bool on_cublas(const void* xa, int M, const void* wp, int store, int K, bool tensor_cores) const {
    return !tensor_cores && policy_ == KernelPolicy::Standard && store != kF32 &&
           !standard_gemv_takes(xa, M, wp, store, K);
  }

 private:
  KernelPolicy policy_;
  PassGraphs& graphs_;
  cublasHandle_t blas_ = nullptr;
  Block workspace_;
};

}  // namespace kvp::cuda
