#pragma once
// Hopper's warpgroup tensor-core instructions as the wgmma GEMMs use them (cuda_wgmma_gemm.cu,
// cuda_wgmma_tma_gemm.cu): the mma, its fences, the shared-memory descriptor of a K-major tile in
// the 128-byte swizzle, the accumulators' store. Defined in the sm_90a pass and, emulated by
// simt_host.h, in the CPU suite's host build (KVP_HAS_WGMMA); the kernels trap elsewhere.
#include <cstdint>

#include "cuda/cuda_device_api.cuh"
#include "cuda/cuda_gemm_out.cuh"

// Unnamed inside: each .cu that includes this gets its own copies.
namespace kvp::cuda::wgmma {
namespace {

constexpr int kRowBytes = 128;  // 64 k of 16 bits: one row of the 128-byte swizzle
constexpr int kStageK = 64;     // k a pipeline stage: one swizzle row

// The columns one wgmma instruction of a BN-column tile computes (m64n32k16 for the 32- and
// 64-column decode tiles, m64n128k16 otherwise), and how many such instructions a k16 step of the
// tile takes. Which instruction covers a column never changes its output's sequence of k16 steps.
template <int BN>
constexpr int kInstrCols = BN < 128 ? 32 : 128;
template <int BN>
constexpr int kInstrs = BN / kInstrCols<BN>;
template <int BN>
constexpr bool kTileOfInstrs = BN % kInstrCols<BN> == 0 && (kInstrCols<BN> == 32 || kInstrCols<BN> == 128);

#define KVP_WGMMA_D16                                                     \
  "{"                                                                     \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15" \
  "}"
#define KVP_WGMMA_OUT16(d)                                                                         \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define KVP_WGMMA_D64                                                                            \
  "{"                                                                                            \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "   \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "   \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "   \
  "%56, %57, %58, %59, %60, %61, %62, %63"                                                       \
  "}"
#define KVP_WGMMA_OUT64(d)                                                                                  \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),          \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),          \
      "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),          \
      "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),          \
      "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),          \
      "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),          \
      "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]),          \
      "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// Compiled for sm_90a (the arch-specific feature set wgmma belongs to; elsewhere on the GPU the
// kernels are never launched, wgmma_kernels_available, and trap if they are) and for the CPU suite,
// where simt_host.h emulates the instructions.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || !defined(__CUDACC__)
#define KVP_HAS_WGMMA 1
#endif

#if defined(KVP_HAS_WGMMA)
// d (+)= A . B, 64 rows by N columns (N / 2 accumulators a thread), one k16 step; a and b
// describe K-major tiles in shared memory. scale-d is 1: every instruction adds to C.
template <int S, int N>
__device__ __forceinline__ void mma_async(float (&d)[N / 2], uint64_t a, uint64_t b) {
#if !defined(__CUDACC__)
  simt::wgmma_issue(S == kBF16, d, N, a, b);
#else
  if constexpr (N == 32 && S == kF16) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 " KVP_WGMMA_D16 ", %16, %17, p, 1, 1, 0, 0;\n}\n"
                 : KVP_WGMMA_OUT16(d)
                 : "l"(a), "l"(b), "n"(1));
  } else if constexpr (N == 32) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 " KVP_WGMMA_D16 ", %16, %17, p, 1, 1, 0, 0;\n}\n"
                 : KVP_WGMMA_OUT16(d)
                 : "l"(a), "l"(b), "n"(1));
  } else if constexpr (N == 128 && S == kF16) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " KVP_WGMMA_D64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : KVP_WGMMA_OUT64(d)
                 : "l"(a), "l"(b), "n"(1));
  } else {
    static_assert(N == 128, "instruction widths: 32 and 128 columns");
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " KVP_WGMMA_D64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : KVP_WGMMA_OUT64(d)
                 : "l"(a), "l"(b), "n"(1));
  }
#endif
}

