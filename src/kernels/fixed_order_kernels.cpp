// The fixed-order policies on the CPU (DESIGN.md §4): `invariant` and `portable`. Both are as fast
// as the standard policy where it matters, but every output element is reduced in one order fixed
// by the reduction length alone, so that
//   - a decode step (M = 1), a batched decode step (M = B rows of different sequences), a prefill
//     (M = prompt or chunk) and a cache-OFF recomputation (M = t+1) give each row the same bits;
//   - attention over keys that come from the cache gives the same bits as over keys just
//     computed, and the number of keys already cached does not matter;
//   - the thread count does not matter: threads split independent outputs (W rows, query rows,
//     query heads), never a reduction.
// The orders themselves are specified in invariant_simd.h and portable_simd.h (portable's do not
// depend on the SIMD width either, and it brings its own exp/tanh). What this file adds is only
// the parallel decomposition, which by construction cannot touch them:
//  matmul     M < kBlockedMinRows: W widened in registers (decode is memory-bound);
//             otherwise W blocks widened once into fp32 and reused by all rows (prefill is
//             compute-bound). Both run the same per-output chain; threads split N.
//  attention  one work item per (query row, KV head, run of query heads); every item runs the
//             tile-anchored online softmax for its row over [first_key, pos], whether the row is
//             a decode step or row i of a prefill.
//  rmsnorm    one row at a time, rows split across threads.
#include <algorithm>
#include <vector>

#include "core/error.h"
#include "kernels/dequant_rows.h"
#include "kernels/invariant_simd.h"
#include "kernels/portable_simd.h"
#include "kernels/cpu_kernels.h"
#include "kernels/policies.h"

namespace kvp {
namespace {

// From this many rows the W-block widening is amortised over enough rows to beat widening in
// registers for every row tile.
constexpr int kBlockedMinRows = 16;
// Below this many multiply-adds a matmul is cheaper on one thread than waking the others (tiny
// models, Gemma-2's norms' callers); the result is the same either way.
constexpr int64_t kMinParallelMacs = int64_t(1) << 15;

class FixedOrderKernels final : public CpuKernels {
 public:
  FixedOrderKernels(KernelPolicy policy, const FixedOrderSimd& ops, ThreadPool* pool)
      : policy_(policy), ops_(ops), pool_(pool), threads_(pool != nullptr ? pool->size() : 1),
        scratch_(size_t(threads_)), dequant_(size_t(threads_)) {}

  KernelPolicy policy() const override { return policy_; }

