#pragma once
// The `standard` policy's decode attention (one row per slice), as GPU stacks run it: split-KV
// "flash decoding". The keys are cut into splits whose length depends on the number of cached keys
// (cuda_attention_plan.h: enough splits to fill the GPU), each folded by a warp of its own into a
// partial state (m, l, acc); the partial states are then merged in split order. A decode step
// therefore sums in another order than the prefill row of the same position: the phenomenon
// measured.
// One launch: the warp of a (slice, head) that finishes last merges them. Each warp writes its
// state, makes it visible (__threadfence) and counts itself in; the one whose count completes the
// row merges, in split order whichever warp it is, so the bits are those of a separate merge
// kernel, one graph node fewer a layer. It also stores the row as the attention output's rounding
// point leaves it, when the caller hands that over (AttnStore): one more node fewer.
// In a header so that the CPU suite runs the same source on the host (simt_host.h,
// tests/test_cuda_kernels_on_cpu.cpp); cuda_attention.cu launches it.
#include <cmath>

#include "cuda/cuda_attention_score.cuh"
#include "cuda/cuda_nonfinite.cuh"

// Unnamed: the CPU suite's host build of this source must not meet the GPU build at link time.
namespace kvp::cuda::attn_decode {
namespace {

constexpr int kWarps = 4;    // warps per block
constexpr int kPerLane = 8;  // head_dim <= 256: dimensions held per lane
constexpr float kNegInf = -INFINITY;

__device__ __forceinline__ int first_key(const AttnShape& s, int pos) {
  return s.sliding_window > 0 ? max(0, pos - s.sliding_window + 1) : 0;
}

// Eight consecutive elements from index i (a multiple of 8: 16- or 32-byte aligned in a cache).
template <int KV>
__device__ __forceinline__ void load8(const void* base, size_t i, float (&out)[8]) {
  if constexpr (KV == kF32) {
    const float* p = static_cast<const float*>(base) + i;
    const float4 a = load_raw<float4>(p), b = load_raw<float4>(p + 4);
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w, out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
  } else {
    const uint4 r = load_raw<uint4>(static_cast<const uint16_t*>(base) + i);
    const unsigned w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const unsigned short lo = static_cast<unsigned short>(w[u] & 0xffffu),
                           hi = static_cast<unsigned short>(w[u] >> 16);
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

// The splits of (slice d, head h) rescaled to their common max and added in split order, by one
// warp. The states were written by other warps: read past the L1 cache, which is not coherent
// between multiprocessors.
__device__ void merge_splits(const AttnDesc& d, const AttnShape& s, const float* parts, int h, const AttnStore& st) {
  const int hd = s.head_dim, lane = threadIdx.x & 31;
  const float* p0 = parts + size_t(d.part0 + h * d.n_splits) * (hd + 2);
  float mx = kNegInf;
  for (int c = 0; c < d.n_splits; ++c) mx = fmaxf(mx, __ldcg(p0 + size_t(c) * (hd + 2)));
  float acc[kPerLane] = {};
  float denom = 0.0f;
  for (int c = 0; c < d.n_splits; ++c) {
    const float* p = p0 + size_t(c) * (hd + 2);
    const float m = __ldcg(p);
    const float wgt = m == kNegInf ? 0.0f : expf(m - mx);
    denom += wgt * __ldcg(p + 1);
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int dd = lane + 32 * t;
      if (dd < hd) acc[t] += wgt * __ldcg(p + 2 + dd);
    }
  }
  float* out = d.out + size_t(h) * hd;
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int dd = lane + 32 * t;
    if (dd < hd) store_attention(st, out + dd, acc[t] / denom);
  }
}

// Partial state of (slice, head, split) at parts[(part0 + h*n_splits + c) * (hd + 2)]: m, l, acc.
// The split's keys go 32 at a time, one per lane: each lane sums its key's whole dot product (its
// loads independent of the other lanes', so a warp has 32 rows in flight instead of one), the
// chunk's max and sum go across the warp, then P.V runs key by key with each lane owning
// kPerLane consecutive dimensions. counts[slice * n_heads + h]: the warps of (slice, h) done.
template <int KV>
__global__ void decode_kernel(const AttnDesc* descs, AttnShape s, float* parts, unsigned* counts, AttnStore st) {
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
  __threadfence();
  __syncwarp();
  unsigned last = 0;
  if (lane == 0) {
    unsigned* count = counts + size_t(blockIdx.y) * s.n_heads + h;
    last = atomicAdd(count, 1u) == unsigned(d.n_splits - 1);
    if (last) {
      *count = 0;       // every split of the row has counted: ready for the next launch
      __threadfence();  // the count seen before the states are read, for the whole warp (below)
    }
  }
  if (__shfl_sync(0xffffffffu, last, 0)) {
    __syncwarp();
    merge_splits(d, s, parts, h, st);
  }
}

// n one-row slices, each cut into its desc's splits, the grid shaped for max_splits (a slice's
// warps past its own splits return at once). parts: n x n_heads x max_splits x (head_dim + 2)
// floats (desc i's part0 = i x n_heads x max_splits); counts: n x n_heads zeros, zeros again after.
template <class Launch>
void decode(const Launch& launch, const AttnDesc* descs, int n, int max_splits, const AttnShape& s, float* parts,
            unsigned* counts, const AttnStore& st) {
  const unsigned warps = unsigned(max_splits) * unsigned(s.n_heads);
  const dim3 grid((warps + kWarps - 1) / kWarps, unsigned(n)), block(kWarps * 32);
  if (s.kv_store == kF32) launch(decode_kernel<kF32>, grid, block, descs, s, parts, counts, st);
  if (s.kv_store == kF16) launch(decode_kernel<kF16>, grid, block, descs, s, parts, counts, st);
  if (s.kv_store == kBF16) launch(decode_kernel<kBF16>, grid, block, descs, s, parts, counts, st);
}

}  // namespace
}  // namespace kvp::cuda::attn_decode
