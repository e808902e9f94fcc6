#pragma once
// Prefill attention on tensor cores (FlashAttention-2 style), for fp16/bf16 compute with a KV
// cache of the same dtype and head_dim 32..128 (a multiple of 16); other cases take the CUDA-core
// kernels (cuda_attention.cu under `standard`, the portable kernel under `invariant`).
//
// A block owns 64 query rows of one head of one slice, four warps of 16 rows. Per 64-key tile the
// block stages K and V in shared memory (cp.async, the next tile's copies in flight while this
// one is computed: two stages, 70 KB of dynamic shared memory at head_dim 128); each warp
// computes S = Q.K^T with mma.sync m16n8k16 (fp16/bf16 operands, fp32 accumulation: Q and K hold
// values of the compute dtype, so the operands are exact), rounds the scores where HF's eager code
// does (attn_score), folds them into an online softmax (fp32 max, rescaled fp32 sum), and adds P.V
// with P rounded to the compute dtype, the same roundings as the CUDA-core kernel; only the
// summation order inside the tensor cores differs, as it does in every GPU stack. Keys past the
// block's last position are never read: their shared-memory rows are zero, so a never-written
// (NaN-poisoned) slot cannot leak.
//
// Why the `invariant` policy runs every row through it, decode steps included: a row's bits depend
// on its own query and keys only. Its keys are folded in 64-key tiles anchored at position 0, in
// increasing order, whichever block holds the row; each score and each P.V element is one mma
// element fed by that row's q (or p) alone; the max and the sums run over the row's own four
// lanes in a fixed order. What the block adds for its other rows are tiles wholly outside this
// row's window or past its position (before its window the state stays at its start: m = -inf,
// l = 0, o = 0, or with an attention sink under Whole m = sink, l = 1, o = 0, the tile adding
// e^-inf = 0 and rescaling by e^0 = 1; past its position m and l stay exactly as they were, the
// same way) and masked keys inside the row's last tile (p = 0). Zero products can only turn a -0
// of o into +0, and the output is o / l + 0: a zero leaves as +0 whatever came before.
//
// Chunks (the `invariant` policy): one block walking a decode row's keys in order is slow when a
// step has few (sequence, head) pairs (32 blocks at 7B, batch 1, against 132 multiprocessors; ~10x
// the standard split kernel at 8192 keys). So under `invariant` a row's keys are also cut into
// chunks of kChunkKeys anchored at position 0: each chunk's tiles fold into a state of their own,
// started empty, and the row's running state merges the chunks' states in increasing order
// (merge_scales and merged, below). A prefill block does that in order as it walks its tiles
// (Mode::Chunked, the running o in shared memory); a decode step computes every chunk's state in a
// block of its own and the last of them merges them all in the same order with the same
// expressions (cuda_attention_split_kernel.cuh). A chunk wholly outside a row's keys leaves its
// state empty (m = -inf, l = 0, o = 0), and merging an empty state changes nothing but a -0 of o
// into +0, so it does not matter that a prefill block merges chunks a row of it does not see and
// the decode step does not. An attention sink (cuda_attention_sinks.cuh) is where the row's running
// state starts, in both, before the first merge: merging an empty chunk into it changes nothing
// either. `standard` keeps the one running state (Mode::Whole), started at the sink.
// The kernels and their dispatch live in this header so that the CPU suite runs the same source on
// the host (simt_host.h); cuda_attention_mma.cu launches them.
#include <cmath>

#include "cuda/cuda_attention_score.cuh"
#include "cuda/cuda_attention_sinks.cuh"
#include "cuda/cuda_nonfinite.cuh"
#include "kernels/portable_scalar.h"

// Unnamed: the CPU suite's host build of this source must not meet the GPU build at link time.
namespace kvp::cuda::attn_mma {
namespace {

constexpr int kRows = 64;  // query rows per block
constexpr int kKeys = 64;  // keys per tile
// Keys per chunk (Mode::Chunked and the decode steps): 2 tiles, so that a 7B decode step over 512 keys runs 128
// blocks. A multiple of kKeys: a tile is never cut.
constexpr int kChunkKeys = 128;
static_assert(kChunkKeys % kKeys == 0);
constexpr int kPad = 8;    // halves of padding per shared row (no bank conflicts)
constexpr float kNegInf = -INFINITY;

template <int S>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  return uint32_t(bits_of<S>(lo)) | uint32_t(bits_of<S>(hi)) << 16;
}

template <int S>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDACC__)
  if constexpr (S == kF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#else
  simt::mma16816(S == kBF16, c, a[0], a[1], a[2], a[3], b0, b1);
#endif
}

