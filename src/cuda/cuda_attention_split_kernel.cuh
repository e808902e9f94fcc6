#pragma once
// The `invariant` policy's decode step on tensor cores: the bits the chunked prefill kernel
// (cuda_attention_mma_kernel.cuh, Mode::Chunked) gives the same row, with the keys' 128-key chunks
// computed in blocks of their own and merged in order by whichever block of the row finishes last.
//
// A block computes one chunk of one (slice, head) for the slice's one row. The prefill kernel's
// arithmetic for that row is kept instruction for instruction: the row is row 0 of a 16-row mma
// tile (its other rows zero), S = Q.K^T by n-tile of 8 keys with the same k-steps in the same
// order, the scores rounded and masked alike, the tile's max and sum folded lane by lane over the
// same keys in the same order and then across the row's four lanes, P rounded to the compute dtype,
// and each element of O the same mma chain over the tile's four 16-key steps. What W warps change
// is only who runs which of those chains:
//  - S: warp w computes n-tiles [w*8/W, (w+1)*8/W) of the tile's 8, and leaves the row's scores
//    in shared memory; every warp then reads all 64 and folds the softmax state itself (the same
//    operations on the same values in every warp, so the same m, l and P everywhere);
//  - P.V: warp w adds the n-tile pairs w, w + W, ... of O (a pair is one ldmatrix.trans).
// An element of O depends only on its own chain (the mma of a row and a column reads that row of
// A and that column of B, and nothing of the rows of A that are zero here but hold other queries
// in a prefill block), so which warp runs it does not change its bits. The K/V tile copies are
// shared by the block's 32W threads.
// Why more than one warp: a decode step has few (slice, head) pairs and a 64-key tile is 32 KB of
// K and V at head_dim 128; one warp a block copies and multiplies alone, and with one K/V stage
// (35 KB) at most six such blocks fit a multiprocessor. W = 4 gives each copy four times the
// threads and each P.V a quarter of the chains; W = 1 is the one-warp kernel this replaced,
// measured against it by $KVPARITY_CUDA_SPLIT_WARPS (cuda_attention_mma.cu).
// In a header so that the CPU suite runs the same source on the host (simt_host.h).
#include "cuda/cuda_attention_mma_kernel.cuh"