// Orders this thread's earlier register accesses before the wgmma that follow (required before
// the first one touches accumulators the thread wrote, and harmless between stages).
// (On the host: the group's emulated instructions run at the wait that retires them, or at issue,
// by schedule; the fences have nothing to order.)
__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDACC__)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if defined(__CUDACC__)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
  simt::wgmma_commit();
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if defined(__CUDACC__)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#else
  simt::wgmma_wait(N);
#endif
}
// The accumulators stay in their registers across this point (no access moves over it).
template <int R>
__device__ __forceinline__ void pin(float (&d)[R]) {
#if defined(__CUDACC__)
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
#endif
}
// Shared memory written through the generic proxy (cp.async, stores) is seen by the async proxy
// the wgmma read through: each writer fences after its writes land, before the barrier.
__device__ __forceinline__ void fence_to_async_proxy() {
#if defined(__CUDACC__)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// A shared-memory matrix descriptor: K-major, 128-byte swizzle, 8-row groups 1024 bytes apart.
// The start may move by 32 bytes a k16 step within the swizzle row: the hardware swizzles by the
// address bits, and the tiles start 1024-byte aligned.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
  return uint64_t((addr & 0x3FFFF) >> 4) | uint64_t(1) << 16 | uint64_t(1024 >> 4) << 32 | uint64_t(1) << 62;
}

// One stage (64 k) of a warpgroup's outputs, issued as one group: its 64 rows of x at a, the BN =
// NI x IN rows of W at b, one k16 step after the other (each instruction of a step for IN of the
// columns). The accumulators are pinned so that no access of them moves into the group.
template <int S, int IN, int NI>
__device__ __forceinline__ void mma_stage(float (&d)[NI][IN / 2], uint32_t a, uint32_t b) {
#pragma unroll
  for (int i = 0; i < NI; ++i) pin(d[i]);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kStageK / 16; ++kk)
#pragma unroll
    for (int i = 0; i < NI; ++i)
      mma_async<S, IN>(d[i], smem_desc(a + kk * 32), smem_desc(b + i * IN * kRowBytes + kk * 32));
  wgmma_commit();
}

// Waits until all but the newest N groups of this warpgroup have completed; their accumulators
// are then read from their registers, not from before the wait.
template <int N, int IN, int NI>
__device__ __forceinline__ void retire_groups(float (&d)[NI][IN / 2]) {
  wgmma_wait<N>();
#pragma unroll
  for (int i = 0; i < NI; ++i) pin(d[i]);
}

// A warpgroup's accumulators (NI instructions of IN columns, its 64 rows from row0, columns from
// n0) into y[M, N]. The fp32 layout of m64nNk16: warp w of the warpgroup holds rows 16w + lane / 4
// and + 8; element 4j + 2h + e is column 8j + 2 (lane % 4) + e of row + 8h.
template <int IN, int NI>
__device__ __forceinline__ void store_accumulators(const float (&d)[NI][IN / 2], GemmOut y, int M, int N, int row0,
                                                   int n0, int lane_in_group) {
  const int lane = lane_in_group % 32, w = lane_in_group / 32;
  const int row = row0 + 16 * w + lane / 4;
  const bool pairs = y.pairs(N);  // aligned float2 stores
#pragma unroll
  for (int i = 0; i < NI; ++i)
#pragma unroll
    for (int j = 0; j < IN / 8; ++j) {
      const int n = n0 + i * IN + 8 * j + 2 * (lane % 4);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = row + 8 * h;
        if (m >= M || n >= N) continue;
        float* out = y.at(m, n, N);
        if (pairs) {
          *reinterpret_cast<float2*>(out) = make_float2(d[i][4 * j + 2 * h], d[i][4 * j + 2 * h + 1]);
        } else {
          out[0] = d[i][4 * j + 2 * h];
          if (n + 1 < N) *y.at(m, n + 1, N) = d[i][4 * j + 2 * h + 1];
        }
      }
    }
}
#endif  // KVP_HAS_WGMMA

}  // namespace
}  // namespace kvp::cuda::wgmma
