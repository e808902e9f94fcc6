// The wgmma family's large-M kernel with the copies taken off the tensor cores' warps: one
// producer warpgroup whose first thread moves each stage's tiles by TMA (cp.async.bulk.tensor,
// which writes the same 128-byte swizzle the descriptors read, zeros past M, N and K), two consumer
// warpgroups of 64 rows each that only wait, multiply and release, over a ring of STAGES stages
// with a "full" and an "empty" mbarrier each. The instructions each output sees are
// cuda_wgmma_gemm.cu's (mma_stage: one m64n128k16 per 16 k in increasing order, C = 0 first), so
// its bits are that family's; only who copies and how the stages are handed over differ.
// Forced only (KVPARITY_CUDA_GEMM=wgmma-tma128x128 | wgmma-tma128x256) until timed on an H100.
#include <cuda.h>  // CUtensorMap and its enums (the driver entry point comes through the runtime)
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/cuda_common.cuh"
#include "cuda/cuda_fail.h"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_wgmma.cuh"

namespace kvp::cuda {
namespace {

using namespace wgmma;

#if defined(KVP_HAS_WGMMA)
__device__ __forceinline__ void mbar_init(uint32_t bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_bytes(uint32_t bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Until the phase of parity `parity` has completed. A ring that never completes (a bug, or a TMA
// fault) traps after ~4 s instead of hanging the GPU: the launch then fails with an error.
__device__ __forceinline__ void mbar_wait(uint32_t bar, unsigned parity) {
  uint64_t t0 = 0;
  for (unsigned tries = 0;; ++tries) {
    unsigned done;
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    if (done) return;
    if ((tries & 1023) == 0) {
      uint64_t now;
      asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(now));
      if (t0 == 0) t0 = now;
      else if (now - t0 > 4000000000ull) __trap();
    }
  }
}
// Rows [row, row + box rows) and k [k, k + 64) of the tensor `map` describes into shared memory
// at dst; the bytes count towards bar's transaction.
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap* map, int k, int row, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(k), "r"(row), "r"(bar)
      : "memory");
}
#endif

constexpr int kBM = 128;  // two consumer warpgroups of 64 rows

template <int BN, int STAGES>
constexpr size_t tma_smem_bytes() {
  return size_t(STAGES) * (kBM + BN) * kRowBytes + 1024 + 2 * STAGES * sizeof(uint64_t);  // tiles, slack, barriers
}

template <int S, int BN, int STAGES>
__global__ void __launch_bounds__(384, 1)
    wgmma_tma_gemm_kernel(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_w, int M,
                          int K, int N, float* y) {
  pdl_entry();
#if defined(KVP_HAS_WGMMA)
  constexpr int IN = 128, NI = BN / IN;
  static_assert(NI * IN == BN && STAGES >= 2);
  constexpr int kStageBytes = (kBM + BN) * kRowBytes;
  KVP_DYNAMIC_SHARED(unsigned char, raw);
  const uint32_t raw_addr = unsigned(__cvta_generic_to_shared(raw));
  const uint32_t tiles = (raw_addr + 1023) & ~1023u;
  const uint32_t full = tiles + STAGES * kStageBytes, empty = full + STAGES * 8;  // mbarriers, 8 bytes each
  const int tid = threadIdx.x, wg = tid / 128, m0 = blockIdx.y * kBM, n0 = blockIdx.x * BN;
  const int steps = (K + kStageK - 1) / kStageK;
  if (tid == 0) {
    for (int i = 0; i < STAGES; ++i) {
      mbar_init(full + 8 * i, 1);   // the producer's expect_tx arrival (then the bytes)
      mbar_init(empty + 8 * i, 8);  // one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    fence_to_async_proxy();
  }
  __syncthreads();
  if (wg == 0) {
    if (tid == 0) {
      for (int s = 0; s < steps; ++s) {
        const int slot = s % STAGES;
        if (s >= STAGES) mbar_wait(empty + 8 * slot, unsigned(s / STAGES - 1) & 1);
        const uint32_t bar = full + 8 * slot, a = tiles + slot * kStageBytes;
        mbar_expect_bytes(bar, kStageBytes);  // whole boxes: TMA counts the zeros it writes past the ends
        tma_load(a, &map_x, s * kStageK, m0, bar);
        tma_load(a + kBM * kRowBytes, &map_w, s * kStageK, n0, bar);
      }
    }
    return;
  }
  const int cw = wg - 1;  // consumer warpgroup: rows m0 + 64 cw ..
  float d[NI][IN / 2];
#pragma unroll
  for (int i = 0; i < NI; ++i)
#pragma unroll
    for (int j = 0; j < IN / 2; ++j) d[i][j] = 0.0f;
  for (int s = 0; s < steps; ++s) {
    const int slot = s % STAGES;
    mbar_wait(full + 8 * slot, unsigned(s / STAGES) & 1);
    const uint32_t a = tiles + slot * kStageBytes;
    mma_stage<S, IN, NI>(d, a + cw * 64 * kRowBytes, a + kBM * kRowBytes);
    // Stage s - 1's group has completed (all but the newest): its slot goes back to the producer.
    wgmma_wait<1>();
#pragma unroll
    for (int i = 0; i < NI; ++i) pin(d[i]);
    if (s > 0 && tid % 32 == 0) mbar_arrive(empty + 8 * ((s - 1) % STAGES));
  }
  wgmma_wait<0>();
#pragma unroll
  for (int i = 0; i < NI; ++i) pin(d[i]);
  store_accumulators<IN, NI>(d, y, M, N, m0 + cw * 64, n0, tid % 128);
#else
  __trap();  // launched from a build without sm_90a code for this GPU: fail, never leave y unwritten
#endif
}

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
CUtensorMap tensor_map(const void* base, int rows, int K, int box_rows, const char* what) {
  CUtensorMap m;
  const cuuint64_t dims[2] = {cuuint64_t(K), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(K) * 2};
  const cuuint32_t box[2] = {cuuint32_t(kStageK), cuuint32_t(box_rows)};
  const cuuint32_t unit[2] = {1, 1};
  const CUresult r =
      encoder()(&m, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, const_cast<void*>(base), dims, strides, box, unit,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    fail_input(std::string("matmul (invariant, wgmma-tma): cuTensorMapEncodeTiled refused ") + what + " (" +
               std::to_string(rows) + " x " + std::to_string(K) + "), CUresult " + std::to_string(int(r)));
  return m;
}

template <int S, int BN, int STAGES>
void launch_tma(const void* xh, int M, const void* W, int K, int N, float* y) {
  const CUtensorMap mx = tensor_map(xh, M, K, kBM, "x");
  const CUtensorMap mw = tensor_map(W, N, K, BN, "W");
  const dim3 grid(unsigned((N + BN - 1) / BN), unsigned((M + kBM - 1) / kBM));
  StreamLaunch{}.with_smem(tma_smem_bytes<BN, STAGES>(), wgmma_tma_gemm_kernel<S, BN, STAGES>, grid, dim3(384), mx,
                           mw, M, K, N, y);
}

}  // namespace

void launch_wgmma_tma_gemm(const void* xh, int M, const void* W, int store, int K, int N, float* y, bool wide) {
  if (store == kF16) wide ? launch_tma<kF16, 256, 4>(xh, M, W, K, N, y) : launch_tma<kF16, 128, 6>(xh, M, W, K, N, y);
  if (store == kBF16)
    wide ? launch_tma<kBF16, 256, 4>(xh, M, W, K, N, y) : launch_tma<kBF16, 128, 6>(xh, M, W, K, N, y);
}

}  // namespace kvp::cuda
