// Launcher of the `invariant` policy's tensor-core GEMM (cuda_invariant_gemm_kernel.cuh has the
// kernel, the argument why its bits depend on K alone, and its dispatch).
#include <atomic>
#include <cstdlib>
#include <string>

#include "core/env.h"
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
    {"mma", GemmKernel::Mma},
    {"ring", GemmKernel::Ring},
    {"registers", GemmKernel::Registers},
    {"pipelined", GemmKernel::Pipelined},
    {"tiles64x128", GemmKernel::Tiles64x128},
    {"tiles128x128", GemmKernel::Tiles128x128},
    {"tiles128x256", GemmKernel::Tiles128x256},
    {"tiles128x128k64", GemmKernel::Tiles128x128k64},
    {"wgmma", GemmKernel::Wgmma},
    {"wgmma64x32", GemmKernel::Wgmma64x32},
    {"wgmma64x128", GemmKernel::Wgmma64x128},
    {"wgmma128x128", GemmKernel::Wgmma128x128},
    {"wgmma128x256", GemmKernel::Wgmma128x256},
    {"wgmma-tma", GemmKernel::WgmmaTma},
    {"wgmma-tma64x32", GemmKernel::WgmmaTma64x32},
    {"wgmma-tma64x64", GemmKernel::WgmmaTma64x64},
    {"wgmma-tma128x128", GemmKernel::WgmmaTma128x128},
    {"wgmma-tma128x256", GemmKernel::WgmmaTma128x256},
    {"wgmma-mma16", GemmKernel::WgmmaMma16},
    {"wgmma-mma16b", GemmKernel::WgmmaMma16b},
    {"wgmma-tma+mma16", GemmKernel::WgmmaTmaMma16},
    {"wgmma-tma+mma16b", GemmKernel::WgmmaTmaMma16b},
    {"wgmma-mma16x", GemmKernel::WgmmaMma16x},
    {"wgmma-tma+mma16x", GemmKernel::WgmmaTmaMma16x},
    {"wgmma-tmap", GemmKernel::WgmmaTmaPersistent},
    {"wgmma-mma16b-deep", GemmKernel::WgmmaMma16bDeep},
    {"wgmma-tma+mma16b-deep", GemmKernel::WgmmaTmaMma16bDeep},
    {"wgmma-tmap128x128", GemmKernel::WgmmaTmaPersistent128x128},
    {"wgmma-tmap128x256", GemmKernel::WgmmaTmaPersistent128x256},
};

WgmmaTile tile_of(GemmKernel k) {
  switch (k) {
    case GemmKernel::Wgmma64x32: return WgmmaTile::T64x32;
    case GemmKernel::Wgmma64x128: return WgmmaTile::T64x128;
    case GemmKernel::Wgmma128x128: return WgmmaTile::T128x128;
    case GemmKernel::Wgmma128x256: return WgmmaTile::T128x256;
    case GemmKernel::WgmmaTma:
    case GemmKernel::WgmmaTmaMma16:
    case GemmKernel::WgmmaTmaMma16b:
    case GemmKernel::WgmmaTmaMma16bDeep:
    case GemmKernel::WgmmaTmaMma16x: return WgmmaTile::TmaAuto;
    case GemmKernel::WgmmaTma64x32: return WgmmaTile::Tma64x32;
    case GemmKernel::WgmmaTma64x64: return WgmmaTile::Tma64x64;
    case GemmKernel::WgmmaTma128x128: return WgmmaTile::Tma128x128;
    case GemmKernel::WgmmaTma128x256: return WgmmaTile::Tma128x256;
    case GemmKernel::WgmmaTmaPersistent128x128: return WgmmaTile::TmaPersistent128x128;
    case GemmKernel::WgmmaTmaPersistent128x256: return WgmmaTile::TmaPersistent128x256;
    case GemmKernel::WgmmaTmaPersistent: return WgmmaTile::TmaPersistentAuto;
    default: return WgmmaTile::Auto;
  }
}

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

