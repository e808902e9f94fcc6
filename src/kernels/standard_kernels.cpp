// The `standard` policy: what fast inference stacks do (DESIGN.md §4). SIMD everywhere, threads,
// and an algorithm picked by shape — which is exactly why a KV-cached decode step (M = 1) and a
// cache-free recomputation (M = t+1) sum the same dot products in different orders:
//  matmul    M == 1         GEMV: threads split W rows; when there are too few rows per thread
//                           they split K instead and the partial sums are added afterwards.
//            2 <= M < 16    small GEMM: tiles of W rows meet every x row while in L1, so W is
//                           read from memory once; each output in the GEMV's dot order (so these
//                           shapes agree with a decode step that does not split K).
//            M >= 16        packed GEMM: x^T panels x fp32 W blocks, one FMA chain per output.
//  attention n_rows == 1    split-KV "flash decoding": fixed key chunks over (KV head, chunk)
//                           work items, merged with max-rescaling.
//            n_rows > 1     FlashAttention-2 style online softmax over 64-key tiles per
//                           (row, KV head), items dealt round-robin to threads.
// The SIMD primitives and their exact summation orders are in simd_ops.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "kernels/dequant_rows.h"
#include "kernels/cpu_kernels.h"
#include "kernels/policies.h"
#include "kernels/simd_ops.h"

namespace kvp {
namespace {

// GEMV splits K once a thread would get fewer W rows than this: with so few rows the per-thread
// work is too small to amortise the parallel region, and the row split leaves threads idle.
constexpr int64_t kSplitKRowsPerThread = 64;
// Split-K chunk boundaries are multiples of this, so every chunk but the last is whole vectors.
constexpr int64_t kSplitKAlign = 64;
// Below this many x rows the packed GEMM's x transpose and W conversion do not pay off.
constexpr int kPackedMinRows = 16;
// Packed GEMM blocking: one packed micro-tile of W (gemm_nr() x kKc fp32, 8 KB on AVX-512)
// stays in L1 while the x^T panels' kKc slices stream from L2; the chains' partial sums live in a
// contiguous per-thread buffer between slices. kKc is a multiple of every quantisation block.
constexpr int64_t kKc = 256;
constexpr int64_t kNc = 48;
// Attention: keys per online-softmax tile, and keys per decode chunk (a multiple of the tile).
// Both are aligned to absolute positions, so a key's chunk does not depend on the thread count.
constexpr int kTile = 64;
constexpr int kChunk = 128;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

class StandardKernels final : public CpuKernels {
 public:
  explicit StandardKernels(ThreadPool* pool)
      : pool_(pool), threads_(pool != nullptr ? pool->size() : 1), scratch_(size_t(threads_)), dequant_(size_t(threads_)) {}

  KernelPolicy policy() const override { return KernelPolicy::Standard; }

  void matmul(const float* x, int M, const TensorView& W, DType /*act*/, float* y) override {
    const int64_t N = W.rows(), K = W.cols();
    if (M <= 0 || N <= 0) return;
    if (K == 0) {
      std::fill(y, y + int64_t(M) * N, 0.0f);
      return;
    }
    if (M == 1) {
      gemv(x, W, N, K, y);
    } else if (M < kPackedMinRows) {
      pieces(N, [&](long b, long e, int t) {
        if (!W.quantized()) return simd::gemm_small(x, M, W.data, W.dtype, K, N, b, e, y);
        const int64_t R = dequant_chunk_rows(K);
        float* wf = dequant_scratch(t, size_t(R * K));
        for_dequantized_chunks(W, b, e, 0, K, R, wf, [&](int64_t n, int64_t r) {
          simd::gemm_small(x, M, wf, DType::F32, K, N, 0, r, y + n);
        });
      });
    } else {
      gemm_packed(x, M, W, N, K, y);
    }
  }

  void attention(const AttentionParams& p) override {
    if (p.n_rows <= 0) return;
    if (p.n_heads <= 0 || p.n_kv_heads <= 0 || p.n_heads % p.n_kv_heads != 0 || p.head_dim <= 0)
      fail("attention: {} query heads cannot share {} KV heads (head_dim {})", p.n_heads, p.n_kv_heads,
           p.head_dim);
    if (p.n_rows == 1)
      attention_decode(p);
    else
      attention_prefill(p);
  }

