#pragma once
// The wgmma family's kernel with the copies taken off the tensor cores' warps: one producer
// warpgroup whose first thread moves each stage's tiles by TMA (cp.async.bulk.tensor, which writes
// the same 128-byte swizzle the descriptors read, zeros past M, N and K), BM / 64 consumer
// warpgroups of 64 rows each that only wait, multiply and release, over a ring of STAGES stages
// with a "full" and an "empty" mbarrier each. The instructions each output sees are
// cuda_wgmma_gemm_kernel.cuh's (mma_stage: one m64nINk16 per 16 k in increasing order, C = 0
// first, IN = 32 or 128 columns an instruction), so its bits are that family's; only who copies
// and how the stages are handed over differ.
// Tiles: 128 x 128 and 128 x 256 for large M (an H100 timed them at 470-550 TFLOPS from M = 2048,
// docs/performance.md); 64 x 32 for decode-sized M, where the time is reading W: 128 blocks at
// N = 4096 instead of 32, each with 8 stages (32 KB of W) in flight. Forced only
// (KVPARITY_CUDA_GEMM=wgmma-tma64x32 | wgmma-tma128x128 | wgmma-tma128x256, or wgmma-tma: the
// tile by M) until an H100 has timed the 64 x 32 one.
// In this header so that the CPU suite runs the same source (simt_host.h emulates the mbarriers,
// the TMA copies and the wgmma); cuda_wgmma_tma_gemm.cu makes the tensor maps and launches it.
#include <cstdint>

#include "cuda/cuda_device_api.cuh"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_tile_order.cuh"
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

template <int BM, int BN, int STAGES>
constexpr size_t tma_smem_bytes() {
  return size_t(STAGES) * (BM + BN) * kRowBytes + 1024 + 2 * STAGES * sizeof(uint64_t);  // tiles, slack, barriers
}

// The producer warpgroup and BM / 64 consumer ones.
template <int BM>
constexpr int kTmaThreads = 128 + BM / 64 * 128;

// Block b computes tiles b, b + gridDim.x, ... in tile_of_block's order, through one ring of
// stages across them: a grid of one block a tile gives each block its own tile; a persistent grid
// (one block a multiprocessor) lets the producer load the next tile's first stages while the
// consumers store this one's outputs, and fills a block's pipeline once rather than once a tile.
// Each tile's instructions are the same either way (C = 0, one mma_stage a stage in k order): the
// same bits for every grid.
template <int S, int BM, int BN, int STAGES>
__global__ void __launch_bounds__(kTmaThreads<BM>)
    wgmma_tma_gemm_kernel(const __grid_constant__ TensorMap map_x, const __grid_constant__ TensorMap map_w, int M,
                          int K, int N, GemmOut y, int group) {
  pdl_entry();
#if defined(KVP_HAS_WGMMA)
  constexpr int IN = kInstrCols<BN>, NI = kInstrs<BN>;
  static_assert(kTileOfInstrs<BN> && STAGES >= 2 && (BM == 64 || BM == 128));
  constexpr int kStageBytes = (BM + BN) * kRowBytes;  // a multiple of 1024: every tile stays 1024-aligned
  static_assert(kStageBytes % 1024 == 0 && BM * kRowBytes % 1024 == 0);
  constexpr unsigned kConsumerWarps = BM / 64 * 4;
  KVP_DYNAMIC_SHARED(unsigned char, raw);
  const uint32_t raw_addr = unsigned(__cvta_generic_to_shared(raw));
  const uint32_t tiles = (raw_addr + 1023) & ~1023u;
  const uint32_t full = tiles + STAGES * kStageBytes, empty = full + STAGES * 8;  // mbarriers, 8 bytes each
  const int tid = threadIdx.x, wg = tid / 128;
  const int m_tiles = (M + BM - 1) / BM, n_tiles = (N + BN - 1) / BN, count = m_tiles * n_tiles;
  const int steps = (K + kStageK - 1) / kStageK;
  if (tid == 0) {
    for (int i = 0; i < STAGES; ++i) {
      mbar_init(full + 8 * i, 1);                // the producer's expect_tx arrival (then the bytes)
      mbar_init(empty + 8 * i, kConsumerWarps);  // one arrival per consumer warp
    }
    fence_mbarrier_init();
    fence_to_async_proxy();
  }
  __syncthreads();
  if (wg == 0) {
    if (tid == 0) {
      int it = 0;  // stages loaded so far, over every tile of this block
      for (int b = int(blockIdx.x); b < count; b += int(gridDim.x)) {
        const TileIndex tile = tile_of_block(b, m_tiles, n_tiles, group);
        for (int s = 0; s < steps; ++s, ++it) {
          const int slot = it % STAGES;
          if (it >= STAGES) mbar_wait(empty + 8 * slot, unsigned(it / STAGES - 1) & 1);
          const uint32_t bar = full + 8 * slot, a = tiles + slot * kStageBytes;
          mbar_expect_bytes(bar, kStageBytes);  // whole boxes: TMA counts the zeros it writes past the ends
          tma_load(a, &map_x, s * kStageK, tile.m * BM, bar);
          tma_load(a + BM * kRowBytes, &map_w, s * kStageK, tile.n * BN, bar);
        }
      }
    }
    return;
  }
  const int cw = wg - 1;  // consumer warpgroup: rows 64 cw .. of the tile
  int it = 0;             // stages consumed so far
  for (int b = int(blockIdx.x); b < count; b += int(gridDim.x)) {
    const TileIndex tile = tile_of_block(b, m_tiles, n_tiles, group);
    float d[NI][IN / 2] = {};
    for (int s = 0; s < steps; ++s, ++it) {
      const int slot = it % STAGES;
      mbar_wait(full + 8 * slot, unsigned(it / STAGES) & 1);
      __syncwarp();  // the lanes may leave the polling loop apart; the .aligned wgmma need them together
      const uint32_t a = tiles + slot * kStageBytes;
      mma_stage<S, IN, NI>(d, a + cw * 64 * kRowBytes, a + BM * kRowBytes);
      // The previous stage's group has completed (all but the newest): its slot goes back to the producer.
      retire_groups<1, IN, NI>(d);
      if (s > 0 && tid % 32 == 0) mbar_arrive(empty + 8 * ((it - 1) % STAGES));
    }
    retire_groups<0, IN, NI>(d);
    if (tid % 32 == 0) mbar_arrive(empty + 8 * ((it - 1) % STAGES));  // the tile's last stage
    store_accumulators<IN, NI>(d, y, M, N, tile.m * BM + cw * 64, tile.n * BN, tid % 128);
  }
#else
  __trap();  // launched from a build without sm_90a code for this GPU: fail, never leave y unwritten
#endif
}