// Unnamed: the CPU suite's host build of this source must not meet the GPU build at link time.
namespace kvp::cuda::attn_mma {
namespace {

// A chunk's state in parts: m, l, then o[0..HD).
template <int HD>
constexpr int kPartFloats = HD + 2;

// Where the decode blocks leave their chunks' states and the row (cuda_ops.h, the decode launches).
struct SplitOut {
  float* parts = nullptr;
  int slots = 0;
  unsigned* counts = nullptr;
  AttnStore store{};
};

// A decode step's chunk states merged in order, as the prefill kernel merges them (Mode::Chunked),
// by the block of (slice, head h) that finished last: one thread a column of o. The states were
// written by other blocks: read past the L1 cache, which is not coherent between them. The states
// of kMergeInFlight chunks are read before the first is merged (a chunk past the last reads the
// last again, unused), so a long cache costs a round trip per kMergeInFlight chunks, not per
// chunk; the merges stay one by one, in chunk order.
constexpr int kMergeInFlight = 8;
template <int HD, int THREADS>
__device__ void combine_chunks(const AttnDesc& d, const AttnShape& s, const SplitOut& so, int h) {
  const int pos = d.start_pos;
  const int first = window_start(s, pos) / kChunkKeys, last = pos / kChunkKeys;
  // The running state starts at the head's sink, as the chunked prefill's does; the chunks' own
  // states started empty (split_decode_kernel), so the sink is counted once.
  float m0, l0;
  start_state(s, h, m0, l0);
  for (int col = threadIdx.x; col < HD; col += THREADS) {
    float mr = m0, lr = l0, o = 0.0f;
    for (int c0 = first; c0 <= last; c0 += kMergeInFlight) {
      float pm[kMergeInFlight], pl[kMergeInFlight], po[kMergeInFlight];
#pragma unroll
      for (int u = 0; u < kMergeInFlight; ++u) {
        const float* part = so.parts + (size_t(d.part0 + h) * so.slots + min(c0 + u, last)) * kPartFloats<HD>;
        pm[u] = __ldcg(part), pl[u] = __ldcg(part + 1), po[u] = __ldcg(part + 2 + col);
      }
#pragma unroll
      for (int u = 0; u < kMergeInFlight; ++u) {
        if (c0 + u > last) break;
        float m, fr, fc;
        merge_scales(mr, pm[u], m, fr, fc);
        lr = merged(lr, fr, pl[u], fc);
        mr = m;
        o = merged(o, fr, po[u], fc);
      }
    }
    store_attention(so.store, d.out + size_t(h) * HD + col, pscalar::add(o / lr, 0.0f));
  }
}

// Shared memory of a decode block: STAGES x (K, V) tiles of kKeys padded rows, the row's kKeys
// scores of the tile, and the block's "last to finish" flag.
template <int HD, int STAGES>
constexpr size_t split_smem_bytes() {
  return size_t(STAGES) * 2 * kKeys * (HD + kPad) * sizeof(uint16_t) + kKeys * sizeof(float) + 16;
}

// blockIdx: x the chunk, y the head, z the slice (one row, at d.start_pos). The chunk's state goes
// to so.parts at slot (d.part0 + head) * so.slots + chunk; the row's last block merges them all.
// STAGES = 2: the next tile's K and V are copied (cp.async) while this one is computed; 1: each
// tile is copied, then computed. The same arithmetic either way, and whatever W.
// Fragment coordinates (PTX ISA, mma.m16n8k16): g = lane / 4 picks rows g and g + 8 of A and C and
// column g of B; t = lane % 4 picks the column pairs 2t, 2t + 1 (and + 8 for the k halves). The
// row is row 0: the lanes with g = 0 hold its values; the others compute on zeros or on copies of
// row 0's values, which reach no output.
template <int S, int HD, int STAGES, int W>
__global__ void __launch_bounds__(W * 32) split_decode_kernel(const AttnDesc* descs, AttnShape s, SplitOut so) {
  pdl_entry();
  constexpr int kBlockThreads = W * 32;
  constexpr int KT = HD / 16;  // k-steps over the head dimension
  static_assert(KT % 2 == 0, "K and V fragments load two k-steps, two n-tiles at a time");
  constexpr int kPairs = HD / 16;              // O's n-tile pairs
  constexpr int kMine = (kPairs + W - 1) / W;  // pairs a warp adds, at most
  constexpr int kTilesOfS = 8 / W;             // S's n-tiles a warp computes
  static_assert(8 % W == 0, "the tile's 8 score n-tiles split evenly between the warps");
  constexpr int RS = HD + kPad;
  KVP_DYNAMIC_SHARED(uint16_t, smem);  // the K/V stages (KvTiles), the scores, the flag
  float* score_s = reinterpret_cast<float*>(smem + size_t(STAGES) * 2 * kKeys * RS);
  unsigned* last_s = reinterpret_cast<unsigned*>(score_s + kKeys);

  const AttnDesc d = descs[blockIdx.z];
  const int h = blockIdx.y, kvh = h / (s.n_heads / s.n_kv_heads);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int pos = d.start_pos, key_end = pos + 1, wpos = window_start(s, pos);
  const int c0 = int(blockIdx.x) * kChunkKeys;
  if (c0 >= key_end || c0 + kChunkKeys <= wpos) return;  // no key of the row: neither counted nor merged
  const int key_begin = max(wpos, c0), tiles_end = min(key_end, c0 + kChunkKeys);
  const auto tiles = KvTiles<HD, STAGES, kBlockThreads>::of(smem, d, kvh, key_end);
  const int first = key_begin / kKeys * kKeys;
  tiles.start(first, tiles_end);  // before q's loads, which then overlap the copies

  uint32_t qf[KT][4];
  const float* q = d.q + size_t(h) * HD;
#pragma unroll
  for (int kk = 0; kk < KT; ++kk) {
    const int c = kk * 16 + 2 * t;
    float2 x0 = make_float2(0.f, 0.f), x2 = x0;
    if (g == 0) {
      x0 = *reinterpret_cast<const float2*>(q + c);
      x2 = *reinterpret_cast<const float2*>(q + c + 8);
    }
    qf[kk][0] = pack2<S>(x0.x, x0.y);
    qf[kk][1] = 0u;
    qf[kk][2] = pack2<S>(x2.x, x2.y);
    qf[kk][3] = 0u;
  }

  float o[2 * kMine][4];
#pragma unroll
  for (int n = 0; n < 2 * kMine; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m = kNegInf, l = 0.0f;

  for (int k0 = first, tile = 0; k0 < tiles_end; k0 += kKeys, ++tile) {
    const int st = tiles.arrive(k0, tile, tiles_end);
    const auto& k_s = tiles.s[st][0];
    const auto& v_s = tiles.s[st][1];

    // This warp's n-tiles of S (keys 8j ..), rounded and masked as the prefill kernel's row.
#pragma unroll
    for (int i = 0; i < kTilesOfS; ++i) {
      const int j = warp * kTilesOfS + i;
      float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int kk = 0; kk < KT; kk += 2) {
        uint32_t kb[4];
        load_matrices<false>(kb, &k_s[j * 8 + lane % 8][kk * 16 + lane / 8 * 8]);
        mma<S>(sc, qf[kk], kb[0], kb[1]);
        mma<S>(sc, qf[kk + 1], kb[2], kb[3]);
      }
      if (g == 0) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = k0 + j * 8 + 2 * t + e;
          score_s[j * 8 + 2 * t + e] = (key <= pos && key >= wpos) ? attn_score(sc[e], s) : kNegInf;
        }
      }
    }
    __syncthreads();  // the row's 64 scores, for every warp

