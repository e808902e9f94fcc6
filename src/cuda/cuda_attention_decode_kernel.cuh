#pragma once
// The `standard` policy's decode attention (one row per slice), as GPU stacks run it: split-KV
// "flash decoding". The keys are cut into splits whose length depends on the number of cached keys
// (cuda_attention_plan.h: enough splits to fill the GPU), each folded by a warp of its own into a
// partial state (m, l, acc), started empty; the partial states are then merged in split order,
// after the head's attention sink (cuda_attention_sinks.cuh), one more state. A decode step
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
#include "cuda/cuda_attention_sinks.cuh"
#include "cuda/cuda_nonfinite.cuh"

// Unnamed: the CPU suite's host build of this source must not meet the GPU build at link time.
namespace kvp::cuda::attn_decode {
namespace {

constexpr int kWarps = 4;    // warps per block
constexpr int kPerLane = 8;  // head_dim <= 256: dimensions held per lane
constexpr int kInFlight = 8;  // the general path: loads a lane issues before it uses the first (K chunks, V rows)
constexpr float kNegInf = -INFINITY;

__device__ __forceinline__ int first_key(const AttnShape& s, int pos) {
  return s.sliding_window > 0 ? max(0, pos - s.sliding_window + 1) : 0;
}

// The splits of (slice d, head h) rescaled to their common max and added in split order, by one
// warp. The states were written by other warps: read past the L1 cache, which is not coherent
// between multiprocessors. A warp is a chain of dependent memory round trips, and a split's merge
// is one: so each lane reads the (m, l) of a split of its own (those of the first 32 splits with
// the max pass, the usual whole), and the accumulators of kMergeInFlight splits are read before
// the first is added, the first group's together with the (m, l) loads (at most 16 splits, a 7B
// step's over 512 keys: one round trip in all). The additions stay one by one, in split order.
template <int PER>
__device__ void merge_splits(const AttnDesc& d, const AttnShape& s, const float* parts, int h, const AttnStore& st) {
  constexpr int kMergeInFlight = PER <= 4 ? 16 : 8;  // divides 32: a group never straddles two lanes' rounds
  const int hd = s.head_dim, lane = threadIdx.x & 31, n = d.n_splits;
  const int stride = hd + 2, per = (hd + 31) / 32, d0 = lane * per;
  const float* p0 = parts + size_t(d.part0 + h * n) * stride;
  float pv[kMergeInFlight][PER];
  auto load_group = [&](int u0) {  // a split past the last reads the last again, unused
#pragma unroll
    for (int u = 0; u < kMergeInFlight; ++u) {
      const float* p = p0 + size_t(min(u0 + u, n - 1)) * stride + 2;
#pragma unroll
      for (int t = 0; t < PER; ++t) pv[u][t] = __ldcg(p + min(d0 + t, hd - 1));  // past hd: unused
    }
  };
  load_group(0);
  const float* first = p0 + size_t(min(lane, n - 1)) * stride;
  float m = __ldcg(first), l = __ldcg(first + 1);  // split `lane`'s (a lane past n: the last's, unused)
  float mx = m;
  for (int c = lane + 32; c < n; c += 32) mx = fmaxf(mx, __ldcg(p0 + size_t(c) * stride));
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  // The head's sink joins as one more split with no keys, ahead of the others (the splits' own
  // states start empty, so it is counted here alone), as the CPU's split-KV merge takes it.
  float m0, l0;
  start_state(s, h, m0, l0);
  mx = fmaxf(mx, m0);
  float acc[PER] = {};
  float denom = m0 == kNegInf ? 0.0f : expf(m0 - mx) * l0;
  // Lane i: split 32r + i's weight and sum, for the round r of 32 splits being added (expf of the
  // same arguments in whichever lane).
  float wgt_mine = m == kNegInf ? 0.0f : expf(m - mx);
  for (int u0 = 0; u0 < n; u0 += kMergeInFlight) {
    if (u0 > 0) {
      load_group(u0);
      if (u0 % 32 == 0) {
        const float* mine = p0 + size_t(min(u0 + lane, n - 1)) * stride;
        m = __ldcg(mine), l = __ldcg(mine + 1);
        wgt_mine = m == kNegInf ? 0.0f : expf(m - mx);
      }
    }
#pragma unroll
    for (int u = 0; u < kMergeInFlight; ++u) {
      const float wgt = __shfl_sync(0xffffffffu, wgt_mine, (u0 + u) & 31),
                  lc = __shfl_sync(0xffffffffu, l, (u0 + u) & 31);
      if (u0 + u >= n) continue;  // the same for the whole warp
      denom += wgt * lc;
#pragma unroll
      for (int t = 0; t < PER; ++t) acc[t] += wgt * pv[u][t];  // stored for t < per, d0 + t < hd
    }
  }
  float* out = d.out + size_t(h) * hd;
#pragma unroll
  for (int t = 0; t < PER; ++t)
    if (t < per && d0 + t < hd) store_attention(st, out + d0 + t, acc[t] / denom);
}

// This lane's PER dimensions [d0, d0 + per) of row `row` of V: one vector load where they are
// whole and aligned (per == PER, which divides head_dim), else element by element, those past the
// lane's (or the row's) end reading the row's last element, so that no load sits behind a branch.
template <int KV, int PER>
__device__ __forceinline__ void load_lane(const void* vb, size_t row, int d0, int per, int hd, float (&out)[PER]) {
  if (per == PER && hd % PER == 0) {
    load_vec<KV, PER>(vb, row + d0, out);
    return;
  }
#pragma unroll
  for (int t = 0; t < PER; ++t) out[t] = load_as_f32<KV>(vb, row + min(d0 + t, hd - 1));  // past hd: unused
}

// PER 16-bit values, one load: a lane's dimensions of a V row on the whole-row path below.
template <int PER>
struct Piece16;
template <>
struct Piece16<1> {
  using T = uint16_t;
};
template <>
struct Piece16<2> {
  using T = uint32_t;
};
template <>
struct Piece16<4> {
  using T = uint2;
};
template <int S>
__device__ __forceinline__ void widen(uint16_t r, float (&out)[1]) {
  float two[2];
  unpack2<S>(r, two);  // r as the lower half of a word
  out[0] = two[0];
}
template <int S>
__device__ __forceinline__ void widen(uint32_t r, float (&out)[2]) {
  unpack2<S>(r, out);
}
template <int S>
__device__ __forceinline__ void widen(uint2 r, float (&out)[4]) {
  unpack2<S>(r.x, out), unpack2<S>(r.y, out + 2);
}

// Partial state of (slice, head, split) at parts[(part0 + h*n_splits + c) * (hd + 2)]: m, l, acc.
// The split's keys go 32 at a time, one per lane: each lane sums its key's whole dot product (its
// loads independent of the other lanes', so a warp has 32 rows in flight instead of one), the
// chunk's max and sum go across the warp, then P.V runs key by key with each lane owning PER
// (>= head_dim / 32) consecutive dimensions. counts[slice * n_heads + h]: the warps of (slice, h)
// done.
// A split is short (32 keys by default: cuda_attention_plan.h), so a warp's time is its chain of
// memory round trips, not its arithmetic. WHOLE (16-bit K and V, head_dim = 32 PER <= 128: the
// families' usual decode): a lane's whole key row (4 PER pieces of 16 bytes) and its PER
// dimensions of all 32 V rows of the chunk are loaded before the first is used, raw (16-bit) so
// that they fit in registers, the first chunk's before q is staged: one round trip a chunk, and
// the chunk's only one (V does not wait for the scores). Otherwise the loads of kInFlight K
// chunks or V rows go at a time. Either way straight-line (a lane past the split reads the
// split's last row again rather than branch around the load), and the sums keep the order they
// had one load at a time: the same bits on both paths.
template <int KV, int PER, bool WHOLE>
__global__ void decode_kernel(const AttnDesc* descs, AttnShape s, float* parts, unsigned* counts, AttnStore st) {
  static_assert(!WHOLE || (KV != kF32 && PER <= 4));
  pdl_entry();
  __shared__ float q_s[kWarps][kPerLane * 32];
  const AttnDesc d = descs[blockIdx.y];
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int w = blockIdx.x * kWarps + warp;
  if (w >= s.n_heads * d.n_splits) return;
  const int h = w / d.n_splits, c = w % d.n_splits;
  const int hd = WHOLE ? 32 * PER : s.head_dim;
  const int kvh = h / (s.n_heads / s.n_kv_heads);
  const int pos = d.start_pos;
  const int js = first_key(s, pos) + c * d.split_len;
  const int je = min(pos + 1, js + d.split_len);
  const float* q = q_s[warp];
  auto stage_q = [&] {
    for (int i = lane; i < hd; i += 32) q_s[warp][i] = d.q[size_t(h) * hd + i];
    __syncwarp();
  };
  const size_t head_off = size_t(kvh) * d.capacity * hd;
  const void* kb = static_cast<const char*>(d.k) + head_off * (KV == kF32 ? 4 : 2);
  const void* vb = static_cast<const char*>(d.v) + head_off * (KV == kF32 ? 4 : 2);
  const int per = (hd + 31) / 32, d0 = lane * per;  // this lane's dimensions in P.V
  if (!WHOLE) stage_q();
  float m = kNegInf, l = 0.0f;
  float acc[PER] = {};
  for (int j0 = js; j0 < je; j0 += 32) {
    const int j = j0 + lane;
    const size_t row = size_t(min(j, je - 1)) * hd;
    const int n = min(32, je - j0);
    float dot = 0.0f;
    [[maybe_unused]] uint4 kr[WHOLE ? 4 * PER : 1];
    [[maybe_unused]] typename Piece16<WHOLE ? PER : 1>::T vr[WHOLE ? 32 : 1];
    if constexpr (WHOLE) {
      const auto* k16 = static_cast<const uint16_t*>(kb);
      const auto* v16 = static_cast<const uint16_t*>(vb);
#pragma unroll
      for (int u = 0; u < 4 * PER; ++u) kr[u] = load_raw<uint4>(k16 + row + 8 * u);
#pragma unroll
      for (int u = 0; u < 32; ++u)
        vr[u] = load_raw<typename Piece16<PER>::T>(v16 + size_t(j0 + min(u, n - 1)) * hd + d0);
      if (j0 == js) stage_q();
#pragma unroll
      for (int u = 0; u < 4 * PER; ++u) {
        float k8[8];
        unpack8<KV>(kr[u], k8);
#pragma unroll
        for (int v = 0; v < 8; ++v) dot = fmaf(q[8 * u + v], k8[v], dot);
      }
    } else if (hd % 8 == 0) {
      for (int e0 = 0; e0 < hd; e0 += 8 * kInFlight) {
        float k8[kInFlight][8];
#pragma unroll
        for (int u = 0; u < kInFlight; ++u) load_vec<KV, 8>(kb, row + min(e0 + 8 * u, hd - 8), k8[u]);
#pragma unroll
        for (int u = 0; u < kInFlight; ++u) {
          if (e0 + 8 * u >= hd) break;
#pragma unroll
          for (int v = 0; v < 8; ++v) dot = fmaf(q[e0 + 8 * u + v], k8[u][v], dot);
        }
      }
    } else {
      for (int e = 0; e < hd; ++e) dot = fmaf(q[e], load_as_f32<KV>(kb, row + e), dot);
    }
    const float x = j < je ? attn_score(dot, s) : kNegInf;
    float cmax = x;
    for (int o = 16; o > 0; o >>= 1) cmax = fmaxf(cmax, __shfl_xor_sync(0xffffffffu, cmax, o));
    const float m_new = fmaxf(m, cmax);
    const float scale = m == kNegInf ? 0.0f : expf(m - m_new);
    const float p = j < je ? expf(x - m_new) : 0.0f;
    float psum = p;
    for (int o = 16; o > 0; o >>= 1) psum += __shfl_xor_sync(0xffffffffu, psum, o);
    const float pr = round_act(p, s.act);
#pragma unroll
    for (int t = 0; t < PER; ++t) acc[t] *= scale;
    if constexpr (WHOLE) {
#pragma unroll
      for (int u = 0; u < 32; ++u) {
        const float pk = __shfl_sync(0xffffffffu, pr, u);
        if (u >= n) continue;  // the same for the whole warp
        float v[PER];
        widen<KV>(vr[u], v);
#pragma unroll
        for (int t = 0; t < PER; ++t) acc[t] = fmaf(pk, v[t], acc[t]);
      }
    } else {
      for (int k0 = 0; k0 < n; k0 += kInFlight) {
        float v[kInFlight][PER];
#pragma unroll
        for (int u = 0; u < kInFlight; ++u)
          load_lane<KV, PER>(vb, size_t(j0 + min(k0 + u, n - 1)) * hd, d0, per, hd, v[u]);
#pragma unroll
        for (int u = 0; u < kInFlight; ++u) {
          const float pk = __shfl_sync(0xffffffffu, pr, (k0 + u) & 31);
          if (k0 + u >= n) continue;  // the same for the whole warp
#pragma unroll
          for (int t = 0; t < PER; ++t)
            if (t < per && d0 + t < hd) acc[t] = fmaf(pk, v[u][t], acc[t]);
        }
      }
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
  for (int t = 0; t < PER; ++t)
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
    merge_splits<PER>(d, s, parts, h, st);
  }
}

// Whether decode_kernel's WHOLE path applies: 16-bit K and V, head_dim = 32 PER, PER <= 4.
inline bool whole_rows(const AttnShape& s, int per) { return s.kv_store != kF32 && per <= 4 && s.head_dim == 32 * per; }

// n one-row slices, each cut into its desc's splits, the grid shaped for max_splits (a slice's
// warps past its own splits return at once). parts: n x n_heads x max_splits x (head_dim + 2)
// floats (desc i's part0 = i x n_heads x max_splits); counts: n x n_heads zeros, zeros again after.
// whole_ok = false keeps 16-bit K/V on the general path too (the same bits), for timing the two.
template <class Launch>
void decode(const Launch& launch, const AttnDesc* descs, int n, int max_splits, const AttnShape& s, float* parts,
            unsigned* counts, const AttnStore& st, bool whole_ok = true) {
  const unsigned warps = unsigned(max_splits) * unsigned(s.n_heads);
  const dim3 grid((warps + kWarps - 1) / kWarps, unsigned(n)), block(kWarps * 32);
  const int per = (s.head_dim + 31) / 32;
  const bool whole = whole_ok && whole_rows(s, per);
  auto go = [&]<int PER>() {
    if (s.kv_store == kF32) launch(decode_kernel<kF32, PER, false>, grid, block, descs, s, parts, counts, st);
    if constexpr (PER <= 4) {
      if (whole && s.kv_store == kF16) launch(decode_kernel<kF16, PER, true>, grid, block, descs, s, parts, counts, st);
      if (whole && s.kv_store == kBF16)
        launch(decode_kernel<kBF16, PER, true>, grid, block, descs, s, parts, counts, st);
    }
    if (!whole && s.kv_store == kF16) launch(decode_kernel<kF16, PER, false>, grid, block, descs, s, parts, counts, st);
    if (!whole && s.kv_store == kBF16)
      launch(decode_kernel<kBF16, PER, false>, grid, block, descs, s, parts, counts, st);
  };
  if (per <= 1) {
    go.template operator()<1>();
  } else if (per <= 2) {
    go.template operator()<2>();
  } else if (per <= 4) {
    go.template operator()<4>();
  } else {
    go.template operator()<kPerLane>();
  }
}

}  // namespace
}  // namespace kvp::cuda::attn_decode