// Four 8 x 8 matrices of 16-bit values from shared memory in one instruction (ldmatrix .x4), lane
// 8i + r giving the address of row r of matrix i (16 bytes, 16-byte aligned): without trans, each
// lane gets the mma fragment of a row-major tile (row lane / 4, columns 2(lane % 4), + 1); with
// trans, of its transpose. The same operands the element-wise reads gave, in a fraction of the
// instructions.
template <bool Trans>
__device__ __forceinline__ void load_matrices(uint32_t (&r)[4], const uint16_t* row) {
#if defined(__CUDACC__)
  const auto a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if constexpr (Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#else
  simt::ldmatrix_x4(r, row, Trans);
#endif
}

__device__ __forceinline__ int window_start(const AttnShape& s, int pos) {
  return s.sliding_window > 0 ? max(0, pos - s.sliding_window + 1) : 0;
}

// Whole: one running state over all the keys (standard). Chunked: per-chunk states merged in order
// (invariant; a decode step's chunks: cuda_attention_split_kernel.cuh).
enum class Mode { Whole, Chunked };

// Shared memory of a block: STAGES x (K, V) tiles of kKeys padded rows; Chunked adds the running o
// of the block's 64 rows (fp32, each thread's own fragment slots).
template <int HD, int STAGES, Mode M>
constexpr size_t smem_bytes() {
  return size_t(STAGES) * 2 * kKeys * (HD + kPad) * sizeof(uint16_t) +
         (M == Mode::Chunked ? size_t(kRows) * HD * sizeof(float) : 0);
}

// One KV head's keys [.., key_end) walked in kKeys-key tiles through STAGES shared-memory stages
// (K rows at s[st][0], V rows at s[st][1]) by a block of THREADS threads; rows past key_end are
// zeros, so a never-written slot is never read. STAGES = 2: the next tile's copies (cp.async) are
// in flight while this one is computed; 1: each tile is copied, then computed. Either way the
// first tile's copies go out at start(), which the kernels call before they load q: the two
// round trips overlap (a decode block has few tiles, so that is one of its few round trips).
template <int HD, int STAGES, int THREADS>
struct KvTiles {
  uint16_t (*s)[2][kKeys][HD + kPad];
  const uint16_t* k;
  const uint16_t* v;
  int key_end;

  // KV head kvh of d's cache, through stages at the start of the block's dynamic shared memory.
  __device__ static KvTiles of(uint16_t* smem, const AttnDesc& d, int kvh, int key_end) {
    const size_t head = size_t(kvh) * d.capacity * HD;
    return {reinterpret_cast<uint16_t(*)[2][kKeys][HD + kPad]>(smem), static_cast<const uint16_t*>(d.k) + head,
            static_cast<const uint16_t*>(d.v) + head, key_end};
  }

  __device__ void copy(int k0, int st) const {
    constexpr int kVecPerRow = HD / 8;
    for (int i = threadIdx.x; i < kKeys * kVecPerRow; i += THREADS) {
      const int row = i / kVecPerRow, col = (i % kVecPerRow) * 8;
      const bool ok = k0 + row < key_end;
      const size_t at = ok ? size_t(k0 + row) * HD + col : 0;
      copy16(&s[st][0][row][col], k + at, ok);
      copy16(&s[st][1][row][col], v + at, ok);
    }
    commit_copies();
  }
  // Before a walk over the tiles at first, first + kKeys, .. < end: the first tile's copies.
  __device__ void start(int first, int end) const {
    if (first < end) copy(first, 0);
  }
  // The stage that holds the walk's tile number `tile` (at k0), landed and seen by the whole block.
  __device__ int arrive(int k0, int tile, int end) const {
    const int st = STAGES == 2 ? tile % 2 : 0;
    if constexpr (STAGES == 2) {
      // The other stage was last read in the previous tile, which every thread has finished (the
      // barrier that ends each tile's work). An empty group past the last tile keeps the wait's count.
      if (k0 + kKeys < end)
        copy(k0 + kKeys, 1 - st);
      else
        commit_copies();
      wait_copies<1>();  // this tile's copies have landed
    } else {
      if (tile > 0) copy(k0, 0);  // the first went out at start()
      wait_copies<0>();
    }
    __syncthreads();  // and are seen by the whole block
    return st;
  }
};

// Merging a chunk's state (mc, lc, oc) into the running one (mr, lr, or): the new maximum and the
// two scales, then l and every o element as merged(r, fr, c, fc). The prefill kernel and
// combine_chunks call exactly these, so that both paths round alike (no fma: --fmad=false).
__device__ __forceinline__ void merge_scales(float mr, float mc, float& m, float& fr, float& fc) {
  m = fmaxf(mr, mc);
  fr = mr == kNegInf ? 0.0f : expf(mr - m);
  fc = mc == kNegInf ? 0.0f : expf(mc - m);
}
__device__ __forceinline__ float merged(float r, float fr, float c, float fc) { return r * fr + c * fc; }

constexpr int kThreads = 128;  // a block: four warps of 16 rows

// Three blocks a multiprocessor where they fit (the two-stage, whole-state head_dim-128 kernel,
// `standard`'s prefill and cache-OFF rows at 7B, in 168 registers): ptxas may otherwise allocate
// past 170 for a change anywhere in the kernel (the store below: 222) and leave two.
template <int HD, int STAGES, Mode MODE>
constexpr int kMinBlocks = HD == 128 && STAGES == 2 && MODE == Mode::Whole ? 3 : 1;

// STAGES = 2: the next tile's K and V are copied (cp.async) while this one is computed; 1: each
// tile is copied, then computed. The same arithmetic either way.
// Fragment coordinates (PTX ISA, mma.m16n8k16): g = lane / 4 picks rows g and g + 8 of A and C and
// column g of B; t = lane % 4 picks the column pairs 2t, 2t + 1 (and + 8 for the k halves).
// store: the output's rounding point, its report and its 16-bit copy, where the caller hands them
// over (as split_decode's merge does), so that no launch after this one reads and writes the output
// again to round it (a 7B cache-OFF step of 64 x 200 rows: 0.21 ms a layer).
template <int S, int HD, int STAGES, Mode MODE>
__global__ void __launch_bounds__(128, kMinBlocks<HD, STAGES, MODE>)
    prefill_mma_kernel(const AttnDesc* descs, AttnShape s, AttnStore store) {
  pdl_entry();
  constexpr int KT = HD / 16;  // k-steps over the head dimension
  static_assert(KT % 2 == 0, "K and V fragments load two k-steps, two n-tiles at a time");
  constexpr int NT = HD / 8;   // output n-tiles
  constexpr int RS = HD + kPad;
  KVP_DYNAMIC_SHARED(uint16_t, smem);  // the K/V stages (KvTiles), then Chunked's running o

  const AttnDesc d = descs[blockIdx.z];
  const int r0 = blockIdx.x * kRows;
  if (r0 >= d.n_rows) return;
  const int h = blockIdx.y, kvh = h / (s.n_heads / s.n_kv_heads);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int q_stride = s.n_heads * HD;

  const int last_row = min(d.n_rows, r0 + kRows) - 1;
  const int key_end = d.start_pos + last_row + 1;           // keys [.., key_end) hold this pass's data
  const int key_begin = window_start(s, d.start_pos + r0);  // no row of the block looks further back
  const auto tiles = KvTiles<HD, STAGES, kThreads>::of(smem, d, kvh, key_end);
  const int first = key_begin / kKeys * kKeys;
  tiles.start(first, key_end);  // before q's loads, which then overlap the copies

  // This warp's rows: ra = r0 + 16*warp + g and rb = ra + 8 (positions start_pos + row).
  const int ra = r0 + warp * 16 + g, rb = ra + 8;
  const int pa = d.start_pos + ra, pb = d.start_pos + rb;
  // Two adjacent values of q's row `row` from column c, packed for the MMA: read from q's 16-bit
  // rows where the rotation wrote them (AttnDesc::q16, the same bits pack2<S> gives), else packed
  // from fp32 here; zero past the slice's rows.
  auto q_pair = [&](int row, int c) -> uint32_t {
    if (row >= d.n_rows) return 0u;
    const size_t at = size_t(row) * q_stride + size_t(h) * HD + c;
    if (d.q16 != nullptr) return load_raw<uint32_t>(static_cast<const uint16_t*>(d.q16) + at);
    const float2 x = *reinterpret_cast<const float2*>(d.q + at);
    return pack2<S>(x.x, x.y);
  };
  uint32_t qf[KT][4];
#pragma unroll
  for (int kk = 0; kk < KT; ++kk) {
    const int c0 = kk * 16 + 2 * t;
    qf[kk][0] = q_pair(ra, c0);
    qf[kk][1] = q_pair(rb, c0);
    qf[kk][2] = q_pair(ra, c0 + 8);
    qf[kk][3] = q_pair(rb, c0 + 8);
  }

  float o[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float ma = kNegInf, mb = kNegInf, la = 0.0f, lb = 0.0f;

  // Chunked: the running state, merged from each chunk's (m, l, o) as the walk leaves it; this
  // thread's o slots in shared memory after the K/V stages.
  float mra = kNegInf, mrb = kNegInf, lra = 0.0f, lrb = 0.0f;
  // The head's sink (cuda_attention_sinks.cuh): where the state the output divides by starts. Whole:
  // the one state. Chunked: the running one, as combine_chunks starts a decode step's, while each
  // chunk's own state starts empty (the sink counted once, however many chunks).
  if constexpr (MODE == Mode::Whole) {
    start_state(s, h, ma, la);
    mb = ma, lb = la;
  } else {
    start_state(s, h, mra, lra);
    mrb = mra, lrb = lra;
  }
  float* o_run = reinterpret_cast<float*>(smem + size_t(STAGES) * 2 * kKeys * RS) + threadIdx.x;
  if constexpr (MODE == Mode::Chunked) {
#pragma unroll
    for (int i = 0; i < NT * 4; ++i) o_run[i * 128] = 0.0f;
  }
  auto merge_chunk = [&] {
    float m, fra, fca, frb, fcb;
    merge_scales(mra, ma, m, fra, fca);
    lra = merged(lra, fra, la, fca);
    mra = m;
    merge_scales(mrb, mb, m, frb, fcb);
    lrb = merged(lrb, frb, lb, fcb);
    mrb = m;
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {  // e 0, 1: row a; 2, 3: row b
        float& r = o_run[(n * 4 + e) * 128];
        r = e < 2 ? merged(r, fra, o[n][e], fca) : merged(r, frb, o[n][e], fcb);
      }
    // The next chunk starts empty.
    ma = mb = kNegInf;
    la = lb = 0.0f;
#pragma unroll
    for (int n = 0; n < NT; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  };

  [[maybe_unused]] int chunk = first / kChunkKeys;
  for (int k0 = first, tile = 0; k0 < key_end; k0 += kKeys, ++tile) {
    if constexpr (MODE == Mode::Chunked) {
      if (k0 / kChunkKeys != chunk) {
        merge_chunk();
        chunk = k0 / kChunkKeys;
      }
    }
    const int st = tiles.arrive(k0, tile, key_end);
    const auto& k_s = tiles.s[st][0];
    const auto& v_s = tiles.s[st][1];

    // S = Q K^T for this warp's 16 rows and the tile's 64 keys (8 n-tiles of 8 keys). B = K^T, so
    // row-major K rows are its fragments as they stand: one load gives two k-steps' (lanes 8i + r:
    // key 8j + r, dimensions 16kk + 8i ..).
    float sc[8][4];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < KT; kk += 2) {
        uint32_t kb[4];
        load_matrices<false>(kb, &k_s[j * 8 + lane % 8][kk * 16 + lane / 8 * 8]);
        mma<S>(sc[j], qf[kk], kb[0], kb[1]);
        mma<S>(sc[j], qf[kk + 1], kb[2], kb[3]);
      }
    }
    // Scores (rounded as HF rounds them), masked, and the tile's row maxima.
    float ta = kNegInf, tb = kNegInf;
    const int wa = window_start(s, pa), wb = window_start(s, pb);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int key = k0 + j * 8 + 2 * t + e;
        const float xa = (key <= pa && key >= wa && key < key_end) ? attn_score(sc[j][e], s) : kNegInf;
        const float xb = (key <= pb && key >= wb && key < key_end) ? attn_score(sc[j][2 + e], s) : kNegInf;
        sc[j][e] = xa;
        sc[j][2 + e] = xb;
        ta = fmaxf(ta, xa);
        tb = fmaxf(tb, xb);
      }
    }
#pragma unroll
    for (int o2 = 1; o2 <= 2; o2 <<= 1) {
      ta = fmaxf(ta, __shfl_xor_sync(0xffffffffu, ta, o2));
      tb = fmaxf(tb, __shfl_xor_sync(0xffffffffu, tb, o2));
    }
    const float na = fmaxf(ma, ta), nb = fmaxf(mb, tb);
    const float fa = ma == kNegInf ? 0.0f : expf(ma - na), fb = mb == kNegInf ? 0.0f : expf(mb - nb);
    // p in fp32 for the sums; rounded to the compute dtype for P.V (the A operand, built from the
    // score fragments: n-tiles 2kk and 2kk+1 are the two k halves of key step kk).
    float sa = 0.0f, sb = 0.0f;
    uint32_t pf[4][4];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float p[4];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        p[e] = na == kNegInf ? 0.0f : expf(sc[j][e] - na);
        p[2 + e] = nb == kNegInf ? 0.0f : expf(sc[j][2 + e] - nb);
        sa += p[e];
        sb += p[2 + e];
      }
      const int kk = j / 2, half = j % 2;
      pf[kk][half * 2 + 0] = pack2<S>(p[0], p[1]);
      pf[kk][half * 2 + 1] = pack2<S>(p[2], p[3]);
    }