  void rmsnorm(const float* x, int M, int dim, const float* w, float eps, DType act, float* y) override {
    auto rows = [&](long b, long e, int) {
      for (long m = b; m < e; ++m) simd::rmsnorm_row(x + size_t(m) * dim, dim, w, eps, act, y + size_t(m) * dim);
    };
    // One row is a few microseconds of work: cheaper than waking the other threads.
    if (M >= 2 * threads_)
      parallel(M, rows);
    else
      rows(0, M, 0);
  }
  void rmsnorm_fp32_gain(const float* x, int M, int dim, const float* g, float eps, DType act, float* y) override {
    auto rows = [&](long b, long e, int) {
      for (long m = b; m < e; ++m) simd::rmsnorm_row_fp32_gain(x + size_t(m) * dim, dim, g, eps, act, y + size_t(m) * dim);
    };
    // One row is a few microseconds of work: cheaper than waking the other threads.
    if (M >= 2 * threads_)
      parallel(M, rows);
    else
      rows(0, M, 0);
  }

 private:
  void gemv(const float* x, const TensorView& W, int64_t N, int64_t K, float* y) {
    const int T = threads_;
    if (T > 1 && N < kSplitKRowsPerThread * T) {
      // Split-K: thread t sums its K chunk for every row; the chunk sums are then added in
      // thread order, so each output is a sum of T partial dots rather than one dot.
      float* partial = shared(size_t(T) * N);
      pool_->run_on_all([&](int t) {
        const int64_t k0 = std::min(K, K * t / T / kSplitKAlign * kSplitKAlign);
        const int64_t k1 = t + 1 == T ? K : std::min(K, K * (t + 1) / T / kSplitKAlign * kSplitKAlign);
        dot_rows(x, W, K, 0, N, k0, k1, partial + size_t(t) * N, t);
      });
      for (int64_t n = 0; n < N; ++n) {
        float s = partial[n];
        for (int t = 1; t < T; ++t) s += partial[size_t(t) * N + n];
        y[n] = s;
      }
      return;
    }
    pieces(N, [&](long b, long e, int t) { dot_rows(x, W, K, b, e, 0, K, y, t); });
  }

  // simd::dot_rows on thread t, through L1-sized chunks of dequantised rows when W is quantised.
  void dot_rows(const float* x, const TensorView& W, int64_t K, int64_t n0, int64_t n1, int64_t k0, int64_t k1,
                float* y, int t) {
    if (!W.quantized()) return simd::dot_rows(x, W.data, W.dtype, K, n0, n1, k0, k1, y);
    if (simd::dot_rows_quant(x, W.data, W.quant, K, n0, n1, k0, k1, y)) return;
    const int64_t R = dequant_chunk_rows(K);
    float* wf = dequant_scratch(t, size_t(R * K));
    for_dequantized_chunks(W, n0, n1, k0, k1, R, wf, [&](int64_t n, int64_t r) {
      simd::dot_rows(x, wf, DType::F32, K, 0, r, k0, k1, y + n);
    });
  }

  void gemm_packed(const float* x, int M, const TensorView& W, int64_t N, int64_t K, float* y) {
    const int64_t P = int64_t(simd::gemm_panel_rows());
    const int64_t panels = (M + P - 1) / P;
    const int64_t NR = int64_t(simd::gemm_nr());
    float* xT = shared(size_t(panels * P * K));
    parallel(panels, [&](long b, long e, int) { simd::gemm_pack_x(x, M, K, b, e, xT); });

    const int T = threads_;
    // Split the W rows when each thread gets a few micro-tiles' worth; otherwise (few outputs,
    // many rows of x) split the x panels and let every thread walk all of W.
    const bool split_n = T == 1 || N >= 4 * NR * T || panels < T;
    const size_t wtile_floats = size_t(NR * kKc);
    auto work = [&](int64_t n0, int64_t n1, int64_t p0, int64_t p1, int t) {
      if (n0 >= n1 || p0 >= p1) return;
      // Per thread: one widened W micro-tile, the chains' accumulators for all its outputs (block
      // after block), and (quantised W) the dequantised rows of a block.
      const int64_t blocks = (n1 - n0 + kNc - 1) / kNc;
      const size_t block_acc = simd::gemm_acc_floats(size_t(p1 - p0), size_t(kNc));
      const size_t deq_floats = W.quantized() ? size_t(kNc * kKc) : 0;
      float* wtile = scratch(t, wtile_floats + size_t(blocks) * block_acc + deq_floats);
      float* acc = wtile + wtile_floats;
      float* deq = acc + size_t(blocks) * block_acc;
      const size_t esize = W.quantized() ? 0 : dtype_size(W.dtype);
      // k slices outermost: the x^T slices of all panels (M x kKc floats) stay in L2 while every
      // W block passes over them, and W is still read once; the slice multiplied next is
      // prefetched during this one's arithmetic (prefetch_rows.h says why).
      for (int64_t k0 = 0; k0 < K; k0 += kKc) {
        const int64_t kc = std::min(kKc, K - k0);
        for (int64_t b = 0; b < blocks; ++b) {
          const int64_t nb = n0 + b * kNc;
          const int64_t rows = std::min(kNc, n1 - nb);
          PrefetchRows next;
          if (esize > 0) {
            next.stride = size_t(K) * esize;
            int64_t next_row = -1, next_k = 0, next_rows = 0;
            if (nb + rows < n1) {
              next_row = nb + rows, next_k = k0, next_rows = std::min(kNc, n1 - nb - rows);
            } else if (k0 + kc < K) {
              next_row = n0, next_k = k0 + kc, next_rows = std::min(kNc, n1 - n0);
            }
            if (next_row >= 0) {
              next.base = static_cast<const char*>(W.data) + (size_t(next_row) * K + size_t(next_k)) * esize;
              next.row_bytes = size_t(std::min(kKc, K - next_k)) * esize;
              next.rows = size_t(next_rows);
            }
          }
          float* block_a = acc + size_t(b) * block_acc;
          if (W.quantized()) {
            dequantize_rows(W, nb, rows, k0, k0 + kc, k0, deq, size_t(kc));
            simd::gemm_packed_block(xT, M, K, p0, p1, deq, DType::F32, size_t(kc), rows, k0, kc, wtile, block_a, y,
                                    N, nb, next);
          } else {
            const char* w0 = static_cast<const char*>(W.data) + (size_t(nb) * K + size_t(k0)) * esize;
            simd::gemm_packed_block(xT, M, K, p0, p1, w0, W.dtype, size_t(K), rows, k0, kc, wtile, block_a, y, N,
                                    nb, next);
          }
        }
      }
    };
    if (T == 1) {
      work(0, N, 0, panels, 0);
    } else if (split_n) {
      // Two pieces of W rows per thread, taken by whichever thread is free (a static split left
      // the caller waiting at the join for a thread the host had slowed); each piece walks all of
      // x^T once more, which is small next to its W.
      pool_->parallel_pieces(N, pool_->piece_for(N, 2, NR), [&](long b, long e, int t) { work(b, e, 0, panels, t); });
    } else {
      pool_->run_on_all([&](int t) { work(0, N, panels * t / T, panels * (t + 1) / T, t); });
    }
  }