  void matmul(const float* x, int M, const TensorView& W, DType /*act*/, float* y) override {
    const int64_t N = W.rows(), K = W.cols();
    if (M <= 0 || N <= 0) return;
    if (K == 0) {
      std::fill(y, y + int64_t(M) * N, 0.0f);
      return;
    }
    const bool blocked = M >= kBlockedMinRows;
    const size_t scratch_floats = blocked ? ops_.matmul_blocked_scratch_floats(size_t(M), size_t(K)) : 0;
    const int T = (threads_ > 1 && int64_t(M) * N * K >= kMinParallelMacs) ? threads_ : 1;
    const float* xp = nullptr;
    if (blocked) {
      float* buf = grow(packed_x_, ops_.packed_x_floats(size_t(M), size_t(K)));
      const long blocks = long(ops_.packed_x_blocks(size_t(M)));
      auto pack = [&](long b, long e, int) { ops_.pack_x(x, size_t(M), size_t(K), size_t(b), size_t(e), buf); };
      if (T > 1)
        pool_->parallel_for(blocks, pack);
      else
        pack(0, blocks, 0);
      xp = buf;
    }
    // Rows in pieces of a multiple of 8 (the decode tile), about four per thread for decode and two
    // for the blocked GEMM, taken by whichever thread is free: a static split left the caller
    // waiting at the join for a thread the host had slowed. Every output's chain is the same
    // whoever computes it.
    auto work = [&](int64_t n0, int64_t n1, int t) {
      if (n0 >= n1) return;
      if (!W.quantized()) {
        if (blocked)
          ops_.matmul_blocked(xp, size_t(M), W.data, W.dtype, size_t(K), size_t(N), size_t(n0), size_t(n1), y,
                                scratch(t, scratch_floats));
        else
          ops_.matmul_direct(x, size_t(M), W.data, W.dtype, size_t(K), size_t(N), size_t(n0), size_t(n1), y);
        return;
      }
      // Chunks of dequantised rows through the same fp32 paths (a multiple of the 8-row decode
      // tile when blocked, so the W blocks stay whole).
      const int64_t R = blocked ? dequant_chunk_rows(K, 16, 32) : dequant_chunk_rows(K);
      float* wf = grow(dequant_[size_t(t)], size_t(R * K));
      for_dequantized_chunks(W, n0, n1, 0, K, R, wf, [&](int64_t n, int64_t r) {
        if (blocked)
          ops_.matmul_blocked(xp, size_t(M), wf, DType::F32, size_t(K), size_t(N), 0, size_t(r), y + n,
                                scratch(t, scratch_floats));
        else
          ops_.matmul_direct(x, size_t(M), wf, DType::F32, size_t(K), size_t(N), 0, size_t(r), y + n);
      });
    };
    if (T > 1)
      pool_->parallel_pieces(N, pool_->piece_for(N, blocked ? 2 : 4, 8, 64),
                             [&](long b, long e, int t) { work(b, e, t); });
    else
      work(0, N, 0);
  }

  void attention(const AttentionParams& p) override {
    if (p.n_rows <= 0) return;
    if (p.n_heads <= 0 || p.n_kv_heads <= 0 || p.n_heads % p.n_kv_heads != 0 || p.head_dim <= 0)
      fail("attention: {} query heads cannot share {} KV heads (head_dim {})", p.n_heads, p.n_kv_heads,
           p.head_dim);
    const int group = p.n_heads / p.n_kv_heads;
    const int hd = p.head_dim;
    const int q_stride = p.n_heads * hd;
    // A decode step has only n_kv_heads (row, KV head) items; splitting each group's query heads
    // gives every thread work. Heads are computed independently, so this changes no bits.
    const int64_t base_items = int64_t(p.n_rows) * p.n_kv_heads;
    const int splits = base_items >= 2 * threads_ ? 1 : int(std::min<int64_t>(group, (2 * threads_ + base_items - 1) / base_items));
    const int64_t items = base_items * splits;
    const size_t scratch_floats = ops_.attn_row_scratch_floats(hd, group);
    // Causal rows get longer down the batch, so contiguous ranges would leave the first thread
    // idle; items are dealt round-robin instead.
    auto work = [&](int t) {
      float* scr = scratch(t, scratch_floats);
      for (int64_t it = t; it < items; it += threads_) {
        const int s = int(it % splits);
        const int64_t ri = it / splits;
        const int i = int(ri / p.n_kv_heads);
        const int kvh = int(ri % p.n_kv_heads);
        const int g0 = group * s / splits, g1 = group * (s + 1) / splits;
        if (g0 >= g1) continue;
        const int pos = p.start_pos + i;
        const size_t off = size_t(i) * q_stride + (size_t(kvh) * group + g0) * hd;
        const size_t head_off = p.kv.bytes(size_t(kvh) * p.capacity * hd);
        AttnRow a;
        a.q = p.q + off;
        a.n_q = g1 - g0;
        a.head_dim = hd;
        a.k = static_cast<const char*>(p.k_cache) + head_off;
        a.v = static_cast<const char*>(p.v_cache) + head_off;
        a.kv = p.kv;
        a.first = p.sliding_window > 0 ? std::max(0, pos - p.sliding_window + 1) : 0;
        a.last = pos;
        a.score_divisor = p.score_divisor;
        a.score_scale = p.score_scale;
        a.softcap = p.softcap;
        a.sinks = p.sinks != nullptr ? p.sinks + size_t(kvh) * group + g0 : nullptr;
        a.act = p.act;
        a.out = p.out + off;
        a.scratch = scr;
        ops_.attn_row(a);
      }
    };
    if (threads_ > 1 && items > 1)
      pool_->run_on_all(work);
    else
      work(0);
  }