#pragma unroll
    for (int o2 = 1; o2 <= 2; o2 <<= 1) {
      sa += __shfl_xor_sync(0xffffffffu, sa, o2);
      sb += __shfl_xor_sync(0xffffffffu, sb, o2);
    }
    la = la * fa + sa;
    lb = lb * fb + sb;
    ma = na;
    mb = nb;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      o[n][0] *= fa;
      o[n][1] *= fa;
      o[n][2] *= fb;
      o[n][3] *= fb;
    }
    // O += P V: B operand (keys x dims) from the row-major V tile, transposed as it loads: one load
    // gives two n-tiles' fragments (lanes 16h + r: key 16kk + r, dimensions 8(n + h) ..).
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
      for (int n = 0; n < NT; n += 2) {
        uint32_t vb[4];
        load_matrices<true>(vb, &v_s[kk * 16 + lane % 16][(n + lane / 16) * 8]);
        mma<S>(o[n], pf[kk], vb[0], vb[1]);
        mma<S>(o[n + 1], pf[kk], vb[2], vb[3]);
      }
    }
    __syncthreads();  // every thread is done with this stage before it is refilled
  }

  {
    if constexpr (MODE == Mode::Chunked) {  // the last chunk in; o and l become the running ones
      merge_chunk();
      la = lra;
      lb = lrb;
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[n][e] = o_run[(n * 4 + e) * 128];
    }
    // C fragment: rows g (o[n][0..1]) and g + 8 (o[n][2..3]) of the warp's 16, columns n*8 + 2t,
    // + 1. The + 0 (a correctly rounded add, which no compiler folds away) makes a zero +0 (above).
    // The rows go through shared memory (the K/V stages, which every thread is done with) and out
    // a row at a time, each value through one store_attention call: called on the fragments, the
    // 64 unrolled copies of its rounding, report and copy took the compiler past 20 minutes.
    constexpr int SR = HD + 4;  // floats a staged row: the fragments' 8 rows fall on other banks
    static_assert(size_t(kThreads / 32) * 16 * SR * sizeof(float) <= size_t(2) * kKeys * (HD + kPad) * sizeof(uint16_t),
                  "a warp's rows fit in one K/V stage");
    float* staged = reinterpret_cast<float*>(smem) + warp * 16 * SR;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const int col = n * 8 + 2 * t;
      staged[g * SR + col] = pscalar::add(o[n][0] / la, 0.0f);
      staged[g * SR + col + 1] = pscalar::add(o[n][1] / la, 0.0f);
      staged[(g + 8) * SR + col] = pscalar::add(o[n][2] / lb, 0.0f);
      staged[(g + 8) * SR + col + 1] = pscalar::add(o[n][3] / lb, 0.0f);
    }
    __syncwarp();
    const int row0 = r0 + warp * 16;
