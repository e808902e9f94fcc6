// Attention on the GPU for the `standard` policy, as GPU stacks do it:
//  prefill (a slice of several rows): FlashAttention-2 style. One warp per (row, query head)
//    folds the keys in 64-key tiles anchored at position 0 into an online softmax (running max,
//    rescaled sum and accumulator).
//  decode (a slice of one row): split-KV "flash decoding" (cuda_attention_decode_kernel.cuh),
//    whose split depends on the number of cached keys: a decode step sums in another order than
//    the prefill row of the same position, the phenomenon measured.
// Scores are rounded where HF's eager code rounds them (attention_score in kernels.h); as in
// FlashAttention the softmax sum keeps the fp32 probabilities while P.V uses them rounded to the
// compute dtype (the CPU standard policy does the same, standard_simd.cpp).
#include <cmath>

#include "core/env.h"
#include "cuda/cuda_attention_decode_kernel.cuh"
#include "cuda/cuda_attention_score.cuh"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_runtime_api.h"

namespace kvp::cuda {
namespace {

using attn_decode::first_key;
using attn_decode::kNegInf;
using attn_decode::kPerLane;  // head_dim <= 256: dimensions held per lane
using attn_decode::kWarps;    // warps per block
constexpr int kTile = 64;     // keys per online-softmax tile

struct State {
  float m = kNegInf, l = 0.0f;
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
  fold<KV>(q, s, kb, vb, first_key(s, pos), pos + 1, 0, scores[warp], st);
  float* out = d.out + size_t(row) * q_stride + size_t(h) * hd;
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int dd = lane + 32 * t;
    if (dd < hd) store_attention(store, out + dd, st.acc[t] / st.l);
  }
}

}  // namespace

void launch_attention_prefill(const AttnDesc* descs, int n, int max_rows, const AttnShape& s, const AttnStore& store) {
  if (launch_attention_prefill_mma(descs, n, max_rows, s, false, store)) return;
  const unsigned warps = unsigned(max_rows) * unsigned(s.n_heads);
  const dim3 grid((warps + kWarps - 1) / kWarps, unsigned(n));
  if (s.kv_store == kF32) launch_on_stream(prefill_kernel<kF32>, grid, dim3(kWarps * 32), 0, descs, s, store);
  if (s.kv_store == kF16) launch_on_stream(prefill_kernel<kF16>, grid, dim3(kWarps * 32), 0, descs, s, store);
  if (s.kv_store == kBF16) launch_on_stream(prefill_kernel<kBF16>, grid, dim3(kWarps * 32), 0, descs, s, store);
  check(cudaGetLastError(), "attention (prefill)");
}

// $KVPARITY_CUDA_DECODE_WHOLE=0: 16-bit K/V through the 8-loads-a-round path as before
// 2026-11-27 (the same bits), for scripts/gpu_session.sh to time both; set_decode_whole_rows for
// the CUDA suite to compare them.
namespace {
EnvSwitch g_whole{"KVPARITY_CUDA_DECODE_WHOLE", true};
}  // namespace
void set_decode_whole_rows(bool on) { g_whole.set(on); }
bool decode_whole_rows() { return g_whole.on(); }

void launch_attention_decode(const AttnDesc* descs, int n, int max_splits, const AttnShape& s, float* parts,
                             unsigned* counts, const AttnStore& store) {
  attn_decode::decode(StreamLaunch{}, descs, n, max_splits, s, parts, counts, store, decode_whole_rows());
  check(cudaGetLastError(), "attention (decode)");
}

}  // namespace kvp::cuda
