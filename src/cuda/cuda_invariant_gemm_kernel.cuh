#pragma once
// The `invariant` policy's GEMM on tensor cores (fp16/bf16 compute with weights of that dtype):
// y[M, N] = x[M, K] . W[N, K]^T, every output reduced in one order that depends on K alone.
//
// Why the bits cannot depend on M, the batch or the launch: an output (m, n) is the accumulator of
// one mma.sync.m16n8k16 fragment element in one warp, and that element sees the same instruction
// sequence whatever the shape: C = 0, then for each 32-k chunk c = 0, 1, ... in increasing order two
// mma instructions (fp32 accumulation) whose 16 products are x[m, k] * W[n, k] for a fixed set of
// k (below), each reading C from the previous one. No split-K, no other instruction, no other
// grouping of k. A tensor-core mma computes each element of D from its own row of A, column of B
// and element of C only, so the other rows of the tile (other sequences of the batch, padding
// rows, the prompt's other positions) cannot change it, and neither can which warp or block runs
// it. The launch shapes below (rows per warp, columns per warp) change only which warp computes
// which outputs; the per-output sequence is the same.
//
// The k order inside a chunk: lane (g = lane / 4, t = lane % 4) loads 8 consecutive k of a row, k =
// 32c + 8t .. 32c + 8t + 7 (one 16-byte load of W, two of the converted x), and feeds k + 0..3 to
// the chunk's first mma (slots 2t, 2t+1, 2t+8, 2t+9 of its k16) and k + 4..7 to the second. A and B
// use the same map, so each mma sums 16 true products. K past its end is zero-padded to the chunk:
// zero products, the same for every M.
// Three kernels issue that sequence. Decode-sized M (a step is bound by reading W) loads each
// lane's fragments of W straight into registers, several chunks ahead (gemm_kernel), or streams
// them through a ring of chunks in shared memory (gemm_ring_kernel, forced only).
// Larger M (prefill, a cache-OFF step, big batches; bound by the tensor cores) stages tiles of x
// and W (64 x 128, 128 x 128 or 128 x 256 outputs a block) in shared memory through a cp.async
// pipeline and reads the fragments from there (tiled_kernel). Each reads the same 16 bytes per
// lane and issues the same two mma per chunk, so a row's bits do not depend on which kernel M
// picked (or GemmKernel forced).
// On an H100 or H200 a second family (cuda_wgmma_gemm_kernel.cuh: Hopper's wgmma, its products in
// other groups of 16, so bits of its own) can be chosen instead, for a whole run, never by M. The
// register kernel can also feed each mma the wgmma family's group of 16 consecutive k (KMap below):
// whether an mma.sync then sums them to the wgmma's bits is the hardware's to say, and the CUDA
// suite asks it (CudaInvariant.WgmmaGemmRow*: such a kernel's rows against the wgmma family's). An
// H100 said yes (2026-11-26) for two slot orders of the 16 (Slots16, Blocks16): the sum of an
// instruction's 16 products does not depend on which slot holds which, which Exchange16 relies on.
// The kernels and their dispatch live in this header so that the CPU suite runs the same source on
// the host (simt_host.h, where an mma is emulated from the PTX fragment layout and a cp.async copy
// lands at its issue or only at its wait, by block); cuda_invariant_gemm.cu launches them.
#include "cuda/cuda_device_api.cuh"
#include "cuda/cuda_gemm_out.cuh"
#include "cuda/cuda_invariant_gemm_fragments.cuh"
#include "cuda/cuda_tile_order.cuh"