#pragma unroll 1
    for (int i = lane; i < 16 * HD; i += 32) {
      const int r = i / HD, c = i % HD;
      if (row0 + r < d.n_rows)
        store_attention(store, d.out + size_t(row0 + r) * q_stride + size_t(h) * HD + c, staged[r * SR + c]);
    }
  }
}

// launch.with_smem(bytes, kernel, grid, block, args...) runs a kernel (StreamLaunch on the GPU).
template <int S, int HD, Mode MODE, class Launch>
void launch_mode(const Launch& launch, dim3 grid, const AttnDesc* descs, const AttnShape& s, int stages,
                 const AttnStore& store) {
  const dim3 block(kThreads);
  if (stages == 2)
    launch.with_smem(smem_bytes<HD, 2, MODE>(), prefill_mma_kernel<S, HD, 2, MODE>, grid, block, descs, s, store);
  else
    launch.with_smem(smem_bytes<HD, 1, MODE>(), prefill_mma_kernel<S, HD, 1, MODE>, grid, block, descs, s, store);
}

// Every row of n slices. True: launched.
template <int S, int HD, class Launch>
bool launch_hd(const Launch& launch, const AttnDesc* descs, int n, int max_rows, const AttnShape& s, int stages,
               Mode mode, const AttnStore& store) {
  const dim3 grid(unsigned((max_rows + kRows - 1) / kRows), unsigned(s.n_heads), unsigned(n));
  if (mode == Mode::Chunked)
    launch_mode<S, HD, Mode::Chunked>(launch, grid, descs, s, stages, store);
  else
    launch_mode<S, HD, Mode::Whole>(launch, grid, descs, s, stages, store);
  return true;
}