    // The tile's max and sum, each lane over keys 8j + 2t + e in the prefill kernel's order.
    float x[8][2];
    float tmax = kNegInf;
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        x[j][e] = score_s[j * 8 + 2 * t + e];
        tmax = fmaxf(tmax, x[j][e]);
      }
#pragma unroll
    for (int o2 = 1; o2 <= 2; o2 <<= 1) tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, o2));
    const float m_new = fmaxf(m, tmax);
    const float f = m == kNegInf ? 0.0f : expf(m - m_new);
    float sum = 0.0f;
    uint32_t pf[4][4];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float p[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        p[e] = m_new == kNegInf ? 0.0f : expf(x[j][e] - m_new);
        sum += p[e];
      }
      const int kk = j / 2, half = j % 2;
      pf[kk][half * 2 + 0] = pack2<S>(p[0], p[1]);
      pf[kk][half * 2 + 1] = 0u;  // rows 8..15
    }
#pragma unroll
    for (int o2 = 1; o2 <= 2; o2 <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o2);
    l = l * f + sum;
    m = m_new;
#pragma unroll
    for (int n = 0; n < 2 * kMine; ++n) {
      o[n][0] *= f;
      o[n][1] *= f;
    }
    // O += P V for this warp's n-tile pairs (lanes 16h + r: key 16kk + r, dimensions 8(n + h) ..).
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
      for (int i = 0; i < kMine; ++i) {
        const int pair = warp + i * W;
        if (pair >= kPairs) break;  // the same for the whole warp
        uint32_t vb[4];
        load_matrices<true>(vb, &v_s[kk * 16 + lane % 16][(2 * pair + lane / 16) * 8]);
        mma<S>(o[2 * i], pf[kk], vb[0], vb[1]);
        mma<S>(o[2 * i + 1], pf[kk], vb[2], vb[3]);
      }
    }
    __syncthreads();  // every thread is done with this stage (and the scores) before they are refilled
  }

  float* part = so.parts + (size_t(d.part0 + h) * so.slots + blockIdx.x) * kPartFloats<HD>;
  if (threadIdx.x == 0) {
    part[0] = m;
    part[1] = l;
  }
  if (g == 0) {
#pragma unroll
    for (int i = 0; i < kMine; ++i) {
      const int pair = warp + i * W;
      if (pair >= kPairs) break;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int col = (2 * pair + half) * 8 + 2 * t;
        part[2 + col] = o[2 * i + half][0];
        part[2 + col + 1] = o[2 * i + half][1];
      }
    }
  }
  // The row's chunks with keys (combine_chunks's), counted as their blocks finish: each writer's
  // state is visible before the block counts, and the last block to count merges them all.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const int chunks = pos / kChunkKeys - wpos / kChunkKeys + 1;
    unsigned* count = so.counts + size_t(blockIdx.z) * s.n_heads + h;
    const unsigned last = atomicAdd(count, 1u) == unsigned(chunks - 1);
    if (last) {
      *count = 0;       // every block of the row has counted: ready for the next launch
      __threadfence();  // the count seen before the states are read (the barrier below)
    }
    *last_s = last;
  }
  __syncthreads();
  if (*last_s) combine_chunks<HD, kBlockThreads>(d, s, so, h);
}

