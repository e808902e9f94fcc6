// Launcher of the `invariant` policy's tensor-core GEMM (cuda_invariant_gemm_kernel.cuh has the
// kernel, the argument why its bits depend on K alone, and its dispatch).
#include <atomic>
#include <cstdlib>
#include <string>

#include "cuda/cuda_common.cuh"
#include "cuda/cuda_fail.h"
#include "cuda/cuda_invariant_gemm_kernel.cuh"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_runtime_api.h"

namespace kvp::cuda {
namespace {

using invariant::GemmKernel;

constexpr std::pair<const char*, GemmKernel> kGemmKernels[] = {
    {"auto", GemmKernel::Auto},
    {"ring", GemmKernel::Ring},
    {"registers", GemmKernel::Registers},
    {"pipelined", GemmKernel::Pipelined},
    {"tiles64x128", GemmKernel::Tiles64x128},
    {"tiles128x128", GemmKernel::Tiles128x128},
    {"tiles128x256", GemmKernel::Tiles128x256},
    {"tiles128x128k64", GemmKernel::Tiles128x128k64},
};

GemmKernel parse_gemm_kernel(const std::string& name, const char* what) {
  std::string names;
  for (const auto& [n, k] : kGemmKernels) {
    if (name == n) return k;
    names += names.empty() ? n : std::string(", ") + n;
  }
  fail_usage(std::string(what) + ": '" + name + "' is not one of " + names);
}

// $KVPARITY_CUDA_GEMM (or set_invariant_gemm_kernel) forces one kernel for every M: the same bits
// as Auto's choice, so that one binary measures the kernels against each other.
std::atomic<GemmKernel>& chosen() {
  static std::atomic<GemmKernel> k{[] {
    const char* e = std::getenv("KVPARITY_CUDA_GEMM");
    return e == nullptr || *e == '\0' ? GemmKernel::Auto : parse_gemm_kernel(e, "KVPARITY_CUDA_GEMM");
  }()};
  return k;
}

}  // namespace

void set_invariant_gemm_kernel(const std::string& name) {
  chosen() = parse_gemm_kernel(name, "invariant GEMM kernel");
}
std::string invariant_gemm_kernel() {
  const GemmKernel k = chosen();
  for (const auto& [n, v] : kGemmKernels)
    if (v == k) return n;
  return "auto";
}
std::vector<std::string> invariant_gemm_kernels() {
  std::vector<std::string> v;
  for (const auto& [n, k] : kGemmKernels) v.emplace_back(n);
  return v;
}

int invariant_gemm_choice() { return int(chosen().load()); }

void launch_invariant_gemm(const void* xh, int M, const void* W, int store, int K, int N, float* y) {
  invariant::gemm(StreamLaunch{}, xh, M, W, store, K, N, y, chosen().load());
  check(cudaGetLastError(), "matmul (invariant, tensor cores)");
}

}  // namespace kvp::cuda