  // The per-KV-head view of a cache: element (j, d) of head kvh at the returned base.
  static const void* head_base(const void* cache, const KvType& t, const AttentionParams& p, int kvh) {
    return static_cast<const char*>(cache) + t.bytes(size_t(kvh) * p.capacity * p.head_dim);
  }

  static int first_key(const AttentionParams& p, int pos) {
    return p.sliding_window > 0 ? std::max(0, pos - p.sliding_window + 1) : 0;
  }

  // Folds keys [js, je) into one online-softmax state, tile by tile (tiles aligned to kTile).
  static void run_tiles(const AttentionParams& p, int kvh, const float* q, int group, int js, int je, float* m,
                        float* l, float* acc, float* scratch) {
    simd::AttnTile t;
    t.q = q;
    t.group = group;
    t.head_dim = p.head_dim;
    t.k = head_base(p.k_cache, p.kv, p, kvh);
    t.v = head_base(p.v_cache, p.kv, p, kvh);
    t.kv = p.kv;
    t.score_divisor = p.score_divisor;
    t.score_scale = p.score_scale;
    t.softcap = p.softcap;
    t.act = p.act;
    t.m = m;
    t.l = l;
    t.acc = acc;
    t.scratch = scratch;
    for (int j = js; j < je;) {
      const int end = std::min(je, (j / kTile + 1) * kTile);
      t.j0 = j;
      t.j1 = end;
      simd::attn_tile(t);
      j = end;
    }
  }