// Warps a decode block may have: 1 (the one-warp kernel) or kSplitWarps (the default).
constexpr int kSplitWarps = 4;

template <int S, int HD, int W, class Launch>
void launch_split(const Launch& launch, dim3 grid, const AttnDesc* descs, const AttnShape& s, int stages,
                  const SplitOut& so) {
  const dim3 block(W * 32);
  if (stages == 2)
    launch.with_smem(split_smem_bytes<HD, 2>(), split_decode_kernel<S, HD, 2, W>, grid, block, descs, s, so);
  else
    launch.with_smem(split_smem_bytes<HD, 1>(), split_decode_kernel<S, HD, 1, W>, grid, block, descs, s, so);
}

template <int S, int HD, class Launch>
bool split_hd(const Launch& launch, const AttnDesc* descs, int n, const AttnShape& s, int stages, int warps,
              const SplitOut& so) {
  const dim3 grid(unsigned(so.slots), unsigned(s.n_heads), unsigned(n));
  if (warps == 1)
    launch_split<S, HD, 1>(launch, grid, descs, s, stages, so);
  else
    launch_split<S, HD, kSplitWarps>(launch, grid, descs, s, stages, so);
  return true;
}

template <int S, class Launch>
bool split_s(const Launch& launch, const AttnDesc* descs, int n, const AttnShape& s, int stages, int warps,
             const SplitOut& so) {
  if (s.head_dim == 32) return split_hd<S, 32>(launch, descs, n, s, stages, warps, so);
  if (s.head_dim == 64) return split_hd<S, 64>(launch, descs, n, s, stages, warps, so);
  if (s.head_dim == 96) return split_hd<S, 96>(launch, descs, n, s, stages, warps, so);
  if (s.head_dim == 128) return split_hd<S, 128>(launch, descs, n, s, stages, warps, so);
  return false;
}

// Chunk slots a decode launch needs for keys up to max_pos: a power of two, so that consecutive
// steps launch the same grid (and replay one graph) until it doubles.
inline int split_slots(int max_pos) {
  int slots = 1;
  while (slots * kChunkKeys <= max_pos) slots *= 2;
  return slots;
}

// A decode step of n one-row slices (each desc's part0 = its index x n_heads) by chunks, merged by
// the last block of each (slice, head) to finish: the bits prefill(..., chunked = true) gives the
// same row, stored as `store` says. parts holds n x n_heads x slots x (head_dim + 2) floats, slots
// >= split_slots(the largest start_pos); counts n x n_heads zeros (zeros again when it is done).
// warps: 1 or kSplitWarps a block (the same bits).
template <class Launch>
bool split_decode(const Launch& launch, const AttnDesc* descs, int n, const AttnShape& s, float* parts, int slots,
                  unsigned* counts, const AttnStore& store = {}, int stages = 2, int warps = kSplitWarps) {
  if (!applies(s) || slots > 65535) return false;
  const SplitOut so{parts, slots, counts, store};
  return s.act == kF16 ? split_s<kF16>(launch, descs, n, s, stages, warps, so)
                       : split_s<kBF16>(launch, descs, n, s, stages, warps, so);
}

}  // namespace
}  // namespace kvp::cuda::attn_mma
