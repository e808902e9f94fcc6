#include <atomic>
#include <string>

#include "core/env.h"
#include "cuda/cuda_cublas.h"
#include "cuda/cuda_gemm_launches.cuh"
#include "cuda/cuda_ops.h"

namespace kvp::cuda {
namespace {

// cuBLAS's workspace, as PyTorch gives it on Hopper (32 MiB): what lets it pick split-K
// algorithms, whose reductions are kernels of their own. $KVPARITY_CUDA_BLAS_WORKSPACE_MB (0 to
// 1024) sets another size, for measuring what those extra graph nodes cost a decode step; cuBLAS
// chooses its algorithm for each shape either way.
size_t blas_workspace_bytes() {
  static const size_t mb = size_t(env_int("KVPARITY_CUDA_BLAS_WORKSPACE_MB", 32, 0, 1024));
  return mb << 20;
}

void cublas_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    fail_input(std::string("cuBLAS error in ") + what + ": " + cublas().status_name(s) + " (" +
               cublas().status_string(s) + ")");
}

cudaDataType cuda_type(int store) { return store == kF32 ? CUDA_R_32F : store == kF16 ? CUDA_R_16F : CUDA_R_16BF; }

std::atomic<size_t> g_out16_queued{0};

}  // namespace

size_t gemm_out16_queued() { return g_out16_queued; }

GemmLaunches::GemmLaunches(KernelPolicy policy, PassGraphs& graphs) : policy_(policy), graphs_(graphs) {
  const Cublas& api = cublas();
  cublas_check(api.create(&blas_), "cublasCreate");
  cublas_check(api.set_stream(blas_, stream()), "cublasSetStream");
  // Default math: fp32 GEMMs in IEEE fp32 (TF32 only when asked for, and it never is).
  cublas_check(api.set_math_mode(blas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  // A workspace of our own: cuBLAS must not allocate while a graph is being captured.
  const size_t ws = blas_workspace_bytes();
  cublas_check(api.set_workspace(blas_, ws > 0 ? workspace_.ensure(ws) : nullptr, ws), "cublasSetWorkspace");
}

GemmLaunches::~GemmLaunches() {
  if (blas_ != nullptr) cublas().destroy(blas_);
}

void GemmLaunches::gemm(const float* x, const void* xa, int M, const void* wp, int store, int K, int N, GemmOut y,
                        bool tensor_cores, void* y16) {
  if (y16 != nullptr && !on_cublas(xa, M, wp, store, K, tensor_cores))
    fail_input("matmul: a 16-bit output is cuBLAS's alone (standard, 16-bit weights)");
  if (tensor_cores) {
    const uint64_t out = signature(kGemm, y.y1, y.y2, y.end0, y.end1);
    graphs_.submit(PassGraphs::mix(signature(kGemm, wp, xa, y.y0, M, N, K, store, invariant_gemm_choice()), out),
                   [=] { launch_invariant_gemm(xa, M, wp, store, K, N, y); });
    return;
  }
  // Members stored apart: the tensor-core kernels only (elsewhere a group is one row of adjacent members).
  if (y.end0 != INT_MAX) fail_input("matmul group: members stored apart need the invariant tensor-core GEMM");
  float* yp = y.y0;
  if (policy_ != KernelPolicy::Standard) {
    graphs_.submit(signature(kGemm, wp, x, yp, M, N, K, store),
                   [=] { launch_portable_matmul(x, M, wp, store, K, N, yp); });
    return;
  }
  // A switch read when the pass is queued: a graph captured with one choice is never replayed
  // under the other (the signature differs).
  if (standard_gemv_takes(xa, M, wp, store, K)) {
    graphs_.submit(signature(kGemm, wp, xa, yp, M, N, K, store, 1),
                   [=] { launch_standard_gemv(xa, M, wp, store, K, N, yp); });
    return;
  }
  const cudaDataType t = cuda_type(store);
  cublasHandle_t blas = blas_;
  // Row-major y[M, N] = x[M, K] W[N, K]^T is column-major y^T[N, M] = W^T x^T.
  // fp32 accumulation either way (CUBLAS_COMPUTE_32F, fp32 alpha and beta); a 16-bit C is the
  // accumulator converted once by the epilogue, as PyTorch's fp16/bf16 linear layers get it.
  if (y16 != nullptr) ++g_out16_queued;
  void* c = y16 != nullptr ? y16 : static_cast<void*>(yp);
  const cudaDataType ct = y16 != nullptr ? t : CUDA_R_32F;
  const auto gemm_ex = cublas().gemm_ex;
  graphs_.submit(signature(kGemm, wp, xa, c, M, N, K, t, ct), [=] {
    const float one = 1.0f, zero = 0.0f;
    cublas_check(gemm_ex(blas, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, wp, t, K, xa, t, K, &zero, c, ct, N,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  });
}

}  // namespace kvp::cuda