  void attention_decode(const AttentionParams& p) {
    const int group = p.n_heads / p.n_kv_heads;
    const int hd = p.head_dim;
    const int pos = p.start_pos;
    const int first = first_key(p, pos);
    const int c0 = first / kChunk;
    const int n_chunks = pos / kChunk - c0 + 1;
    const int64_t items = int64_t(p.n_kv_heads) * n_chunks;
    // Per item: m[group], l[group], acc[group * hd] of one chunk.
    const size_t state = size_t(group) * (2 + hd);
    float* states = shared(size_t(items) * state);
    const size_t scratch_floats = simd::attn_tile_scratch_floats(group, hd, kTile);

    parallel(items, [&](long b, long e, int t) {
      float* scr = scratch(t, scratch_floats);
      for (long it = b; it < e; ++it) {
        const int kvh = int(it / n_chunks);
        const int c = c0 + int(it % n_chunks);
        float* m = states + size_t(it) * state;
        float* l = m + group;
        float* acc = l + group;
        std::fill(m, m + group, kNegInf);
        std::fill(l, l + group, 0.0f);
        std::fill(acc, acc + size_t(group) * hd, 0.0f);
        const int js = std::max(first, c * kChunk);
        const int je = std::min(pos + 1, (c + 1) * kChunk);
        run_tiles(p, kvh, p.q + size_t(kvh) * group * hd, group, js, je, m, l, acc, scr);
      }
    });

    // Merge the chunks of each head in chunk order, rescaling each to the global max.
    for (int h = 0; h < p.n_heads; ++h) {
      const int kvh = h / group, g = h % group;
      const float* s0 = states + size_t(kvh) * n_chunks * state;
      // The sink joins the merge as one more chunk: no keys, weight 1 at its own max.
      const float sink = p.sinks != nullptr ? p.sinks[h] : kNegInf;
      float mx = sink;
      for (int c = 0; c < n_chunks; ++c) mx = std::max(mx, s0[c * state + g]);
      float* out = p.out + size_t(h) * hd;
      std::fill(out, out + hd, 0.0f);
      float denom = p.sinks != nullptr ? std::exp(sink - mx) : 0.0f;
      for (int c = 0; c < n_chunks; ++c) {
        const float* st = s0 + c * state;
        const float w = std::exp(st[g] - mx);
        denom += w * st[group + g];
        const float* acc = st + 2 * group + size_t(g) * hd;
        for (int d = 0; d < hd; ++d) out[d] += w * acc[d];
      }
      for (int d = 0; d < hd; ++d) out[d] /= denom;
    }
  }

  void attention_prefill(const AttentionParams& p) {
    const int group = p.n_heads / p.n_kv_heads;
    const int hd = p.head_dim;
    const int q_stride = p.n_heads * hd;
    const int64_t items = int64_t(p.n_rows) * p.n_kv_heads;
    const size_t scratch_floats = simd::attn_tile_scratch_floats(group, hd, kTile) + size_t(group) * (2 + hd);

    // Causal rows get longer down the batch, so contiguous ranges would leave the first thread
    // idle; items are dealt round-robin instead.
    auto work = [&](int t) {
      float* m = scratch(t, scratch_floats);
      float* l = m + group;
      float* acc = l + group;
      float* scr = acc + size_t(group) * hd;
      for (int64_t it = t; it < items; it += threads_) {
        const int i = int(it / p.n_kv_heads);
        const int kvh = int(it % p.n_kv_heads);
        const int pos = p.start_pos + i;
        start_softmax_state(p.sinks != nullptr ? p.sinks + size_t(kvh) * group : nullptr, group, m, l);
        std::fill(acc, acc + size_t(group) * hd, 0.0f);
        const size_t qoff = size_t(i) * q_stride + size_t(kvh) * group * hd;
        run_tiles(p, kvh, p.q + qoff, group, first_key(p, pos), pos + 1, m, l, acc, scr);
        for (int g = 0; g < group; ++g) {
          float* out = p.out + qoff + size_t(g) * hd;
          const float* a = acc + size_t(g) * hd;
          for (int d = 0; d < hd; ++d) out[d] = a[d] / l[g];
        }
      }
    };
    if (threads_ > 1 && items > 1)
      pool_->run_on_all(work);
    else
      work(0);
  }

  template <class F>
  void parallel(long n, F&& f) {
    if (threads_ > 1 && n > 1)
      pool_->parallel_for(n, f);
    else
      f(0, n, 0);
  }
  // W rows of a GEMV or small-M matmul: about four pieces per thread, taken by whichever thread is
  // free. A static split left the caller waiting at the join for a thread the host had slowed
  // (perf: ~4% of a decode step); each output is one whole dot whoever computes it.
  template <class F>
  void pieces(long n, F&& f) {
    if (threads_ == 1 || n <= 1) return f(0, n, 0);
    pool_->parallel_pieces(n, pool_->piece_for(n, 4, 16, kSplitKRowsPerThread), f);
  }

  // Per-thread scratch (each thread only ever grows its own slot) and one buffer shared by a
  // whole call; both are reused across calls so steady-state decoding does not allocate.
  float* scratch(int t, size_t floats) { return grow(scratch_[size_t(t)], floats); }
  float* shared(size_t floats) { return grow(shared_, floats); }
  float* dequant_scratch(int t, size_t floats) { return grow(dequant_[size_t(t)], floats); }
  static float* grow(AlignedBuffer& b, size_t floats) {
    if (b.size() < floats * sizeof(float)) b = AlignedBuffer(floats * sizeof(float));
    return b.as<float>();
  }

  ThreadPool* pool_;
  int threads_;
  std::vector<AlignedBuffer> scratch_;
  std::vector<AlignedBuffer> dequant_;  // per thread: dequantised rows of a quantised W
  AlignedBuffer shared_;
};

}  // namespace

std::unique_ptr<Kernels> make_standard_kernels(ThreadPool* pool) { return std::make_unique<StandardKernels>(pool); }

}  // namespace kvp
