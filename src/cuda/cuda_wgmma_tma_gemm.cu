// Launcher of the wgmma family's TMA-fed kernel (cuda_wgmma_tma_gemm_kernel.cuh): the tensor maps
// it reads x and W through, made by the driver's cuTensorMapEncodeTiled.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/cuda_common.cuh"
#include "cuda/cuda_fail.h"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_runtime_api.h"
#include "cuda/cuda_wgmma_tma_gemm_kernel.cuh"

namespace kvp::cuda {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled from the driver, through the runtime (no link against libcuda).
EncodeTiled encoder() {
  static const EncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<EncodeTiled>(p);
  }();
  if (fn == nullptr) fail_input("matmul (invariant, wgmma-tma): the driver has no cuTensorMapEncodeTiled");
  return fn;
}

// A row-major [rows, K] matrix of 16-bit values, read in boxes of `box_rows` rows by 64 k, written
// to shared memory in the 128-byte swizzle; zeros past the rows and K.
CUtensorMap tensor_map(const void* base, int rows, int K, int box_rows) {
  CUtensorMap m;
  const cuuint64_t dims[2] = {cuuint64_t(K), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(K) * 2};
  const cuuint32_t box[2] = {cuuint32_t(wgmma::kStageK), cuuint32_t(box_rows)};
  const cuuint32_t unit[2] = {1, 1};
  const CUresult r =
      encoder()(&m, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, const_cast<void*>(base), dims, strides, box, unit,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    fail_input("matmul (invariant, wgmma-tma): cuTensorMapEncodeTiled refused a " + std::to_string(rows) + " x " +
               std::to_string(K) + " operand (CUresult " + std::to_string(int(r)) + ")");
  return m;
}

}  // namespace

void launch_wgmma_tma_gemm(const void* xh, int M, const void* W, int store, int K, int N, const GemmOut& y,
                           WgmmaTile tile) {
  const int group = gemm_tile_group(), blocks = sm_count();
  if (store == kF16) wgmma::tma_gemm_as<kF16>(StreamLaunch{}, tensor_map, xh, M, W, K, N, y, tile, group, blocks);
  if (store == kBF16) wgmma::tma_gemm_as<kBF16>(StreamLaunch{}, tensor_map, xh, M, W, K, N, y, tile, group, blocks);
}

}  // namespace kvp::cuda