// Unnamed: the CPU suite's host build of this source must not meet the GPU build at link time.
namespace kvp::cuda::invariant {
namespace {

constexpr int kWarps = 4;

// A warp computes MT m16 tiles by NT n8 tiles; a block's four warps sit side by side along N. The
// fragments of U chunks are loaded before their mma instructions run (a decode step is bound by
// reading W: the loads of a whole stretch of K are in flight at once); chunks past K are loaded as
// zeros and never multiplied, so U changes nothing but speed. Pipelined: the next U chunks' loads
// are issued before this stretch's mma instead of after, so the loads in flight never drain to
// none between stretches (twice the registers); the same mma in the same order.
// xh: x converted to the compute dtype (exact: x holds values of it).
template <int S, int MT, int NT, int U, bool Vec, KMap Map = KMap::Pairs>
struct Stretch {
  uint4 b[U][NT], xa[U][MT], xb[U][MT];
  // The fragments of chunks ch0 .. ch0 + U - 1.
  __device__ __forceinline__ void load(const uint16_t* xh, int M, const uint16_t* W, int K, int N, int m0, int n0,
                                       int ch0, int g, int t) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int k0 = 32 * (ch0 + u);
#pragma unroll
      for (int j = 0; j < NT; ++j) b[u][j] = load_fragment<Map, Vec>(W, n0 + 8 * j + g, N, k0, K, t);
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        xa[u][i] = load_fragment<Map, Vec>(xh, m0 + 16 * i + g, M, k0, K, t);
        xb[u][i] = load_fragment<Map, Vec>(xh, m0 + 16 * i + g + 8, M, k0, K, t);
      }
    }
  }
  __device__ __forceinline__ void multiply(float (&c)[MT][NT][4], int ch0, int chunks) const {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (ch0 + u >= chunks) break;
      mma_chunk<S>(c, xa[u], xb[u], b[u]);
    }
  }
};

template <int S, int MT, int NT, int U, bool Vec, bool Pipelined = false, KMap Map = KMap::Pairs>
__global__ void __launch_bounds__(kWarps * 32)
    gemm_kernel(const uint16_t* xh, int M, const uint16_t* W, int K, int N, GemmOut y) {
  pdl_entry();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int n0 = (blockIdx.x * kWarps + warp) * 8 * NT;
  const int m0 = blockIdx.y * 16 * MT;
  if (n0 >= N) return;  // the whole warp (mma.sync needs all 32 lanes)
  float c[MT][NT][4] = {};
  const int chunks = chunks_of<Map>(K);
  if constexpr (Pipelined) {
    Stretch<S, MT, NT, U, Vec, Map> cur, next;
    cur.load(xh, M, W, K, N, m0, n0, 0, g, t);
    for (int ch0 = 0; ch0 < chunks; ch0 += U) {
      const bool more = ch0 + U < chunks;
      if (more) next.load(xh, M, W, K, N, m0, n0, ch0 + U, g, t);
      cur.multiply(c, ch0, chunks);
      if (more) cur = next;
    }
  } else {
    for (int ch0 = 0; ch0 < chunks; ch0 += U) {
      Stretch<S, MT, NT, U, Vec, Map> st;
      st.load(xh, M, W, K, N, m0, n0, ch0, g, t);
      st.multiply(c, ch0, chunks);
    }
  }
  store_tiles(c, y, M, N, m0, n0, lane);
}

// launch(kernel, grid, block, args...) runs a kernel (StreamLaunch on the GPU).
template <int S, int MT, int NT, int U, bool Vec, class Launch, bool Pipelined = false, KMap Map = KMap::Pairs>
void launch_shape(const Launch& launch, const uint16_t* xh, int M, const uint16_t* W, int K, int N, GemmOut y) {
  const int cols = kWarps * 8 * NT, rows = 16 * MT;
  const dim3 grid(unsigned((N + cols - 1) / cols), unsigned((M + rows - 1) / rows));
  launch(gemm_kernel<S, MT, NT, U, Vec, Pipelined, Map>, grid, dim3(kWarps * 32), xh, M, W, K, N, y);
}

// Decode-sized M with 16-byte loads (gemm_ring_kernel): the direct kernel's warp shapes, but each
// lane streams its own fragments of W through a ring of D chunks in shared memory by cp.async, so
// that D chunks of W per lane stay in flight without holding registers, and the stream never
// drains between batches of loads. A lane copies exactly the 16 bytes per n8 tile it later feeds
// to the mma (row n0 + 8j + g, k = 32c + 8t ..), so it reads only its own copies: no barrier,
// only its wait. Chunks are consumed G at a time (their fragments read together, then their mma
// in chunk order), and refilled G at a time into the slots the previous step emptied. x (a few
// rows, read by every block) comes from global memory through the caches.
constexpr int kRingLanes = kWarps * 32;

