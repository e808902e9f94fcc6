// Attention on the GPU for the `standard` policy, as GPU stacks do it:
//  prefill (a slice of several rows): FlashAttention-2 style. One warp per (row, query head)
//    folds the keys in 64-key tiles anchored at position 0 into an online softmax (running max,
//    rescaled sum and accumulator).
//  decode (a slice of one row): split-KV "flash decoding". The keys are cut into splits whose
//    length depends on the number of cached keys (enough splits to fill the GPU), each folded by
//    its own warp; the partial states are then merged in split order. A decode step therefore
//    sums in another order than the prefill row of the same position: the phenomenon measured.
// Scores are rounded where HF's eager code rounds them (attention_score in kernels.h); as in
// FlashAttention the softmax sum keeps the fp32 probabilities while P.V uses them rounded to the
// compute dtype (the CPU standard policy does the same, standard_simd.cpp).
#include <cmath>

#include "cuda/cuda_attention_score.cuh"
#include "cuda/cuda_common.cuh"

namespace kvp::cuda {
namespace {

constexpr int kTile = 64;        // keys per online-softmax tile
constexpr int kWarps = 4;        // warps per block
constexpr int kPerLane = 8;      // head_dim <= 256: dimensions held per lane
constexpr float kNegInf = -INFINITY;

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

// Eight consecutive elements from index i (a multiple of 8: 16- or 32-byte aligned in a cache).
template <int KV>
__device__ __forceinline__ void load8(const void* base, size_t i, float (&out)[8]) {
  if constexpr (KV == kF32) {
    const float4 a = *reinterpret_cast<const float4*>(static_cast<const float*>(base) + i);
    const float4 b = *reinterpret_cast<const float4*>(static_cast<const float*>(base) + i + 4);
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w, out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
  } else {
    const uint4 r = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(base) + i);
    const unsigned w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const unsigned short lo = static_cast<unsigned short>(w[u] & 0xffffu), hi = static_cast<unsigned short>(w[u] >> 16);
      if constexpr (KV == kF16) {
        out[2 * u] = __half2float(__ushort_as_half(lo));
        out[2 * u + 1] = __half2float(__ushort_as_half(hi));
      } else {
        out[2 * u] = __bfloat162float(__ushort_as_bfloat16(lo));
        out[2 * u + 1] = __bfloat162float(__ushort_as_bfloat16(hi));
      }
    }
  }
}

__device__ __forceinline__ int first_key(const AttnShape& s, int pos) {
  return s.sliding_window > 0 ? max(0, pos - s.sliding_window + 1) : 0;
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
__global__ void prefill_kernel(const AttnDesc* descs, AttnShape s) {
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
    if (dd < hd) out[dd] = st.acc[t] / st.l;
  }
}

// Partial state of (slice, head, split) at parts[(part0 + h*n_splits + c) * (hd + 2)]: m, l, acc.
// The split's keys go 32 at a time, one per lane: each lane sums its key's whole dot product (its
// loads independent of the other lanes', so a warp has 32 rows in flight instead of one), the
// chunk's max and sum go across the warp, then P.V runs key by key with each lane owning
// kPerLane consecutive dimensions.
template <int KV>
__global__ void decode_split_kernel(const AttnDesc* descs, AttnShape s, float* parts) {
  pdl_entry();
  __shared__ float q_s[kWarps][kPerLane * 32];
  const AttnDesc d = descs[blockIdx.y];
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int w = blockIdx.x * kWarps + warp;
  if (w >= s.n_heads * d.n_splits) return;
  const int h = w / d.n_splits, c = w % d.n_splits;
  const int hd = s.head_dim;
  const int kvh = h / (s.n_heads / s.n_kv_heads);
  const int pos = d.start_pos;
  const int js = first_key(s, pos) + c * d.split_len;
  const int je = min(pos + 1, js + d.split_len);
  for (int i = lane; i < hd; i += 32) q_s[warp][i] = d.q[size_t(h) * hd + i];
  __syncwarp();
  const float* q = q_s[warp];
  const size_t head_off = size_t(kvh) * d.capacity * hd;
  const void* kb = static_cast<const char*>(d.k) + head_off * (KV == kF32 ? 4 : 2);
  const void* vb = static_cast<const char*>(d.v) + head_off * (KV == kF32 ? 4 : 2);
  const int per = (hd + 31) / 32, d0 = lane * per;  // this lane's dimensions in P.V
  float m = kNegInf, l = 0.0f;
  float acc[kPerLane] = {};
  for (int j0 = js; j0 < je; j0 += 32) {
    const int j = j0 + lane;
    float x = kNegInf;
    if (j < je) {
      float dot = 0.0f;
      const size_t row = size_t(j) * hd;
      if (hd % 8 == 0) {
        for (int e = 0; e < hd; e += 8) {
          float k8[8];
          load8<KV>(kb, row + e, k8);
#pragma unroll
          for (int u = 0; u < 8; ++u) dot = fmaf(q[e + u], k8[u], dot);
        }
      } else {
        for (int e = 0; e < hd; ++e) dot = fmaf(q[e], load_as_f32<KV>(kb, row + e), dot);
      }
      x = attn_score(dot, s);
    }
    float cmax = x;
    for (int o = 16; o > 0; o >>= 1) cmax = fmaxf(cmax, __shfl_xor_sync(0xffffffffu, cmax, o));
    const float m_new = fmaxf(m, cmax);
    const float scale = m == kNegInf ? 0.0f : expf(m - m_new);
    const float p = j < je ? expf(x - m_new) : 0.0f;
    float psum = p;
    for (int o = 16; o > 0; o >>= 1) psum += __shfl_xor_sync(0xffffffffu, psum, o);
    const float pr = round_act(p, s.act);
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) acc[t] *= scale;
    const int n = min(32, je - j0);
    for (int k = 0; k < n; ++k) {
      const float pk = __shfl_sync(0xffffffffu, pr, k);
      const size_t row = size_t(j0 + k) * hd;
#pragma unroll
      for (int t = 0; t < kPerLane; ++t)
        if (t < per && d0 + t < hd) acc[t] = fmaf(pk, load_as_f32<KV>(vb, row + d0 + t), acc[t]);
    }
    l = l * scale + psum;
    m = m_new;
  }
  float* out = parts + size_t(d.part0 + h * d.n_splits + c) * (hd + 2);
  if (lane == 0) {
    out[0] = m;
    out[1] = l;
  }
