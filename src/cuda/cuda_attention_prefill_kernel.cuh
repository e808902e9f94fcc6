#pragma once
// The `standard` policy's prefill attention on CUDA cores (a slice of several rows, where the
// tensor-core kernel does not apply: fp32 passes, KV of another dtype, other head sizes),
// FlashAttention-2 style: one warp per (row, query head) folds the keys in 64-key tiles anchored
// at position 0 into an online softmax (running max, rescaled sum and accumulator), started at
// the head's attention sink (cuda_attention_sinks.cuh).
// In a header so that the CPU suite runs the same source on the host (simt_host.h,
// tests/test_cuda_sinks_on_cpu.cpp); cuda_attention.cu launches it.
#include "cuda/cuda_attention_decode_kernel.cuh"
#include "cuda/cuda_attention_score.cuh"
#include "cuda/cuda_attention_sinks.cuh"
#include "cuda/cuda_nonfinite.cuh"

// Unnamed: the CPU suite's host build of this source must not meet the GPU build at link time.
namespace kvp::cuda::attn_prefill {
namespace {

using attn_decode::first_key;
using attn_decode::kNegInf;
using attn_decode::kPerLane;  // head_dim <= 256: dimensions held per lane
using attn_decode::kWarps;    // warps per block
constexpr int kTile = 64;     // keys per online-softmax tile

// (m, l) start at the head's sink (start_state) before the row's first key.
struct State {
  float m, l;
  float acc[kPerLane] = {};
};

// Folds keys [js, je) of one KV head into the state, in tiles whose boundaries are anchor + k*kTile.
template <int KV>
__device__ void fold(const float (&q)[kPerLane], const AttnShape& s, const void* kb, const void* vb, int js, int je,
                     int anchor, float* sc, State& st) {
  const int lane = threadIdx.x & 31, hd = s.head_dim;
  for (int j = js; j < je;) {
    const int end = min(je, anchor + ((j - anchor) / kTile + 1) * kTile);
    float tmax = kNegInf;
    for (int jj = j; jj < end; ++jj) {
      float part = 0.0f;
#pragma unroll
      for (int t = 0; t < kPerLane; ++t) {
        const int d = lane + 32 * t;
        if (d < hd) part = fmaf(q[t], load_as_f32<KV>(kb, size_t(jj) * hd + d), part);
      }
      // A butterfly: every lane ends with the same sum (each step adds the same two operands).
      for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
      const float x = attn_score(part, s);
      if (lane == 0) sc[jj - j] = x;
      tmax = fmaxf(tmax, x);
    }
    __syncwarp();
    const float m_new = fmaxf(st.m, tmax);
    const float scale = st.m == kNegInf ? 0.0f : expf(st.m - m_new);
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) st.acc[t] *= scale;
    float psum = 0.0f;
    for (int jj = j; jj < end; ++jj) {
      const float p = expf(sc[jj - j] - m_new);
      psum += p;
      const float pr = round_act(p, s.act);
#pragma unroll
      for (int t = 0; t < kPerLane; ++t) {
        const int d = lane + 32 * t;
        if (d < hd) st.acc[t] = fmaf(pr, load_as_f32<KV>(vb, size_t(jj) * hd + d), st.acc[t]);
      }
    }
    st.l = st.l * scale + psum;
    st.m = m_new;
    __syncwarp();
    j = end;
  }
}

__device__ __forceinline__ void load_q(const float* qrow, int hd, float (&q)[kPerLane]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int d = lane + 32 * t;
    q[t] = d < hd ? qrow[d] : 0.0f;
  }
}

template <int KV>
__global__ void prefill_kernel(const AttnDesc* descs, AttnShape s, AttnStore store) {
  pdl_entry();
  __shared__ float scores[kWarps][kTile];
  const AttnDesc d = descs[blockIdx.y];
  const int warp = threadIdx.x / 32;
  const int w = blockIdx.x * kWarps + warp;
  const int row = w / s.n_heads, h = w % s.n_heads;
  if (row >= d.n_rows) return;
  const int hd = s.head_dim, q_stride = s.n_heads * hd;
  const int kvh = h / (s.n_heads / s.n_kv_heads);
  const int pos = d.start_pos + row;
  float q[kPerLane];
  load_q(d.q + size_t(row) * q_stride + size_t(h) * hd, hd, q);
  const size_t head_off = size_t(kvh) * d.capacity * hd;
  const void* kb = static_cast<const char*>(d.k) + head_off * (KV == kF32 ? 4 : 2);
  const void* vb = static_cast<const char*>(d.v) + head_off * (KV == kF32 ? 4 : 2);
  State st;
  start_state(s, h, st.m, st.l);
  fold<KV>(q, s, kb, vb, first_key(s, pos), pos + 1, 0, scores[warp], st);
  float* out = d.out + size_t(row) * q_stride + size_t(h) * hd;
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int dd = lane + 32 * t;
    if (dd < hd) store_attention(store, out + dd, st.acc[t] / st.l);
  }
}

// launch(kernel, grid, block, args...) runs a kernel (StreamLaunch on the GPU): every row of the
// n slices, the grid shaped for max_rows.
template <class Launch>
void prefill(const Launch& launch, const AttnDesc* descs, int n, int max_rows, const AttnShape& s,
             const AttnStore& store) {
  const unsigned warps = unsigned(max_rows) * unsigned(s.n_heads);
  const dim3 grid((warps + kWarps - 1) / kWarps, unsigned(n)), block(kWarps * 32);
  if (s.kv_store == kF32) launch(prefill_kernel<kF32>, grid, block, descs, s, store);
  if (s.kv_store == kF16) launch(prefill_kernel<kF16>, grid, block, descs, s, store);
  if (s.kv_store == kBF16) launch(prefill_kernel<kBF16>, grid, block, descs, s, store);
}

}  // namespace
}  // namespace kvp::cuda::attn_prefill