template <int S, int MT, int NT, int D, int G>
__global__ void __launch_bounds__(kRingLanes)
    gemm_ring_kernel(const uint16_t* xh, int M, const uint16_t* W, int K, int N, GemmOut y) {
  pdl_entry();
  static_assert(D % G == 0 && D / G >= 2, "whole steps, one in use while the next arrive");
  constexpr int kSteps = D / G;  // ring slots, in steps of G chunks
  __shared__ __align__(16) uint4 ring[D][NT][kRingLanes];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // m-blocks along x: the blocks that share a stretch of W run side by side and share its reads.
  const int m0 = blockIdx.x * 16 * MT;
  const int n0 = (blockIdx.y * kWarps + warp) * 8 * NT;
  if (n0 >= N) return;  // the whole warp; no barrier below
  const int chunks = (K + 31) / 32;
  // Step q's copies: chunks qG .. qG + G - 1 into slots (q mod kSteps) G + ..; one commit group a
  // step, empty past K, so that "step q has landed" is always wait_copies<kSteps - 2>.
  auto issue = [&](int q) {
#pragma unroll
    for (int u = 0; u < G; ++u) {
      const int c = q * G + u, slot = (q % kSteps) * G + u, k = 32 * c + 8 * t;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int n = n0 + 8 * j + g;
        const bool ok = n < N && k < K;  // else zeros: rows past N, k past K (the last chunk's tail)
        if (c < chunks) copy16(&ring[slot][j][threadIdx.x], ok ? W + size_t(n) * K + k : W, ok);
      }
    }
    commit_copies();
  };
  const int steps = (chunks + G - 1) / G;
#pragma unroll
  for (int q = 0; q < kSteps - 1; ++q) issue(q);
  float c[MT][NT][4] = {};
  for (int q = 0; q < steps; ++q) {
    wait_copies<kSteps - 2>();
    uint4 b[G][NT], xa[G][MT], xb[G][MT];
#pragma unroll
    for (int u = 0; u < G; ++u) {
      const int slot = (q % kSteps) * G + u, k = 32 * (q * G + u) + 8 * t;
#pragma unroll
      for (int j = 0; j < NT; ++j) b[u][j] = load_raw<uint4>(&ring[slot][j][threadIdx.x]);
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        xa[u][i] = load8<true>(xh, m0 + 16 * i + g, M, k, K);
        xb[u][i] = load8<true>(xh, m0 + 16 * i + g + 8, M, k, K);
      }
    }
    // The slots of step q - 1, read in the previous step, take step q + kSteps - 1.
    issue(q + kSteps - 1);
#pragma unroll
    for (int u = 0; u < G; ++u) {
      if (q * G + u >= chunks) break;
      mma_chunk<S>(c, xa[u], xb[u], b[u]);
    }
  }
  wait_copies<0>();  // no copy outlives the block
  store_tiles(c, y, M, N, m0, n0, lane);
}

template <int S, int MT, int NT, int D, int G, class Launch>
void launch_ring(const Launch& launch, const uint16_t* xh, int M, const uint16_t* W, int K, int N, GemmOut y) {
  const int cols = kWarps * 8 * NT, rows = 16 * MT;
  const dim3 grid(unsigned((M + rows - 1) / rows), unsigned((N + cols - 1) / cols));
  launch(gemm_ring_kernel<S, MT, NT, D, G>, grid, dim3(kRingLanes), xh, M, W, K, N, y);
}

constexpr int kTiledWarps = 8;
constexpr int kChunk = 32;  // k per pipeline stage: one chunk of the mma sequence

// Dynamic shared memory of a tiled_kernel: STAGES stages of (BM + BN) rows of KC chunks.
template <int BM, int BN, int STAGES, int KC = 1>
constexpr size_t tiled_smem_bytes() {
  return size_t(STAGES) * (BM + BN) * KC * kChunk * sizeof(uint16_t);
}

