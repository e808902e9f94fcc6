#pragma once
// The wgmma family's large-M kernel with the copies taken off the tensor cores' warps: one
// producer warpgroup whose first thread moves each stage's tiles by TMA (cp.async.bulk.tensor,
// which writes the same 128-byte swizzle the descriptors read, zeros past M, N and K), two consumer
// warpgroups of 64 rows each that only wait, multiply and release, over a ring of STAGES stages
// with a "full" and an "empty" mbarrier each. The instructions each output sees are
// cuda_wgmma_gemm_kernel.cuh's (mma_stage: one m64n128k16 per 16 k in increasing order, C = 0
// first), so its bits are that family's; only who copies and how the stages are handed over differ.
// Forced only (KVPARITY_CUDA_GEMM=wgmma-tma128x128 | wgmma-tma128x256) until timed on an H100.
// In this header so that the CPU suite runs the same source (simt_host.h emulates the mbarriers,
// the TMA copies and the wgmma); cuda_wgmma_tma_gemm.cu makes the tensor maps and launches it.
#include <cstdint>

#include "cuda/cuda_device_api.cuh"
#include "cuda/cuda_wgmma.cuh"
#if defined(__CUDACC__)
#include <cuda.h>  // CUtensorMap (the driver entry point that fills it comes through the runtime)
#else
#define __grid_constant__
#endif

// Unnamed: the CPU suite's host build of this source must not meet the GPU build at link time.
namespace kvp::cuda::wgmma {
namespace {

#if defined(__CUDACC__)
using TensorMap = CUtensorMap;
#else
using TensorMap = simt::TensorMap2d;
#endif

#if defined(KVP_HAS_WGMMA)
__device__ __forceinline__ void mbar_init(uint32_t bar, unsigned count) {
#if defined(__CUDACC__)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#else
  simt::mbarrier_init(bar, count);
#endif
}
// One arrival that also announces `bytes` of transactions (the TMA copies that follow).
__device__ __forceinline__ void mbar_expect_bytes(uint32_t bar, unsigned bytes) {
#if defined(__CUDACC__)
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#else
  simt::mbarrier_arrive(bar, bytes);
#endif
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
#if defined(__CUDACC__)
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#else
  simt::mbarrier_arrive(bar);
#endif
}
// Until the phase of parity `parity` has completed. A ring that never completes (a bug, or a TMA
// fault) traps after ~4 s instead of hanging the GPU: the process's CUDA context is then lost
// (every later call fails with the error), which a run of the untried kernel in a process of its
// own turns into one failed stage (scripts/gpu_session.sh wgmma).
__device__ __forceinline__ void mbar_wait(uint32_t bar, unsigned parity) {
#if defined(__CUDACC__)
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
#else
  simt::mbarrier_wait(bar, parity);
#endif
}
// Rows [row, row + box rows) and k [k, k + 64) of the tensor `map` describes into shared memory
// at dst; the bytes count towards bar's transaction.
__device__ __forceinline__ void tma_load(uint32_t dst, const TensorMap* map, int k, int row, uint32_t bar) {
#if defined(__CUDACC__)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(k), "r"(row), "r"(bar)
      : "memory");
#else
  simt::tma_load(dst, *map, k, row, bar);
#endif
}
__device__ __forceinline__ void fence_mbarrier_init() {
#if defined(__CUDACC__)
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
#endif  // KVP_HAS_WGMMA

constexpr int kBM = 128;  // two consumer warpgroups of 64 rows

template <int BN, int STAGES>
constexpr size_t tma_smem_bytes() {
  return size_t(STAGES) * (kBM + BN) * kRowBytes + 1024 + 2 * STAGES * sizeof(uint64_t);  // tiles, slack, barriers
}

template <int S, int BN, int STAGES>
__global__ void __launch_bounds__(384, 1)
    wgmma_tma_gemm_kernel(const __grid_constant__ TensorMap map_x, const __grid_constant__ TensorMap map_w, int M,
                          int K, int N, GemmOut y) {
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
    fence_mbarrier_init();
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
  float d[NI][IN / 2] = {};
  for (int s = 0; s < steps; ++s) {
    const int slot = s % STAGES;
    mbar_wait(full + 8 * slot, unsigned(s / STAGES) & 1);
    __syncwarp();  // the lanes may leave the polling loop apart; the .aligned wgmma need them together
    const uint32_t a = tiles + slot * kStageBytes;
    mma_stage<S, IN, NI>(d, a + cw * 64 * kRowBytes, a + kBM * kRowBytes);
    // Stage s - 1's group has completed (all but the newest): its slot goes back to the producer.
    retire_groups<1, IN, NI>(d);
    if (s > 0 && tid % 32 == 0) mbar_arrive(empty + 8 * ((s - 1) % STAGES));
  }
  retire_groups<0, IN, NI>(d);
  store_accumulators<IN, NI>(d, y, M, N, m0 + cw * 64, n0, tid % 128);
#else
  __trap();  // launched from a build without sm_90a code for this GPU: fail, never leave y unwritten
#endif
}

// make_map(base, rows, K, box_rows) describes a row-major [rows, K] matrix read in boxes of
// box_rows x 64 (cuTensorMapEncodeTiled on the GPU; the CPU suite's own).
template <int S, int BN, int STAGES, class Launch, class MakeMap>
void launch_tma_tile(const Launch& launch, const MakeMap& make_map, const void* xh, int M, const void* W, int K, int N,
                     GemmOut y) {
  const TensorMap mx = make_map(xh, M, K, kBM), mw = make_map(W, N, K, BN);
  const dim3 grid(unsigned((N + BN - 1) / BN), unsigned((M + kBM - 1) / kBM));
  launch.with_smem(tma_smem_bytes<BN, STAGES>(), wgmma_tma_gemm_kernel<S, BN, STAGES>, grid, dim3(384), mx, mw, M, K,
                   N, y);
}

// The two kernels: 128 x 128 tiles with 6 stages, 128 x 256 with 4 (192 KB of tiles each).
template <int S, class Launch, class MakeMap>
void tma_gemm_as(const Launch& launch, const MakeMap& make_map, const void* xh, int M, const void* W, int K, int N,
                 GemmOut y, bool wide) {
  if (wide)
    launch_tma_tile<S, 256, 4>(launch, make_map, xh, M, W, K, N, y);
  else
    launch_tma_tile<S, 128, 6>(launch, make_map, xh, M, W, K, N, y);
}

}  // namespace
}  // namespace kvp::cuda::wgmma
