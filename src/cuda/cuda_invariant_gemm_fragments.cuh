#pragma once
// The pieces every kernel of the `invariant` policy's mma.sync GEMM shares
// (cuda_invariant_gemm_kernel.cuh has the kernels and the argument why their bits depend on K
// alone): the mma instruction, how a lane loads its fragments of a 32-k chunk and in which order of
// k (KMap), the one place the chunk's two mma are issued, and the accumulators' store. Every kernel
// issues its mma through mma_chunk, so that a row's sequence of instructions is the same whichever
// kernel computes it.
#include "cuda/cuda_device_api.cuh"
#include "cuda/cuda_gemm_out.cuh"

// Unnamed: the CPU suite's host build of this source must not meet the GPU build at link time.
namespace kvp::cuda::invariant {
namespace {
template <int S>
__device__ __forceinline__ void mma16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
#if defined(__CUDACC__)
  if constexpr (S == kF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
#else
  simt::mma16816(S == kBF16, c, a0, a1, a2, a3, b0, b1);
#endif
}

// Eight 16-bit values of row `row` (of `rows`) from column k, zero past the row count or K. Vec:
// K % 8 == 0 and the base 16-byte aligned, so one load serves.
template <bool Vec>
__device__ __forceinline__ uint4 load8(const uint16_t* base, int row, int rows, int k, int K) {
  if (row >= rows || k >= K) return make_uint4(0, 0, 0, 0);
  const uint16_t* p = base + size_t(row) * K + k;
  if constexpr (Vec) {
    return load_raw<uint4>(p);
  } else {
    uint16_t h[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) h[i] = k + i < K ? p[i] : uint16_t(0);
    return make_uint4(uint32_t(h[0]) | uint32_t(h[1]) << 16, uint32_t(h[2]) | uint32_t(h[3]) << 16,
                      uint32_t(h[4]) | uint32_t(h[5]) << 16, uint32_t(h[6]) | uint32_t(h[7]) << 16);
  }
}

// Which k of a 32-k chunk a lane feeds to which slot of the chunk's two mma (lane t holds slots
// 2t, 2t+1 of a row in its first register and 2t+8, 2t+9 in its second).
enum class KMap {
  // This family's: lane t loads k 8t .. 8t+7 (one 16-byte load) and feeds k + 0..3 to the first
  // mma, k + 4..7 to the second, so the first sums k in {0-3, 8-11, 16-19, 24-27}.
  Pairs,
  // The wgmma family's groups: the first mma sums k 0..15, the second 16..31. Lane t loads k
  // 4t .. 4t+3 of each (8-byte loads): slot 2t+e holds k 4t+e, slot 2t+8+e k 4t+2+e.
  Blocks16,
  // The wgmma family's groups and slots: slot s of the mma for group h holds k 16h + s, as in its
  // m64nNk16 (4-byte loads at k 2t, 8+2t, 16+2t, 24+2t).
  Slots16,
  // The wgmma family's groups from Pairs' 16-byte loads: lane t loads k 8t .. 8t+7, then lanes t and
  // t ^ 2 trade half of them (to_k16_groups), so that the first mma sums k 0..15 and the second
  // 16..31 in yet another slot order. One load where Blocks16 takes two and Slots16 four.
  Exchange16,
};

// Exchange16's trade: lane t < 2 keeps its k 8t..8t+3 (group 0) and takes lane t + 2's first four
// (group 1: k 16+8t..); lane t >= 2 keeps its last four (group 1) and takes lane t - 2's last four
// (group 0). Every lane of the warp must call it (a shuffle).
__device__ __forceinline__ uint4 to_k16_groups(const uint4 v, int t) {
  const bool low = t < 2;
  const uint32_t r0 = __shfl_xor_sync(0xffffffffu, low ? v.z : v.x, 2);
  const uint32_t r1 = __shfl_xor_sync(0xffffffffu, low ? v.w : v.y, 2);
  return low ? make_uint4(v.x, v.y, r0, r1) : make_uint4(r0, r1, v.z, v.w);
}

// N (2 or 4) 16-bit values of row `row` (of `rows`) from column k as N / 2 words, zero past the
// row count or K. Rows that load as 16-byte pieces (K % 8 == 0, 16-byte aligned), so a piece at a
// multiple of N is aligned and lies wholly before K or wholly past it.
template <int N>
__device__ __forceinline__ void load_piece(uint32_t* out, const uint16_t* base, int row, int rows, int k, int K) {
  static_assert(N == 2 || N == 4);
  if (row >= rows || k >= K) {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) out[i] = 0;
    return;
  }
  const uint16_t* p = base + size_t(row) * K + k;
  if constexpr (N == 4) {
    const uint2 v = load_raw<uint2>(p);
    out[0] = v.x;
    out[1] = v.y;
  } else {
    out[0] = load_raw<uint32_t>(p);
  }
}

// A lane's fragment of row `row` for the chunk at k0: registers .x, .y for the first mma, .z, .w
// for the second, in Map's order. Exchange16: every lane of the warp calls it together.
template <KMap Map, bool Vec>
__device__ __forceinline__ uint4 load_fragment(const uint16_t* base, int row, int rows, int k0, int K, int t) {
  if constexpr (Map == KMap::Pairs) {
    return load8<Vec>(base, row, rows, k0 + 8 * t, K);
  } else if constexpr (Map == KMap::Exchange16) {
    static_assert(Vec, "the wgmma family's order is for rows that load as 16-byte pieces");
    return to_k16_groups(load8<true>(base, row, rows, k0 + 8 * t, K), t);
  } else {
    static_assert(Vec, "the wgmma family's order is for rows that load as 16-byte pieces");
    uint32_t w[4];
    if constexpr (Map == KMap::Blocks16) {
      load_piece<4>(w, base, row, rows, k0 + 4 * t, K);
      load_piece<4>(w + 2, base, row, rows, k0 + 16 + 4 * t, K);
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) load_piece<2>(w + i, base, row, rows, k0 + 8 * i + 2 * t, K);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// The chunks a K takes: the wgmma family's orders pad K to its whole 64-k stages, so that both
// issue the same instructions (zero products past K) however K ends.
template <KMap Map>
__host__ __device__ constexpr int chunks_of(int K) {
  return Map == KMap::Pairs ? (K + 31) / 32 : (K + 63) / 64 * 2;
}

// The one place the mma sequence is issued (so every kernel below issues the same one): the two
// mma of a 32-k chunk for each of the warp's MT x NT tiles, k + 0..3 then k + 4..7.
template <int S, int MT, int NT>
__device__ __forceinline__ void mma_chunk(float (&c)[MT][NT][4], const uint4 (&xa)[MT], const uint4 (&xb)[MT],
                                          const uint4 (&b)[NT]) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      mma16816<S>(c[i][j], xa[i].x, xb[i].x, xa[i].y, xb[i].y, b[j].x, b[j].y);  // k + 0..3
      mma16816<S>(c[i][j], xa[i].z, xb[i].z, xa[i].w, xb[i].w, b[j].z, b[j].w);  // k + 4..7
    }
}

// The warp's accumulators, tiles at rows m0 + 16i and columns n0 + 8j, into y (rows < M, columns
// < N).
template <int MT, int NT>
__device__ __forceinline__ void store_tiles(const float (&c)[MT][NT][4], GemmOut y, int M, int N, int m0, int n0,
                                            int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int n = n0 + 8 * j + 2 * t;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = m0 + 16 * i + g + 8 * h;
        if (m >= M) continue;
        if (n < N) *y.at(m, n, N) = c[i][j][2 * h];
        if (n + 1 < N) *y.at(m, n + 1, N) = c[i][j][2 * h + 1];
      }
    }
}

}  // namespace
}  // namespace kvp::cuda::invariant