  void rmsnorm(const float* x, int M, int dim, const float* w, float eps, DType act, float* y) override {
    rows(M, [&](long m) { ops_.rmsnorm_row(x + size_t(m) * dim, dim, w, eps, act, y + size_t(m) * dim); });
  }
  void rmsnorm_fp32_gain(const float* x, int M, int dim, const float* g, float eps, DType act, float* y) override {
    rows(M, [&](long m) { ops_.rmsnorm_row_fp32_gain(x + size_t(m) * dim, dim, g, eps, act, y + size_t(m) * dim); });
  }

  void rope(float* x, int M, int n_heads, const int* row_pos, const RopeTable& table, DType act,
            RopePairs pairs) override {
    CpuKernels::rope(x, M, n_heads, row_pos, ops_.portable_rope ? table.portable() : table, act, pairs);
  }
  void silu_mul(float* gate, const float* up, size_t n, DType act) override {
    if (ops_.silu_mul != nullptr) return ops_.silu_mul(gate, up, n, act);
    CpuKernels::silu_mul(gate, up, n, act);
  }
  void gelu_tanh_mul(float* gate, const float* up, size_t n, DType act) override {
    if (ops_.gelu_tanh_mul != nullptr) return ops_.gelu_tanh_mul(gate, up, n, act);
    CpuKernels::gelu_tanh_mul(gate, up, n, act);
  }
  void clamped_swiglu(float* gate, const float* up, size_t n, float alpha, float limit, DType act) override {
    if (ops_.clamped_swiglu != nullptr) return ops_.clamped_swiglu(gate, up, n, alpha, limit, act);
    CpuKernels::clamped_swiglu(gate, up, n, alpha, limit, act);
  }
  void softcap(float* x, size_t n, float cap, DType act) override {
    if (ops_.softcap != nullptr) return ops_.softcap(x, n, cap, act);
    CpuKernels::softcap(x, n, cap, act);
  }

 private:
  template <class F>
  void rows(int M, F&& f) {
    auto range = [&](long b, long e, int) {
      for (long m = b; m < e; ++m) f(m);
    };
    // One row is a few microseconds of work: cheaper than waking the other threads.
    if (threads_ > 1 && M >= 2 * threads_)
      pool_->parallel_for(M, range);
    else
      range(0, M, 0);
  }

  // Per-thread scratch and the shared packed x, grown on demand and reused so steady-state
  // decoding does not allocate.
  float* scratch(int t, size_t floats) { return grow(scratch_[size_t(t)], floats); }
  static float* grow(AlignedBuffer& b, size_t floats) {
    if (b.size() < floats * sizeof(float)) b = AlignedBuffer(floats * sizeof(float));
    return b.as<float>();
  }

  KernelPolicy policy_;
  const FixedOrderSimd& ops_;
  ThreadPool* pool_;
  int threads_;
  std::vector<AlignedBuffer> scratch_;
  std::vector<AlignedBuffer> dequant_;  // per thread: dequantised rows of a quantised W
  AlignedBuffer packed_x_;
};

}  // namespace

std::unique_ptr<Kernels> make_invariant_kernels(ThreadPool* pool) {
  return std::make_unique<FixedOrderKernels>(KernelPolicy::Invariant, isimd::ops(), pool);
}
std::unique_ptr<Kernels> make_portable_kernels(ThreadPool* pool) {
  return std::make_unique<FixedOrderKernels>(KernelPolicy::Portable, psimd::ops(), pool);
}

}  // namespace kvp