// A block computes BM x BN outputs: 8 warps, WM along M by 8 / WM along N, each warp MT m16 tiles
// by NT n8 tiles. Stage s holds chunk c = s mod STAGES: x rows [m0, m0 + BM), then W rows [n0, n0
// + BN), k in [32c, 32c + 32), row-major, 64 bytes a row (a warp's 16-byte fragment reads then hit
// 32 different banks per quarter-warp). Needs K % 8 == 0 and 16-byte aligned x and W.
// KC = 2: a stage holds two chunks (128-byte rows, half the barriers and copy groups per mma),
// still multiplied one after the other in chunk order; an odd row keeps its two halves swapped
// (16-byte piece p at p ^ 4), so that rows g and g + 1 of a quarter-warp's reads meet different
// banks.
// Larger tiles read less from L2 per mma (BM x BN outputs for (BM + BN) rows a chunk) and fewer
// fragments per mma (MT + NT loads for MT x NT tiles), at the cost of fewer blocks for a small M.
template <int S, int BM, int BN, int WM, int STAGES, int KC = 1>
__global__ void __launch_bounds__(kTiledWarps * 32)
    tiled_kernel(const uint16_t* xh, int M, const uint16_t* W, int K, int N, GemmOut y, int group) {
  pdl_entry();
  constexpr int WN = kTiledWarps / WM;
  constexpr int MT = BM / WM / 16, NT = BN / WN / 8;
  static_assert(MT * WM * 16 == BM && NT * WN * 8 == BN, "warps tile the block");
  constexpr int kThreads = kTiledWarps * 32, kRows = BM + BN;
  static_assert(KC == 1 || KC == 2);
  constexpr int kPieces = 4 * KC, kRowHalves = KC * kChunk;  // 16-byte pieces and halves a row
  KVP_DYNAMIC_SHARED(uint16_t, smem);  // [STAGES][kRows][kRowHalves]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const TileIndex tile = tile_of_block(int(blockIdx.x), (M + BM - 1) / BM, (N + BN - 1) / BN, group);
  const int m0 = tile.m * BM, n0 = tile.n * BN;
  const int wm = (warp % WM) * MT * 16, wn = (warp / WM) * NT * 8;  // the warp's corner in the tile
  const int chunks = (K + kChunk - 1) / kChunk, steps = (chunks + KC - 1) / KC;
  auto row_at = [&](int st, int row) { return smem + (size_t(st) * kRows + row) * kRowHalves; };
  // Where 16-byte piece p of a row sits in it.
  auto piece_at = [](int row, int p) { return KC == 2 ? p ^ ((row & 1) << 2) : p; };

  // Step c (chunks KC c .. KC c + KC - 1) into its stage: kRows rows of kPieces 16-byte pieces,
  // spread over the threads.
  auto load_chunk = [&](int c) {
    const int st = c % STAGES, k = c * kRowHalves;
    for (int i = threadIdx.x; i < kRows * kPieces; i += kThreads) {
      const int row = i / kPieces, kk = k + (i % kPieces) * 8;
      uint16_t* dst = row_at(st, row) + piece_at(row, i % kPieces) * 8;
      if (row < BM) {
        const int m = m0 + row;
        const bool ok = m < M && kk < K;
        copy16(dst, ok ? xh + size_t(m) * K + kk : xh, ok);
      } else {
        const int n = n0 + row - BM;
        const bool ok = n < N && kk < K;
        copy16(dst, ok ? W + size_t(n) * K + kk : W, ok);
      }
    }
  };

  float c[MT][NT][4] = {};
  // A group is committed for every stage, empty or not, so that wait_copies<STAGES - 2> always
  // means "chunk c has landed".
#pragma unroll
  for (int c0 = 0; c0 < STAGES - 1; ++c0) {
    if (c0 < steps) load_chunk(c0);
    commit_copies();
  }
  for (int sp = 0; sp < steps; ++sp) {
    wait_copies<STAGES - 2>();
    // Step sp is visible to every thread, and every warp is done with step sp - 1, whose stage
    // the next load refills.
    __syncthreads();
    if (sp + STAGES - 1 < steps) load_chunk(sp + STAGES - 1);
    commit_copies();
    const int st = sp % STAGES;
#pragma unroll
    for (int cc = 0; cc < KC; ++cc) {
      if (sp * KC + cc >= chunks) break;  // a chunk past K is never multiplied
      uint4 xa[MT], xb[MT], b[NT];
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        const int ra = wm + 16 * i + g, rb = ra + 8;
        xa[i] = load_raw<uint4>(row_at(st, ra) + piece_at(ra, 4 * cc + t) * 8);
        xb[i] = load_raw<uint4>(row_at(st, rb) + piece_at(rb, 4 * cc + t) * 8);
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int rw = BM + wn + 8 * j + g;
        b[j] = load_raw<uint4>(row_at(st, rw) + piece_at(rw, 4 * cc + t) * 8);
      }
      mma_chunk<S>(c, xa, xb, b);
    }
  }
  wait_copies<0>();  // no copy outlives the block (the last groups are empty)
  store_tiles(c, y, M, N, m0 + wm, n0 + wn, lane);
}