template <int S, class Launch>
bool launch_s(const Launch& launch, const AttnDesc* descs, int n, int max_rows, const AttnShape& s, int stages,
              Mode mode, const AttnStore& store) {
  if (s.head_dim == 32) return launch_hd<S, 32>(launch, descs, n, max_rows, s, stages, mode, store);
  if (s.head_dim == 64) return launch_hd<S, 64>(launch, descs, n, max_rows, s, stages, mode, store);
  if (s.head_dim == 96) return launch_hd<S, 96>(launch, descs, n, max_rows, s, stages, mode, store);
  if (s.head_dim == 128) return launch_hd<S, 128>(launch, descs, n, max_rows, s, stages, mode, store);
  return false;
}

constexpr int kMaxRows = 65535 * kRows;  // a slice's rows: grid.x is at most 65535 blocks

// Whether the kernel applies: fp16/bf16 compute with a KV cache of that dtype, head_dim 32/64/96/128.
inline bool applies(const AttnShape& s) {
  return s.kv_store == s.act && (s.act == kF16 || s.act == kBF16) &&
         (s.head_dim == 32 || s.head_dim == 64 || s.head_dim == 96 || s.head_dim == 128);
}

// Launches the kernel over every row of the n slices when it applies (false: nothing launched).
// stages: 2 (copies of the next tile overlap this one's arithmetic) or 1; the same bits. chunked:
// the invariant policy's chunk merges (the bits of split_decode's, cuda_attention_split_kernel.cuh).
// store: as the kernel's.
template <class Launch>
bool prefill(const Launch& launch, const AttnDesc* descs, int n, int max_rows, const AttnShape& s, int stages = 2,
             bool chunked = false, const AttnStore& store = {}) {
  if (!applies(s) || max_rows > kMaxRows) return false;
  const Mode mode = chunked ? Mode::Chunked : Mode::Whole;
  return s.act == kF16 ? launch_s<kF16>(launch, descs, n, max_rows, s, stages, mode, store)
                       : launch_s<kBF16>(launch, descs, n, max_rows, s, stages, mode, store);
}

}  // namespace
}  // namespace kvp::cuda::attn_mma