// What Auto stands for on this GPU. An H100 or H200 (the wgmma family's sm_90a code on a compute
// capability 9.0 GPU): wgmma-tma+mma16b, the TMA wgmma kernel above 16 rows and mma.sync fed the
// family's 16-k blocks up to 16, one family with its own bits for every M (the CUDA suite's
// WgmmaGemmRow* and WgmmaFamilyHoldsTheBattery check it on the GPU). Chosen from the whole
// passes on an H100 on 2026-11-27 (docs/performance.md), 7B shape, against standard: batch-1
// decode 0.89-0.91x (the mma.sync family: 0.96x), batch-64 decode 1.00x (0.85x), prefill 512
// 1.13x, a cache-OFF step 1.20x; the mma.sync family's batch-64 cache-OFF step of the GSM8K study
// (12,800 rows) took 3.4x standard's, nearly all of it in its GEMMs. Elsewhere the mma.sync family.
// Since 2026-11-27 evening (untimed as a whole pass) Auto streams deeper on single rows with K >= N
// (deep_prefetch_for); KVPARITY_CUDA_GEMM=wgmma-tma+mma16b names the kernel without that.
GemmKernel resolved(GemmKernel k) {
  if (k != GemmKernel::Auto) return k;
  static const GemmKernel here = wgmma_kernels_available() ? GemmKernel::WgmmaTmaMma16b : GemmKernel::Mma;
  return here;
}

std::string name_of(GemmKernel k) {
  for (const auto& [n, v] : kGemmKernels)
    if (v == k) return n;
  return "auto";
}

}  // namespace

void set_invariant_gemm_kernel(const std::string& name) { chosen() = parse_gemm_kernel(name, "invariant GEMM kernel"); }
std::string invariant_gemm_kernel() { return name_of(chosen()); }
std::string invariant_gemm_kernel_here() { return name_of(resolved(chosen())); }
std::vector<std::string> invariant_gemm_kernels() {
  std::vector<std::string> v;
  for (const auto& [n, k] : kGemmKernels) v.emplace_back(n);
  return v;
}

int invariant_gemm_choice() { return int(resolved(chosen())); }

int gemm_tile_group() {
  static const int group = env_int("KVPARITY_CUDA_TILE_GROUP", kTileGroup, 1, 64);
  return group;
}

// The wgmma family where it was chosen and rows load as 16-byte pieces (a property of K and of
// buffers the backend allocates aligned, so one pass never mixes the families); elsewhere the
// mma.sync kernels, which then also serve rows without 16-byte loads.
void launch_invariant_gemm(const void* xh, int M, const void* W, int store, int K, int N, const GemmOut& y) {
  const GemmKernel c = chosen(), k = resolved(c);
  if (invariant::is_wgmma(k) && rows_load_16_bytes(xh, W, K)) {
    if (!wgmma_kernels_available())
      fail_usage("invariant GEMM kernel '" + invariant_gemm_kernel() +
                 "' needs a compute capability 9.0 GPU (H100, H200) and a build with sm_90a code "
                 "(CMAKE_CUDA_ARCHITECTURES including 90a); this GPU is sm_" +
                 std::to_string(compute_capability()));
    if (const invariant::KMap map = invariant::wgmma_order_map(k, M); map != invariant::KMap::Pairs) {
      invariant::gemm_in_wgmma_order(StreamLaunch{}, xh, M, W, store, K, N, y, map,
                                     invariant::deep_prefetch_for(c, k, M, K, N));
      check(cudaGetLastError(), "matmul (invariant, mma.sync in the wgmma family's order)");
      return;
    }
    launch_wgmma_gemm(xh, M, W, store, K, N, y, tile_of(k));
    check(cudaGetLastError(), "matmul (invariant, wgmma)");
    return;
  }
  invariant::gemm(StreamLaunch{}, xh, M, W, store, K, N, y, k, gemm_tile_group());
  check(cudaGetLastError(), "matmul (invariant, tensor cores)");
}

}  // namespace kvp::cuda
