// What decides a CUDA pass's bits besides its side's SPEC (cuda_runtime_api.h, numerics_identity):
// kept beside the list of switches so that one that changes bits is named here when it is added.
// Switches that give the same bits either way (fusion, dead writes, PDL, whole decode rows, the
// tile group, the attention stages and split warps, the staged upload) are left out on purpose:
// a run resumed with another of them continues the same study.
#include <cublas_v2.h>

#include <string>
#include <utility>
#include <vector>

#include "cuda/cuda_common.cuh"
#include "cuda/cuda_cublas.h"
#include "cuda/cuda_runtime_api.h"
#include "kernels/kernels.h"

namespace kvp::cuda {
namespace {

std::string cublas_version() {
  int major = 0, minor = 0, patch = 0;
  const auto get = cublas().get_property;  // the library the GEMMs run, not the headers' version
  if (get(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS || get(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
      get(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS)
    return "unknown";
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::string on_off(bool on) { return on ? "on" : "off"; }

}  // namespace

std::vector<std::pair<std::string, std::string>> numerics_identity(KernelPolicy policy) {
  open();
  const std::string arch = "sm_" + std::to_string(compute_capability());
  if (policy == KernelPolicy::Standard) {
    return {{"gpu", gpu_name() + ", " + arch + ", " + std::to_string(sm_count()) + " SMs"},
            {"cublas", cublas_version()},
            {"gemv", on_off(standard_gemv_on())},
            {"decode_split_keys", std::to_string(decode_split_keys())},
            {"group_launches", on_off(group_launches_on())},
            {"gemm_out16", on_off(gemm_out16_on())}};
  }
  if (policy == KernelPolicy::Invariant) {
    // Every kernel of a family gives that family's bits (cuda_invariant_gemm.cu); the families differ.
    const bool wgmma = invariant_gemm_kernel_here().starts_with("wgmma");
    return {{"gpu_arch", arch}, {"gemm_family", wgmma ? "wgmma" : "mma.sync"}};
  }
  return {};
}

}  // namespace kvp::cuda
