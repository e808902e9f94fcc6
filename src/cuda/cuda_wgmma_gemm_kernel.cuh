#pragma once
// The `invariant` policy's GEMM on Hopper's warpgroup tensor-core instructions (wgmma, sm_90a):
// y[M, N] = x[M, K] . W[N, K]^T for fp16/bf16 x and W, fp32 out. A family of its own beside the
// mma.sync kernels of cuda_invariant_gemm_kernel.cuh, chosen for every M at once
// (KVPARITY_CUDA_GEMM=wgmma; forced only until measured on an H100), because its bits are its own.
//
// Why an output's bits depend on K alone: output (m, n) is one fp32 accumulator element of one
// warpgroup's wgmma.mma_async.m64nNk16 instructions, and it sees the same sequence whatever M, the
// batch or the tile: C = 0, then one instruction per 16-k group g = 0, 1, ... in increasing order,
// whose 16 products are x[m, 16g + s] * W[n, 16g + s] in slot s (both operands K-major in shared
// memory, so slot s is k = 16g + s), each reading C from the previous one (the instructions that
// accumulate into one register set run in issue order). No split-K, no other grouping of k; k past
// K is zero-filled (zero products, the same for every M). An element of D is computed from its own
// row of A, column of B and element of C: the other rows of the tile (other sequences, padding
// rows, which are zeros) and the instruction's N (32 for decode tiles, 128 otherwise) decide only
// which outputs an instruction computes. The CUDA suite checks that claim for every tile against
// the others (CudaInvariant.GemmRowIsTheSameBitsForEveryMAndCloseToFp32) and through a whole pass
// (CudaInvariant.WgmmaFamilyHoldsTheBattery). Whether these bits equal the mma.sync family's is not
// claimed (the products sum in other groups of 16): the suite prints what it finds.
//
// A block: BM / 64 warpgroups side by side along M (64 rows each), BN columns, 64 k a stage. Every
// thread copies its share of a stage by cp.async into the 128-byte swizzled layout the
// instructions read (16-byte piece c of row r at c ^ (r mod 8)), STAGES - 2 stages ahead; one
// group of wgmma (4 k16 steps) stays in flight while the next is issued.
// The kernel and its dispatch live in this header so that the CPU suite runs the same source on
// the host (simt_host.h emulates each wgmma from the shared-memory layout the PTX ISA defines, at
// its issue or only at its wait_group, by schedule); cuda_wgmma_gemm.cu launches them.
#include "cuda/cuda_device_api.cuh"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_tile_order.cuh"
#include "cuda/cuda_wgmma.cuh"

