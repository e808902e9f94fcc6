#pragma once
// The `portable` policy's GPU kernels (portable_simd.h has the specification;
// cuda_portable_attention_kernel.cuh the attention): the same bits as the CPU's portable kernels
// on AVX-512, AVX2 and the scalar fallback. No tensor cores and no cuBLAS: their internal sums are in no order a CPU can repeat.
//  matmul  every output is the specification's 16 chains, lane l holding fma(x[k], W[n, k], acc)
//          for k = l, l + 16, ... in increasing k (the last group of 16 zero-padded, no group
//          beyond it: a padded fma turns a -0 chain into +0), then the 16-lane tree. Two
//          decompositions, which differ only in which thread runs which chain:
//           direct (M < kTiledMinRows: decode and small batches, bound by reading W): 4 threads
//             per output with 4 lanes each, W read once for up to 4 rows of x, 16 groups of 16 k
//             loaded ahead of their fmas;
//           tiled (prefill, cache-OFF steps, large batches; bound by fp32 fma throughput): a 32 x
//             32 block of outputs, each thread one lane of an 8 x 8 register tile, so that lane
//             l's chain is an ordinary outer-product GEMM over the k = l (mod 16) slice of K;
//             shared-memory stages of 64 k.
//          Both end in tree_lanes, so an output's bits do not depend on M, on the batch or on the
//          launch: cache ON equals cache OFF and batch equals solo by construction.
//  rmsnorm one warp per row: 16 threads run the 16 chains of sum(x^2), then the tree and
//          pscalar::inv_rms.
//  SiLU, GELU-tanh, GPT-OSS's clamped SwiGLU, soft-capping: pscalar's functions (this policy's
//          exp and tanh, no libm).
// The kernels and their dispatch (which kernel, which launch shape) live in this header so that the
// CPU suite runs the same source on the host (simt_host.h); cuda_portable.cu launches them.
#include "cuda/cuda_nonfinite.cuh"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_portable.cuh"