template <int S, int BM, int BN, int WM, int STAGES, class Launch, int KC = 1>
void launch_tiled(const Launch& launch, const uint16_t* xh, int M, const uint16_t* W, int K, int N, GemmOut y,
                  int group) {
  const dim3 grid(unsigned((N + BN - 1) / BN * ((M + BM - 1) / BM)));  // tile_of_block's order
  launch.with_smem(tiled_smem_bytes<BM, BN, STAGES, KC>(), tiled_kernel<S, BM, BN, WM, STAGES, KC>, grid,
                   dim3(kTiledWarps * 32), xh, M, W, K, N, y, group);
}

// Which kernel computes a GEMM. Every one issues the same mma sequence per output, so the choice
// changes speed only; Auto picks by M, the others are forced for every M (to measure them against
// each other: KVPARITY_CUDA_GEMM, kvparity_bench's cuda_matmul rows). Rows without 16-byte loads
// (K % 8 != 0, unaligned x or W) always take the register-prefetch kernel. Pipelined: the
// register prefetch with the next stretch's loads issued before this one's mma; Tiles128x128k64:
// 128 x 128 tiles with two chunks a stage (both forced only, to be measured).
enum class GemmKernel : int {
  Auto,
  Ring,
  Registers,
  Pipelined,
  Tiles64x128,
  Tiles128x128,
  Tiles128x256,
  Tiles128x128k64,
  // The mma.sync family's choice by M ("mma"): what Auto is wherever the wgmma family cannot run.
  // Auto resolves to it or to WgmmaTmaMma16b in launch_invariant_gemm (cuda_invariant_gemm.cu);
  // in this file both pick by M.
  Mma,
  // The wgmma family (cuda_wgmma_gemm.cu, launched by cuda_invariant_gemm.cu): bits of its own.
  // Here, where it does not apply, the mma.sync family's Auto.
  Wgmma,
  Wgmma64x32,
  Wgmma64x128,
  Wgmma128x128,
  Wgmma128x256,
  WgmmaTma128x128,
  WgmmaTma128x256,
  WgmmaTma64x32,
  WgmmaTma,
  // In the wgmma family's order on mma.sync (KMap::Slots16, Blocks16), its bits where the hardware
  // sums an mma.sync's 16 products as a wgmma's (an H100 does): the register kernel for every M; or
  // for decode-sized M (kMmaRows) beside wgmma-tma above it. WgmmaTmaMma16b is Auto on an H100 or
  // H200 (cuda_invariant_gemm.cu says why); the others are forced only.
  WgmmaMma16,
  WgmmaMma16b,
  WgmmaTmaMma16,
  WgmmaTmaMma16b,
  // The same with Exchange16 (one 16-byte load a fragment, as the mma.sync family's own).
  WgmmaMma16x,
  WgmmaTmaMma16x,
  // The TMA kernel made persistent (one block a multiprocessor walking the tiles; forced only).
  WgmmaTmaPersistent128x128,
  WgmmaTmaPersistent128x256,
  WgmmaTmaPersistent,
  WgmmaTma64x64,
  // WgmmaMma16b and WgmmaTmaMma16b with 16 chunks of W in flight a stretch at decode-sized M instead
  // of 8 (forced only, not yet timed): at N = 4096 (q, o, down) a 7B decode GEMM is 128 blocks of 4
  // warps, one a multiprocessor, and each warp waits out a load latency per stretch (down: 43
  // stretches of 8 chunks over K = 11008, 52.7 us on an H100 where cuBLAS takes 36.9).
  WgmmaMma16bDeep,
  WgmmaTmaMma16bDeep,
};
constexpr bool is_wgmma(GemmKernel k) { return int(k) >= int(GemmKernel::Wgmma); }

// The rows up to which WgmmaTmaMma16(b) take the register kernel: a decode step of one sequence
// or a few, bound by reading W, where the TMA kernel's 64-row tiles multiply mostly zeros.
constexpr int kMmaRows = 16;