// Unnamed: the CPU suite's host build of this source must not meet the GPU build at link time.
namespace kvp::cuda::wgmma {
namespace {

template <int BM, int BN, int STAGES>
constexpr size_t wgmma_smem_bytes() {
  return size_t(STAGES) * (BM + BN) * kRowBytes + 1024;  // + the slack to align the tiles to 1024
}

template <int S, int BM, int BN, int STAGES>
__global__ void __launch_bounds__(BM / 64 * 128, 1)
    wgmma_gemm_kernel(const uint16_t* xh, int M, const uint16_t* W, int K, int N, GemmOut y, int group) {
  pdl_entry();
#if defined(KVP_HAS_WGMMA)
  static_assert(BM % 64 == 0 && STAGES >= 3);
  constexpr int IN = kInstrCols<BN>, NI = kInstrs<BN>;
  static_assert(kTileOfInstrs<BN>);
  constexpr int kThreads = BM / 64 * 128, kRows = BM + BN, kStageBytes = kRows * kRowBytes;
  KVP_DYNAMIC_SHARED(unsigned char, raw);
  const uint32_t raw_addr = unsigned(__cvta_generic_to_shared(raw));
  const uint32_t pad = ((raw_addr + 1023) & ~1023u) - raw_addr;
  unsigned char* tiles = raw + pad;
  const uint32_t tiles_addr = raw_addr + pad;
  const TileIndex tile = tile_of_block(int(blockIdx.x), (M + BM - 1) / BM, (N + BN - 1) / BN, group);
  const int tid = threadIdx.x, m0 = tile.m * BM, n0 = tile.n * BN;
  const int steps = (K + kStageK - 1) / kStageK;
  // Row r of a stage: x row m0 + r (r < BM), else W row n0 + r - BM; false past M or N.
  auto row_valid = [&](int r) { return r < BM ? m0 + r < M : n0 + r - BM < N; };
  auto piece = [&](int st, int r, int c) { return tiles + st * kStageBytes + r * kRowBytes + ((c ^ (r & 7)) << 4); };

  // Rows past M or N hold zeros in every stage, written once and never copied again.
  for (int i = tid; i < STAGES * kRows; i += kThreads) {
    const int st = i / kRows, r = i % kRows;
    if (row_valid(r)) continue;
#pragma unroll
    for (int c = 0; c < 8; ++c) *reinterpret_cast<uint4*>(piece(st, r, c)) = make_uint4(0, 0, 0, 0);
  }
  auto load_stage = [&](int s) {
    const int st = s % STAGES, k = s * kStageK;
    for (int i = tid; i < kRows * 8; i += kThreads) {
      const int r = i / 8, c = i % 8, kk = k + 8 * c;
      if (!row_valid(r)) continue;
      const bool ok = kk < K;  // the tail past K as zeros
      const uint16_t* src = r < BM ? xh + size_t(m0 + r) * K + kk : W + size_t(n0 + r - BM) * K + kk;
      copy16(piece(st, r, c), ok ? src : xh, ok);
    }
  };

  float d[NI][IN / 2] = {};
  // One commit group a stage, empty or not: "stage s has landed" is always wait_copies<STAGES - 3>.
#pragma unroll
  for (int s = 0; s < STAGES - 2; ++s) {
    if (s < steps) load_stage(s);
    commit_copies();
  }
  const int wg = tid / 128;
  for (int s = 0; s < steps; ++s) {
    wait_copies<STAGES - 3>();
    fence_to_async_proxy();
    // Stage s is visible to every warpgroup, and every warpgroup's wgmma of stage s - 2 are done
    // (each waited for all but its newest group), so stage s - 2's slot takes stage s + STAGES - 2.
    __syncthreads();
    if (s + STAGES - 2 < steps) load_stage(s + STAGES - 2);
    commit_copies();
    const uint32_t a = tiles_addr + (s % STAGES) * kStageBytes + wg * 64 * kRowBytes;
    const uint32_t b = tiles_addr + (s % STAGES) * kStageBytes + BM * kRowBytes;
    mma_stage<S, IN, NI>(d, a, b);
    retire_groups<1, IN, NI>(d);
  }
  retire_groups<0, IN, NI>(d);
  wait_copies<0>();  // no copy outlives the block (the last groups are empty)

  store_accumulators<IN, NI>(d, y, M, N, m0 + wg * 64, n0, tid % 128);
#else
  __trap();  // launched from a build without sm_90a code for this GPU: fail, never leave y unwritten
#endif
}

// launch.with_smem(bytes, kernel, grid, block, args...) runs a kernel (StreamLaunch on the GPU).
template <int S, int BM, int BN, int STAGES, class Launch>
void launch_tile(const Launch& launch, const uint16_t* xh, int M, const uint16_t* W, int K, int N, GemmOut y,
                 int group) {
  const dim3 grid(unsigned((N + BN - 1) / BN * ((M + BM - 1) / BM)));  // tile_of_block's order
  launch.with_smem(wgmma_smem_bytes<BM, BN, STAGES>(), wgmma_gemm_kernel<S, BM, BN, STAGES>, grid, dim3(BM / 64 * 128),
                   xh, M, W, K, N, y, group);
}

// Which tile by M (WgmmaTile::Auto), to be set from kvparity_bench's cuda_matmul rows once an
// H100 has timed them: decode-sized M (bound by reading W) in 64 x 32 tiles, many blocks and six
// stages in flight, up to 128 rows (64 x 128 tiles would leave half the GPU idle at N = 4096);
// 64 x 128 tiles to 256 rows, 128 x 128 beyond (128 x 256 forced only).
template <int S, class Launch>
void gemm_as(const Launch& launch, const uint16_t* xh, int M, const uint16_t* W, int K, int N, GemmOut y,
             WgmmaTile tile, int group = kTileGroup) {
  if (tile == WgmmaTile::Auto)
    tile = M <= 128 ? WgmmaTile::T64x32 : M <= 256 ? WgmmaTile::T64x128 : WgmmaTile::T128x128;
  switch (tile) {
    case WgmmaTile::T64x32: return launch_tile<S, 64, 32, 8>(launch, xh, M, W, K, N, y, group);
    case WgmmaTile::T64x128: return launch_tile<S, 64, 128, 4>(launch, xh, M, W, K, N, y, group);
    case WgmmaTile::T128x256: return launch_tile<S, 128, 256, 4>(launch, xh, M, W, K, N, y, group);
    default: return launch_tile<S, 128, 128, 4>(launch, xh, M, W, K, N, y, group);
  }
}

}  // namespace
}  // namespace kvp::cuda::wgmma