// make_map(base, rows, K, box_rows) describes a row-major [rows, K] matrix read in boxes of
// box_rows x 64 (cuTensorMapEncodeTiled on the GPU; the CPU suite's own). persistent_blocks > 0:
// that many blocks at most (the multiprocessors: one block each), each walking several tiles;
// else one block a tile.
template <int S, int BM, int BN, int STAGES, class Launch, class MakeMap>
void launch_tma_tile(const Launch& launch, const MakeMap& make_map, const void* xh, int M, const void* W, int K, int N,
                     GemmOut y, int group, int persistent_blocks = 0) {
  const TensorMap mx = make_map(xh, M, K, BM), mw = make_map(W, N, K, BN);
  const int count = (N + BN - 1) / BN * ((M + BM - 1) / BM);
  const int blocks = persistent_blocks > 0 && persistent_blocks < count ? persistent_blocks : count;
  launch.with_smem(tma_smem_bytes<BM, BN, STAGES>(), wgmma_tma_gemm_kernel<S, BM, BN, STAGES>, dim3(unsigned(blocks)),
                   dim3(kTmaThreads<BM>), mx, mw, M, K, N, y, group);
}

// The tiles: 128 x 128 with 6 stages, 128 x 256 with 4 (192 KB of tiles each), 64 x 32 with 8
// (96 KB: two blocks a multiprocessor), 64 x 64 with 6 (the same; forced only: at a batch of 64,
// half the reads of x per byte of W that 64 x 32 makes, from half as many blocks). TmaAuto: 64 x
// 32 up to 64 rows (decode, a batch of 64 steps), 128 x 128 up to 1024, 128 x 256 beyond (from
// the H100's per-GEMM times at Llama-2-7B's shapes: 128 x 256 faster from M = 2048, 128 x 128 at
// 512). TmaPersistent*: those tiles on `blocks` blocks at most (forced only). Every tile: the
// family's bits.
template <int S, class Launch, class MakeMap>
void tma_gemm_as(const Launch& launch, const MakeMap& make_map, const void* xh, int M, const void* W, int K, int N,
                 GemmOut y, WgmmaTile tile, int group = kTileGroup, int blocks = 132) {
  if (tile == WgmmaTile::TmaAuto)
    tile = M <= 64 ? WgmmaTile::Tma64x32 : M <= 1024 ? WgmmaTile::Tma128x128 : WgmmaTile::Tma128x256;
  if (tile == WgmmaTile::TmaPersistentAuto)
    tile = M <= 64     ? WgmmaTile::Tma64x32
           : M <= 1024 ? WgmmaTile::TmaPersistent128x128
                       : WgmmaTile::TmaPersistent128x256;
  switch (tile) {
    case WgmmaTile::TmaPersistent128x128:
      return launch_tma_tile<S, 128, 128, 6>(launch, make_map, xh, M, W, K, N, y, group, blocks);
    case WgmmaTile::TmaPersistent128x256:
      return launch_tma_tile<S, 128, 256, 4>(launch, make_map, xh, M, W, K, N, y, group, blocks);
    case WgmmaTile::Tma64x32: return launch_tma_tile<S, 64, 32, 8>(launch, make_map, xh, M, W, K, N, y, group);
    case WgmmaTile::Tma64x64: return launch_tma_tile<S, 64, 64, 6>(launch, make_map, xh, M, W, K, N, y, group);
    case WgmmaTile::Tma128x256: return launch_tma_tile<S, 128, 256, 4>(launch, make_map, xh, M, W, K, N, y, group);
    default: return launch_tma_tile<S, 128, 128, 6>(launch, make_map, xh, M, W, K, N, y, group);
  }
}

}  // namespace
}  // namespace kvp::cuda::wgmma
