#pragma once
// The `portable` policy's attention kernel on the GPU: the CPU's attention row (portable_attention.cpp;
// order in portable_simd.h) for every row, prefill and decode alike, so that a decode step and the
// cache-OFF row of the same position run the same code over the same tiles.
// One warp per (slice, row, query head) folds the row's keys in 64-key tiles anchored at position 0:
//  scores   lane j scores keys j and j + 32 of the tile, each as the specification's matmul chain
//           over head_dim (16 lane accumulators in the thread, zero-padded last group, the tree),
//           then pscalar::attention_score;
//  max      across the warp (exact: max has no order);
//  exp-sum  lane l < 16 adds the probabilities of keys l, l + 16, l + 32, l + 48 in that order,
//           then the lanes' tree (tree_lanes) — the CPU's 16-lane order over the tile's keys;
//  P.V      lane j owns dimensions j, j + 32, ...: acc = acc * scale, then one fma per key in key
//           order with the probability rounded to the compute dtype;
//  end      out = acc / l.
// The running sum is l = l * scale + tile_sum, scale = exp(m_old - m_new) (0 on the first tile
// without a sink). With GPT-OSS's sinks the state starts at m = sink, l = 1, as the CPU's does.
// The kernel and its dispatch live in this header so that the CPU suite runs the same source on
// the host (simt_host.h); cuda_portable_attention.cu launches it.
#include "cuda/cuda_attention_sinks.cuh"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_portable.cuh"

// Unnamed: the CPU suite's host build of this source must not meet the GPU build at link time.
namespace kvp::cuda::portable {
namespace {

using pscalar::add;
using pscalar::fma;
using pscalar::mul;
using pscalar::sub;

constexpr int kWarps = 4;
constexpr int kTileKeys = 64;   // kAttnTile of the CPU (fixed_order_simd.h)
constexpr int kMaxHeadDim = 256;
constexpr int kDims = kMaxHeadDim / 32;  // P.V dimensions per lane
constexpr float kNegInf = -INFINITY;

// The specification's chain of q . k over head_dim: lane l of the 16 holds k = l, l + 16, ...
template <int KV>
__device__ __forceinline__ float score_dot(const float* q, const void* kb, size_t row, int hd) {
  float t[16] = {};
  const int groups = (hd + 15) / 16;
  for (int g = 0; g < groups; ++g) {
#pragma unroll
    for (int l = 0; l < 16; ++l) {
      const int d = 16 * g + l;
      const float kv = d < hd ? load_as_f32<KV>(kb, row + size_t(d)) : 0.0f;
      t[l] = fma(d < hd ? q[d] : 0.0f, kv, t[l]);
    }
  }
  return pscalar::tree16(t);
}

template <int KV>
__global__ void __launch_bounds__(kWarps * 32) attention_kernel(const AttnDesc* descs, AttnShape s) {
  pdl_entry();
  __shared__ float q_s[kWarps][kMaxHeadDim];
  __shared__ float e_s[kWarps][kTileKeys];  // fp32 probabilities (the sum)
  __shared__ float p_s[kWarps][kTileKeys];  // rounded to act (P.V)
  const AttnDesc d = descs[blockIdx.y];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int w = blockIdx.x * kWarps + warp;
  const int row = w / s.n_heads, h = w % s.n_heads;
  if (row >= d.n_rows) return;  // the whole warp
  const int hd = s.head_dim, q_stride = s.n_heads * hd;
  const int kvh = h / (s.n_heads / s.n_kv_heads);
  const int pos = d.start_pos + row;
  const int first = s.sliding_window > 0 ? max(0, pos - s.sliding_window + 1) : 0;
  const float* qrow = d.q + size_t(row) * q_stride + size_t(h) * hd;
  for (int i = lane; i < hd; i += 32) q_s[warp][i] = qrow[i];
  __syncwarp();
  const size_t head_off = size_t(kvh) * d.capacity * hd;
  const void* kb = static_cast<const char*>(d.k) + head_off * (KV == kF32 ? 4 : 2);
  const void* vb = static_cast<const char*>(d.v) + head_off * (KV == kF32 ? 4 : 2);
  const RoundTo round{s.act};
  float m, l;
  start_state(s, h, m, l);  // the head's sink, as the CPU's start_softmax_state
  float acc[kDims] = {};
  for (int c = first / kTileKeys; c <= pos / kTileKeys; ++c) {
    const int js = max(first, c * kTileKeys), je = min(pos + 1, (c + 1) * kTileKeys), n = je - js;
    float sc[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int j = lane + 32 * u;
      sc[u] = kNegInf;
      if (j < n) {
        const float dot = score_dot<KV>(q_s[warp], kb, size_t(js + j) * hd, hd);
        sc[u] = pscalar::attention_score(dot, s.score_divisor, s.score_scale, s.softcap, round);
      }
    }
    float tmax = fmaxf(sc[0], sc[1]);
    for (int o = 16; o > 0; o >>= 1) tmax = fmaxf(tmax, __shfl_xor_sync(kFullWarp, tmax, o));
    const float m_new = m < tmax ? tmax : m;  // std::max(m_old, tile_max), as the CPU
    const float scale = m == kNegInf ? 0.0f : pscalar::exp(sub(m, m_new));
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int j = lane + 32 * u;
      if (j < n) {
        const float e = pscalar::exp(sub(sc[u], m_new));
        e_s[warp][j] = e;
        p_s[warp][j] = round(e);
      }
    }
    __syncwarp();
    // Keys past n (the CPU's -inf padding) would add exp(-inf) = +0 to a sum that is never -0.
    float part[1] = {0.0f};
    if (lane < 16)
      for (int j = lane; j < n; j += 16) part[0] = add(part[0], e_s[warp][j]);
    tree_lanes<1>(part);
    l = add(mul(l, scale), __shfl_sync(kFullWarp, part[0], 0));
    m = m_new;
#pragma unroll
    for (int t = 0; t < kDims; ++t) acc[t] = mul(acc[t], scale);
    for (int j = 0; j < n; ++j) {
      const float pj = p_s[warp][j];
      const size_t vrow = size_t(js + j) * hd;
#pragma unroll
      for (int t = 0; t < kDims; ++t) {
        const int dd = lane + 32 * t;
        if (dd < hd) acc[t] = fma(pj, load_as_f32<KV>(vb, vrow + dd), acc[t]);
      }
    }
    __syncwarp();  // e_s and p_s are rewritten by the next tile
  }
  float* out = d.out + size_t(row) * q_stride + size_t(h) * hd;
#pragma unroll
  for (int t = 0; t < kDims; ++t) {
    const int dd = lane + 32 * t;
    if (dd < hd) out[dd] = pscalar::div(acc[t], l);
  }
}

// launch(kernel, grid, block, args...) runs a kernel (StreamLaunch on the GPU).
template <class Launch>
void attention(const Launch& launch, const AttnDesc* descs, int n, int max_rows, const AttnShape& s) {
  const unsigned warps = unsigned(max_rows) * unsigned(s.n_heads);
  const dim3 grid((warps + kWarps - 1) / kWarps, unsigned(n));
  if (s.kv_store == kF32) launch(attention_kernel<kF32>, grid, dim3(kWarps * 32), descs, s);
  if (s.kv_store == kF16) launch(attention_kernel<kF16>, grid, dim3(kWarps * 32), descs, s);
  if (s.kv_store == kBF16) launch(attention_kernel<kBF16>, grid, dim3(kWarps * 32), descs, s);
}

}  // namespace
}  // namespace kvp::cuda::portable