// Whether k computes an M-row call with the register kernel in the wgmma family's order, and in
// which (Pairs: no, the wgmma kernels do).
constexpr KMap wgmma_order_map(GemmKernel k, int M) {
  switch (k) {
    case GemmKernel::WgmmaMma16: return KMap::Slots16;
    case GemmKernel::WgmmaMma16b:
    case GemmKernel::WgmmaMma16bDeep:
      return KMap::Blocks16;
    case GemmKernel::WgmmaTmaMma16: return M <= kMmaRows ? KMap::Slots16 : KMap::Pairs;
    case GemmKernel::WgmmaTmaMma16b:
    case GemmKernel::WgmmaTmaMma16bDeep:
      return M <= kMmaRows ? KMap::Blocks16 : KMap::Pairs;
    case GemmKernel::WgmmaMma16x: return KMap::Exchange16;
    case GemmKernel::WgmmaTmaMma16x: return M <= kMmaRows ? KMap::Exchange16 : KMap::Pairs;
    default: return KMap::Pairs;
  }
}

// Auto, from kvparity_bench's cuda_matmul rows on an H200 (docs/performance.md, 2026-11-26; every
// kernel forced at Llama-2-7B's shapes): decode-sized M (up to 64 rows, bound by reading W) the
// register prefetch, 1.3-1.9x faster there than the shared-memory ring at every shape (the ring's
// extra chunks in flight did not pay); 64-row tiles (4 stages) up to 256 rows, so that the GPU
// still gets a few blocks per multiprocessor; 128 x 128 tiles (3 stages) beyond, which beat the
// 128 x 256 ones at every shape from 2048 to 16384 rows (7-18%). The ring and the 128 x 256 tiles
// stay, forced only, for the next measurements.
template <int S, bool Vec, class Launch>
void gemm_as(const Launch& launch, const uint16_t* xh, int M, const uint16_t* W, int K, int N, GemmOut y,
             GemmKernel pick, int group) {
  if (is_wgmma(pick) || pick == GemmKernel::Mma) pick = GemmKernel::Auto;
  if constexpr (Vec) {
    if (pick == GemmKernel::Auto)
      pick = M <= 64 ? GemmKernel::Registers : M <= 256 ? GemmKernel::Tiles64x128 : GemmKernel::Tiles128x128;
    switch (pick) {
      case GemmKernel::Ring:
        if (M <= 16) return launch_ring<S, 1, 1, 16, 4>(launch, xh, M, W, K, N, y);
        return launch_ring<S, 2, 2, 8, 2>(launch, xh, M, W, K, N, y);
      case GemmKernel::Pipelined:  // the register prefetch's shapes, loads issued a stretch ahead
        if (M <= 16) return launch_shape<S, 1, 1, 8, true, Launch, true>(launch, xh, M, W, K, N, y);
        if (M <= 64) return launch_shape<S, 2, 2, 4, true, Launch, true>(launch, xh, M, W, K, N, y);
        return launch_shape<S, 4, 4, 1, true, Launch, true>(launch, xh, M, W, K, N, y);
      case GemmKernel::Tiles64x128: return launch_tiled<S, 64, 128, 2, 4>(launch, xh, M, W, K, N, y, group);
      case GemmKernel::Tiles128x128: return launch_tiled<S, 128, 128, 2, 3>(launch, xh, M, W, K, N, y, group);
      case GemmKernel::Tiles128x256: return launch_tiled<S, 128, 256, 2, 4>(launch, xh, M, W, K, N, y, group);
      case GemmKernel::Tiles128x128k64:  // two chunks a stage (3 stages, 96 KB)
        return launch_tiled<S, 128, 128, 2, 3, Launch, 2>(launch, xh, M, W, K, N, y, group);
      default: break;  // the register-prefetch kernel
    }
  }
  if (M <= 16)
    launch_shape<S, 1, 1, 8, Vec>(launch, xh, M, W, K, N, y);
  else if (M <= 64)
    launch_shape<S, 2, 2, 4, Vec>(launch, xh, M, W, K, N, y);
  else
    launch_shape<S, 4, 4, 2, Vec>(launch, xh, M, W, K, N, y);
}

