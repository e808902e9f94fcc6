#pragma once
// The `standard` policy's decode GEMM (y[M, N] = x[M, K] . W[N, K]^T for a few rows of x, fp16 or
// bf16 operands, fp32 products and sums): a decode step reads every weight once, so its GEMMs are
// bound by HBM, and cuBLAS's GEMV-shaped kernels read a 7B step's 13.2 GB at ~2.5 TB/s where the
// H100 streams 3.1 (kvparity bench's probe). Here a warp owns one row n of W and walks it in
// 16-byte pieces, its lanes side by side, with kInFlight pieces a lane loaded before the first is
// used, so that a multiprocessor keeps ~250 KB of W in flight; each lane keeps M partial sums (fp32
// fma, its pieces in order), and the warp adds its lanes' sums by a butterfly of shuffles.
// `standard` promises no summation order (cuBLAS's changes with M and the GPU), so this order is
// as good as cuBLAS's, and it too is fixed for a given shape: the same call gives the same bits.
// Forced only (KVPARITY_CUDA_GEMV=1) until an H100 has timed it against cuBLAS.
// The kernel lives in this header so that the CPU suite runs the same source on the host
// (simt_host.h); cuda_gemv.cu launches it.
#include "cuda/cuda_device_api.cuh"

// Unnamed: the CPU suite's host build of this source must not meet the GPU build at link time.
namespace kvp::cuda::gemv {
namespace {

constexpr int kWarps = 8;     // rows of W a block
constexpr int kMaxRows = 4;   // rows of x a call (decode of one sequence or a few)
constexpr int kInFlight = 8;  // 16-byte pieces of W a lane loads before it uses the first

// Rows K % 8 == 0 with x and W 16-byte aligned (one load a piece); MR >= M rows of x.
template <int S, int MR>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_kernel(const uint16_t* x, int M, const uint16_t* W, int K, int N, float* y) {
  pdl_entry();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n = blockIdx.x * kWarps + warp;
  if (n >= N) return;  // the whole warp: the shuffles below need all 32 lanes
  const uint16_t* w = W + size_t(n) * K;
  const int pieces = K / 8;
  float acc[MR] = {};
  for (int p0 = 0; p0 < pieces; p0 += 32 * kInFlight) {
    uint4 wv[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int p = p0 + 32 * u + lane;
      wv[u] = p < pieces ? load_raw<uint4>(w + size_t(p) * 8) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int p = p0 + 32 * u + lane;
      if (p >= pieces) break;
      float wf[8];
      unpack8<S>(wv[u], wf);
#pragma unroll
      for (int m = 0; m < MR; ++m) {
        if (m >= M) break;
        float xf[8];
        load_vec<S, 8>(x, size_t(m) * K + size_t(p) * 8, xf);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[m] = fmaf(xf[j], wf[j], acc[m]);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < MR; ++m)
#pragma unroll
    for (int off = 16; off > 0; off /= 2) acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], off);
  if (lane == 0)
    for (int m = 0; m < M; ++m) y[size_t(m) * N + n] = acc[m];
}

// Whether gemv serves a call: a few rows, 16-bit operands whose rows load as 16-byte pieces.
inline bool applies(int M, int store, const void* x, const void* W, int K) {
  return M >= 1 && M <= kMaxRows && (store == kF16 || store == kBF16) && rows_load_16_bytes(x, W, K);
}

// launch(kernel, grid, block, args...) runs a kernel (StreamLaunch on the GPU). x: M rows in W's
// type `store`; y: a plain [M, N] matrix.
template <class Launch>
void gemv(const Launch& launch, const void* x, int M, const void* W, int store, int K, int N, float* y) {
  const auto* x16 = static_cast<const uint16_t*>(x);
  const auto* w16 = static_cast<const uint16_t*>(W);
  const dim3 grid(unsigned((N + kWarps - 1) / kWarps)), block(kWarps * 32);
  auto as = [&]<int S>() {
    if (M == 1) return launch(gemv_kernel<S, 1>, grid, block, x16, M, w16, K, N, y);
    if (M == 2) return launch(gemv_kernel<S, 2>, grid, block, x16, M, w16, K, N, y);
    launch(gemv_kernel<S, kMaxRows>, grid, block, x16, M, w16, K, N, y);
  };
  if (store == kF16) as.template operator()<kF16>();
  if (store == kBF16) as.template operator()<kBF16>();
}

}  // namespace
}  // namespace kvp::cuda::gemv