// An unnamed namespace: the CPU suite compiles this source for the host in a program that also
// links the GPU build of it, and the two must not meet at link time.
namespace kvp::cuda::portable {
namespace {

using pscalar::fma;
using pscalar::mul;

constexpr int kDirectLanes = 4;                         // lanes per thread
constexpr int kDirectGroup = 16 / kDirectLanes;         // threads per output
constexpr int kDirectThreads = 128;
constexpr int kDirectOutputs = kDirectThreads / kDirectGroup;
constexpr int kDirectAhead = 16;                       // groups of 16 k whose W is loaded ahead
constexpr int kDirectRows = 4;                          // rows of x per pass over W
constexpr int kTiledMinRows = 16;

constexpr int kTile = 32;  // tiled: outputs per block side
constexpr int kStage = 64; // tiled: k per shared-memory stage (4 groups of 16)
constexpr int kPad = 4;    // keeps the 16 lanes' float4 reads of one stage row apart in the banks

// Elements k .. k+3 of a row at `at` (k a multiple of 4), widened; zero past K. Vec: the row and
// K allow aligned 4-element loads.
template <int S, bool Vec>
__device__ __forceinline__ void load4(const void* base, size_t at, int k, int K, float (&out)[4]) {
  if constexpr (Vec) {
    load_vec<S, 4>(base, at + size_t(k), out);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = k + i < K ? load_as_f32<S>(base, at + size_t(k + i)) : 0.0f;
  }
}

// Rows [m0, m0 + MR) of y (those below M), outputs of W rows blockIdx.x * kDirectOutputs + ...
template <int S, int MR, bool Vec>
__global__ void __launch_bounds__(kDirectThreads)
    matmul_direct_kernel(const float* x, int M, const void* W, int K, int N, float* y) {
  pdl_entry();
  const int t = threadIdx.x % kDirectGroup;
  const int n = blockIdx.x * kDirectOutputs + threadIdx.x / kDirectGroup;
  const int m0 = blockIdx.y * MR;
  const bool live = n < N;
  const size_t wrow = size_t(live ? n : 0) * K;
  const int groups = (K + 15) / 16;
  float acc[MR][kDirectLanes] = {};  // the chains start at +0, as the specification's
  for (int g0 = 0; g0 < groups; g0 += kDirectAhead) {
    float w[kDirectAhead][kDirectLanes];
#pragma unroll
    for (int u = 0; u < kDirectAhead; ++u) {
      if (live && g0 + u < groups) {
        load4<S, Vec>(W, wrow, 16 * (g0 + u) + kDirectLanes * t, K, w[u]);
      } else {
#pragma unroll
        for (int i = 0; i < kDirectLanes; ++i) w[u][i] = 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < kDirectAhead; ++u) {
      if (g0 + u >= groups) break;
      const int k = 16 * (g0 + u) + kDirectLanes * t;
#pragma unroll
      for (int r = 0; r < MR; ++r) {
        if (m0 + r >= M) break;
        float xv[kDirectLanes];
        load4<kF32, Vec>(x, size_t(m0 + r) * K, k, K, xv);
#pragma unroll
        for (int i = 0; i < kDirectLanes; ++i) acc[r][i] = fma(xv[i], w[u][i], acc[r][i]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < MR; ++r) {
    tree_lanes<kDirectLanes>(acc[r]);
    if (t == 0 && live && m0 + r < M) y[size_t(m0 + r) * N + n] = acc[r][0];
  }
}

template <int S>
__global__ void __launch_bounds__(256)
    matmul_tiled_kernel(const float* x, int M, const void* W, int K, int N, float* y) {
  pdl_entry();
  __shared__ __align__(16) float xs[kStage][kTile + kPad];
  __shared__ __align__(16) float ws[kStage][kTile + kPad];
  const int tid = threadIdx.x, lane = tid % 16;
  // Sub-tile (sm, sn) of 8 x 8 outputs; the two half-warps share sm, so their x reads coincide.
  const int warp = tid / 32, half = (tid / 16) % 2;
  const int sm = warp / 2, sn = (warp % 2) * 2 + half;
  const int m_base = blockIdx.y * kTile, n_base = blockIdx.x * kTile;
  const int groups = (K + 15) / 16;
  float acc[8][8] = {};
  for (int k0 = 0; k0 < 16 * groups; k0 += kStage) {
    for (int e = tid; e < kTile * kStage; e += 256) {
      const int r = e / kStage, c = e % kStage, k = k0 + c;
      const int m = m_base + r, n = n_base + r;
      xs[c][r] = m < M && k < K ? x[size_t(m) * K + k] : 0.0f;
      ws[c][r] = n < N && k < K ? load_as_f32<S>(W, size_t(n) * K + k) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int g = 0; g < kStage / 16; ++g) {
      if (k0 / 16 + g >= groups) break;  // never past the specification's last (padded) group
      const float* xr = &xs[16 * g + lane][8 * sm];
      const float* wr = &ws[16 * g + lane][8 * sn];
      const float4 a0 = *reinterpret_cast<const float4*>(xr), a1 = *reinterpret_cast<const float4*>(xr + 4);
      const float4 b0 = *reinterpret_cast<const float4*>(wr), b1 = *reinterpret_cast<const float4*>(wr + 4);
      const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float v[1] = {acc[i][j]};
      tree_lanes<1>(v);
      const int m = m_base + 8 * sm + i, n = n_base + 8 * sn + j;
      if (lane == 0 && m < M && n < N) y[size_t(m) * N + n] = v[0];
    }
}

__global__ void rmsnorm_kernel(const float* x, int M, int dim, const float* w, float eps, int act, int fp32_gain,
                               float* y, NonFiniteSlot chk) {
  pdl_entry();
  const int lane = threadIdx.x % 32;
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= M) return;  // the whole warp: no shuffle is left waiting
  const float* xr = x + size_t(row) * dim;
  float v[1] = {0.0f};
  if (lane < 16) {
    const int groups = (dim + 15) / 16;
    for (int g = 0; g < groups; ++g) {
      const int k = 16 * g + lane;
      const float e = k < dim ? xr[k] : 0.0f;
      v[0] = fma(e, e, v[0]);
    }
  }
  tree_lanes<1>(v);  // lanes 16..31 form a group of their own, whose sum is not used
  const float inv = pscalar::inv_rms(__shfl_sync(kFullWarp, v[0], 0), dim, eps);
  float* yr = y + size_t(row) * dim;
  for (int i = lane; i < dim; i += 32) {
    const float r = fp32_gain ? round_act(mul(mul(xr[i], inv), w[i]), act)
                              : round_act(mul(w[i], round_act(mul(xr[i], inv), act)), act);
    yr[i] = r;
    note_nonfinite(chk, size_t(row) * dim + i, r);
  }
}

__global__ void gated_kernel(float* gate, const float* up, size_t n, int act, int gelu, NonFiniteSlot chk) {
  pdl_entry();
  const RoundTo round{act};
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float r = gelu ? pscalar::gelu_tanh_mul(gate[i], up[i], round) : pscalar::silu_mul(gate[i], up[i], round);
    gate[i] = r;
    note_nonfinite(chk, i, r);
  }
}

__global__ void clamped_swiglu_kernel(float* gate, const float* up, size_t n, int act, float alpha, float limit,
                                      NonFiniteSlot chk) {
  pdl_entry();
  const RoundTo round{act};
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float r = pscalar::clamped_swiglu(gate[i], up[i], alpha, limit, round);
    gate[i] = r;
    note_nonfinite(chk, i, r);
  }
}

__global__ void softcap_kernel(float* x, size_t n, float cap, int act) {
  pdl_entry();
  const RoundTo round{act};
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] = pscalar::softcap(x[i], cap, round);
}

constexpr unsigned kThreads = 256;

// The dispatch: launch(kernel, grid, block, args...) runs a kernel (StreamLaunch on the GPU).
template <int S, bool Vec, class Launch>
void direct(const Launch& launch, const float* x, int M, const void* W, int K, int N, float* y) {
  const unsigned gx = unsigned((N + kDirectOutputs - 1) / kDirectOutputs);
  if (M == 1)
    launch(matmul_direct_kernel<S, 1, Vec>, dim3(gx, 1), dim3(kDirectThreads), x, M, W, K, N, y);
  else
    launch(matmul_direct_kernel<S, kDirectRows, Vec>, dim3(gx, unsigned((M + kDirectRows - 1) / kDirectRows)),
           dim3(kDirectThreads), x, M, W, K, N, y);
}

template <int S, class Launch>
void matmul_as(const Launch& launch, const float* x, int M, const void* W, int K, int N, float* y) {
  if (M >= kTiledMinRows) {
    const dim3 grid(unsigned((N + kTile - 1) / kTile), unsigned((M + kTile - 1) / kTile));
    launch(matmul_tiled_kernel<S>, grid, dim3(256), x, M, W, K, N, y);
    return;
  }
  // Aligned 4-element loads where every row start allows them (W's storage is 256-byte aligned).
  const bool vec = K % 16 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(W) % 16 == 0;
  if (vec)
    direct<S, true>(launch, x, M, W, K, N, y);
  else
    direct<S, false>(launch, x, M, W, K, N, y);
}

template <class Launch>
void matmul(const Launch& launch, const float* x, int M, const void* W, int store, int K, int N, float* y) {
  if (store == kF32) matmul_as<kF32>(launch, x, M, W, K, N, y);
  if (store == kF16) matmul_as<kF16>(launch, x, M, W, K, N, y);
  if (store == kBF16) matmul_as<kBF16>(launch, x, M, W, K, N, y);
}

template <class Launch>
void rmsnorm(const Launch& launch, const float* x, int M, int dim, const float* w, float eps, int act, bool fp32_gain,
             float* y, NonFiniteSlot chk) {
  constexpr int kRowsPerBlock = 4;
  launch(rmsnorm_kernel, dim3(unsigned((M + kRowsPerBlock - 1) / kRowsPerBlock)), dim3(32 * kRowsPerBlock), x, M, dim,
         w, eps, act, fp32_gain ? 1 : 0, y, chk);
}

template <class Launch>
void gated(const Launch& launch, unsigned blocks, float* gate, const float* up, size_t n, int act, bool gelu,
           NonFiniteSlot chk) {
  launch(gated_kernel, dim3(blocks), dim3(kThreads), gate, up, n, act, gelu ? 1 : 0, chk);
}

template <class Launch>
void clamped_swiglu(const Launch& launch, unsigned blocks, float* gate, const float* up, size_t n, int act, float alpha,
                    float limit, NonFiniteSlot chk) {
  launch(clamped_swiglu_kernel, dim3(blocks), dim3(kThreads), gate, up, n, act, alpha, limit, chk);
}

template <class Launch>
void softcap(const Launch& launch, unsigned blocks, float* x, size_t n, float cap, int act) {
  launch(softcap_kernel, dim3(blocks), dim3(kThreads), x, n, cap, act);
}

}  // namespace
}  // namespace kvp::cuda::portable