// Whether k's decode-sized calls stream 16 chunks a stretch (the Deep kernels) rather than 8.
constexpr bool deep_prefetch(GemmKernel k) {
  return k == GemmKernel::WgmmaMma16bDeep || k == GemmKernel::WgmmaTmaMma16bDeep;
}
// Whether a call of M rows, K deep and N wide streams 16 chunks a stretch, the kernel `chosen`
// (Auto or a name) having resolved to `k`. Auto's wgmma-tma+mma16b does for a single row whose K
// is at least N (7B's o and down projections): on an H100 (2026-11-27, kvparity_bench, one row)
// 16 chunks took down (K 11008, N 4096) from 52.8 to 48.4 us and q/o (4096 x 4096) from 22.1 to
// 20.9, but gate (N 11008) from 37.7 to 46.9, and every GEMM of 16 rows slower. The same bits
// either way (the stretch changes when loads are issued, not the order of the sums).
constexpr bool deep_prefetch_for(GemmKernel chosen, GemmKernel k, int M, int K, int N) {
  return deep_prefetch(k) || (chosen == GemmKernel::Auto && k == GemmKernel::WgmmaTmaMma16b && M == 1 && K >= N);
}

// The register kernel in the wgmma family's order (map: Blocks16, Slots16 or Exchange16) for rows
// that load as 16-byte pieces, with the register prefetch's shapes; Deep: 16 chunks a stretch up
// to 16 rows (U changes nothing but speed: Stretch).
template <int S, KMap Map, bool Deep, class Launch>
void gemm_in_wgmma_order_as(const Launch& launch, const uint16_t* xh, int M, const uint16_t* W, int K, int N,
                            GemmOut y) {
  if (M <= 16) {
    if constexpr (Deep)
      launch_shape<S, 1, 1, 16, true, Launch, false, Map>(launch, xh, M, W, K, N, y);
    else
      launch_shape<S, 1, 1, 8, true, Launch, false, Map>(launch, xh, M, W, K, N, y);
  } else if (M <= 64)
    launch_shape<S, 2, 2, 4, true, Launch, false, Map>(launch, xh, M, W, K, N, y);
  else
    launch_shape<S, 4, 4, 2, true, Launch, false, Map>(launch, xh, M, W, K, N, y);
}
// deep: 16 chunks a stretch at decode-sized M (Blocks16 only; the other maps ignore it).
template <class Launch>
void gemm_in_wgmma_order(const Launch& launch, const void* xh, int M, const void* W, int store, int K, int N, GemmOut y,
                         KMap map, bool deep = false) {
  const auto* x16 = static_cast<const uint16_t*>(xh);
  const auto* w16 = static_cast<const uint16_t*>(W);
  auto as = [&]<int S>() {
    switch (map) {
      case KMap::Slots16:
        return gemm_in_wgmma_order_as<S, KMap::Slots16, false>(launch, x16, M, w16, K, N, y);
      case KMap::Blocks16:
        return deep ? gemm_in_wgmma_order_as<S, KMap::Blocks16, true>(launch, x16, M, w16, K, N, y)
                    : gemm_in_wgmma_order_as<S, KMap::Blocks16, false>(launch, x16, M, w16, K, N, y);
      case KMap::Exchange16:
        return gemm_in_wgmma_order_as<S, KMap::Exchange16, false>(launch, x16, M, w16, K, N, y);
      case KMap::Pairs: break;  // not this family's order
    }
  };
  if (store == kF16) as.template operator()<kF16>();
  if (store == kBF16) as.template operator()<kBF16>();
}

// xh: x in the 16-bit storage type `store` (kF16 or kBF16), as W.
template <class Launch>
void gemm(const Launch& launch, const void* xh, int M, const void* W, int store, int K, int N, GemmOut y,
          GemmKernel pick = GemmKernel::Auto, int group = kTileGroup) {
  const auto* x16 = static_cast<const uint16_t*>(xh);
  const auto* w16 = static_cast<const uint16_t*>(W);
  const bool vec = rows_load_16_bytes(xh, W, K);
  if (store == kF16)
    vec ? gemm_as<kF16, true>(launch, x16, M, w16, K, N, y, pick, group)
        : gemm_as<kF16, false>(launch, x16, M, w16, K, N, y, pick, group);
  if (store == kBF16)
    vec ? gemm_as<kBF16, true>(launch, x16, M, w16, K, N, y, pick, group)
        : gemm_as<kBF16, false>(launch, x16, M, w16, K, N, y, pick, group);
}

}  // namespace
}  // namespace kvp::cuda::invariant