#pragma unroll
  for (int t = 0; t < kPerLane; ++t)
    if (t < per && d0 + t < hd) out[2 + d0 + t] = acc[t];
}

// One warp per (slice, head): the splits rescaled to their common max and added in split order.
__global__ void decode_merge_kernel(const AttnDesc* descs, AttnShape s, const float* parts) {
  pdl_entry();
  const AttnDesc d = descs[blockIdx.y];
  const int h = blockIdx.x * kWarps + threadIdx.x / 32;
  if (h >= s.n_heads) return;
  const int hd = s.head_dim, lane = threadIdx.x & 31;
  const float* p0 = parts + size_t(d.part0 + h * d.n_splits) * (hd + 2);
  float mx = kNegInf;
  for (int c = 0; c < d.n_splits; ++c) mx = fmaxf(mx, p0[size_t(c) * (hd + 2)]);
  float acc[kPerLane] = {};
  float denom = 0.0f;
  for (int c = 0; c < d.n_splits; ++c) {
    const float* p = p0 + size_t(c) * (hd + 2);
    const float wgt = p[0] == kNegInf ? 0.0f : expf(p[0] - mx);
    denom += wgt * p[1];
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int dd = lane + 32 * t;
      if (dd < hd) acc[t] += wgt * p[2 + dd];
    }
  }
  float* out = d.out + size_t(h) * hd;
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int dd = lane + 32 * t;
    if (dd < hd) out[dd] = acc[t] / denom;
  }
}

}  // namespace

void launch_attention_prefill(const AttnDesc* descs, int n, int max_rows, const AttnShape& s) {
  if (launch_attention_prefill_mma(descs, n, max_rows, s)) return;
  const unsigned warps = unsigned(max_rows) * unsigned(s.n_heads);
  const dim3 grid((warps + kWarps - 1) / kWarps, unsigned(n));
  if (s.kv_store == kF32) launch_on_stream(prefill_kernel<kF32>, grid, dim3(kWarps * 32), 0, descs, s);
  if (s.kv_store == kF16) launch_on_stream(prefill_kernel<kF16>, grid, dim3(kWarps * 32), 0, descs, s);
  if (s.kv_store == kBF16) launch_on_stream(prefill_kernel<kBF16>, grid, dim3(kWarps * 32), 0, descs, s);
  check(cudaGetLastError(), "attention (prefill)");
}

void launch_attention_decode(const AttnDesc* descs, int n, int max_splits, const AttnShape& s, float* parts) {
  const unsigned warps = unsigned(max_splits) * unsigned(s.n_heads);
  const dim3 grid((warps + kWarps - 1) / kWarps, unsigned(n));
  if (s.kv_store == kF32) launch_on_stream(decode_split_kernel<kF32>, grid, dim3(kWarps * 32), 0, descs, s, parts);
  if (s.kv_store == kF16) launch_on_stream(decode_split_kernel<kF16>, grid, dim3(kWarps * 32), 0, descs, s, parts);
  if (s.kv_store == kBF16) launch_on_stream(decode_split_kernel<kBF16>, grid, dim3(kWarps * 32), 0, descs, s, parts);
  check(cudaGetLastError(), "attention (decode splits)");
  const dim3 mgrid((unsigned(s.n_heads) + kWarps - 1) / kWarps, unsigned(n));
  launch_on_stream(decode_merge_kernel, mgrid, dim3(kWarps * 32), 0, descs, s, parts);
  check(cudaGetLastError(), "attention (decode merge)");
}

}  // namespace kvp::cuda
