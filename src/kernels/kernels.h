#pragma once
// The reduction kernels, behind one interface per kernel policy (DESIGN.md §4). The model calls
// only this interface; which summation order a run uses is decided by the policy object it holds.
//  reference: scalar, every reduction strictly in index order (the oracle);
//  standard:  what fast stacks do — SIMD, threads, shape-dependent algorithms (split-K GEMV for
//             decode, register-blocked GEMM for prefill, split-KV decode attention, tiled prefill attention);
//  invariant: one fixed order per output element regardless of M, cached keys, batch and threads
//             (fixed_order_kernels.cpp, orders specified in invariant_simd.h);
//  portable:  invariant's guarantees, and orders that do not depend on the SIMD width either, with
//             its own exp/tanh/cos/sin: the same bits on every machine (portable_simd.h).
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/kv_type.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/elementwise.h"

namespace kvp {

enum class KernelPolicy { Reference, Standard, Invariant, Portable };
std::string policy_name(KernelPolicy p);
KernelPolicy parse_policy(const std::string& s);

struct AttentionParams {
  int n_rows = 0;       // M new query rows, at positions start_pos .. start_pos+M-1
  int start_pos = 0;
  int n_heads = 0;
  int n_kv_heads = 0;   // query head h reads kv head h / (n_heads / n_kv_heads)
  int head_dim = 0;
  const float* q = nullptr;   // [M, n_heads*head_dim], values representable in `act`
  // This layer's cache: [n_kv_heads][capacity][head_dim] in kv. Positions >= start_pos+M
  // may hold anything (NaN included) and must never be read.
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  KvType kv;
  int capacity = 0;
  float* out = nullptr;       // [M, n_heads*head_dim]; written unrounded, the caller rounds to `act`
  // score = (q.k) / score_divisor (HF Llama's eager order: round(q.k) then round(/sqrt(d))).
  float score_divisor = 1.0f;
  // Gemma-2's order instead (when > 0): score = round(round(q.k) * score_scale), score_scale =
  // query_pre_attn_scalar^-0.5 as an fp32 value (PyTorch's opmath for tensor * Python float).
  float score_scale = 0.0f;
  // Gemma-2 attention-logit soft-capping (when > 0), after the scaling and before the mask:
  // s = round(round(tanh(round(s / cap))) * cap), as Gemma2Attention's three eager ops.
  float softcap = 0.0f;
  int sliding_window = 0;     // 0: full causal; W: query i sees keys j with i-W < j <= i
  // GPT-OSS's attention sinks (host, [n_heads], values of `act`; null: none): head h's sink is one
  // more logit in every row's softmax, with no value, so the probabilities of the keys sum to less
  // than 1. The online-softmax policies start each row's state at it (max = sink, sum = 1), so a
  // row's result does not depend on how its keys were cut.
  const float* sinks = nullptr;
  DType act = DType::F32;     // compute dtype: scores and probabilities are rounded to it where HF does
};

// The score of one key from its fp32 dot product, rounded where HF's eager code rounds (shared by
// every policy so their semantics agree up to summation order).
inline float attention_score(float dot, float divisor, float scale, float softcap, DType act) {
  float s = round_to(act, dot);
  s = scale > 0.0f ? round_to(act, s * scale) : round_to(act, s / divisor);
  if (softcap > 0.0f) s = round_to(act, round_to(act, std::tanh(round_to(act, s / softcap))) * softcap);
  return s;
}

// One row's online-softmax state (running max m, running sum l) for n query heads before their first
// key: empty, or with their sinks (AttentionParams::sinks, n values) folded in as keys of weight
// exp(sink - m) and no value. Every online-softmax policy starts from it.
inline void start_softmax_state(const float* sinks, int n, float* m, float* l) {
  for (int g = 0; g < n; ++g) {
    m[g] = sinks != nullptr ? sinks[g] : -std::numeric_limits<float>::infinity();
    l[g] = sinks != nullptr ? 1.0f : 0.0f;
  }
}

// One member of Kernels::matmul_group.
struct MatmulOut {
  const TensorView* W = nullptr;
  float* y = nullptr;
};

// One sequence's K or V rows written into its cache for one layer (DESIGN.md §5).
struct KvWrite {
  void* cache = nullptr;      // the layer's [n_kv_heads][capacity][head_dim] K or V, on the kernels' device
  KvType kv;
  int capacity = 0, n_kv_heads = 0, head_dim = 0;
  const float* rows = nullptr;  // [M, n_kv_heads*head_dim] values in the compute dtype, fp32 storage
  int n_rows = 0;
  int start_pos = 0;
};

// The first NaN/Inf a rounding point met, reported after the pass (devices that check once per
// step rather than after every operation).
struct NonFiniteHit {
  int slot = 0;     // the rounding point's number within the pass
  long index = 0;   // element index within the rounded span
  float value = 0;  // NaN, +Inf or -Inf
};

// Every operation of the forward pass (model/llama_forward.cpp), on buffers that live on the
// kernels' device: pointers given to these functions are device pointers unless a comment says
// "host". The pass itself is written once, against this interface, for every device and policy;
// a policy decides the summation orders, a device where the work runs.
class Kernels {
 public:
  virtual ~Kernels() = default;
  virtual KernelPolicy policy() const = 0;
  virtual Device device() const = 0;

  // --- Reductions: the policy's choice of order. ---
  // y[M, N] = x[M, K] . W[N, K]^T with fp32 accumulation; W in F32/F16/BF16. y is not rounded.
  // W is a host view of the model's weights; a device keeps its own copy, made on first use.
  // `act`: x holds values of this dtype (the pass's compute dtype), so a device may multiply in it
  // without changing x. W may be stored narrower than act when that is exact (fp16/bf16 weights of
  // an fp32 pass, model/weights.cpp); the CPU kernels widen W exactly either way.
  virtual void matmul(const float* x, int M, const TensorView& W, DType act, float* y) = 0;
  // Several matmuls of one x (q/k/v, gate/up): y_i = x . W_i^T. The pass lays the y_i out one
  // after another ([M, N_0] then [M, N_1] ...), so that for M = 1 they form one row. A device may
  // run the group as one launch over the weights side by side; under the fixed-order policies
  // (invariant, portable) the bits are those of the separate calls, while under `standard` the
  // wider GEMM may take another algorithm, as the fused QKV projection of serving stacks does.
  virtual void matmul_group(const float* x, int M, const MatmulOut* outs, int n, DType act) {
    for (int i = 0; i < n; ++i) matmul(x, M, *outs[i].W, act, outs[i].y);
  }
  // Causal GQA attention of M new rows against the cache (which already holds their own K/V).
  virtual void attention(const AttentionParams& p) = 0;
  // The attention of several sequences of one pass (one layer), each against its own cache.
  virtual void attention_batch(const AttentionParams* p, int n) = 0;
  // Per row: x * rsqrt(mean(x^2) + eps) in fp32, rounded to act, times w, rounded to act (HF Llama).
  // w (and g below): the model's gains in host memory, like W above.
  virtual void rmsnorm(const float* x, int M, int dim, const float* w, float eps, DType act, float* y) = 0;
  // Gemma-2: x * rsqrt(mean(x^2) + eps) * g all in fp32, one rounding to act (Gemma2RMSNorm, where
  // g = 1 + w is computed in fp32 by the caller).
  virtual void rmsnorm_fp32_gain(const float* x, int M, int dim, const float* g, float eps, DType act,
                                 float* y) = 0;

  // --- Element-wise operations (no reductions: every policy of a device shares them). ---
  // x[m] = row tokens[m] (host ids) of the embedding table, as fp32.
  virtual void embed(const TensorView& table, const int* tokens, int M, float* x) = 0;
  // y[m, n] += b[n] in fp32 (F.linear's bias joins the accumulator before the rounding).
  virtual void add_bias(float* y, int M, const TensorView& b) = 0;
  // apply_rope (elementwise.h) on rows x[M, n_heads*head_dim], row m by table row row_pos[m] (host):
  // its position, or for longrope's long set RopeTable::long_rows() past it.
  virtual void rope(float* x, int M, int n_heads, const int* row_pos, const RopeTable& table, DType act,
                    RopePairs pairs) = 0;
  virtual void silu_mul(float* gate, const float* up, size_t n, DType act) = 0;
  virtual void gelu_tanh_mul(float* gate, const float* up, size_t n, DType act) = 0;
  virtual void clamped_swiglu(float* gate, const float* up, size_t n, float alpha, float limit, DType act) = 0;
  virtual void softcap(float* x, size_t n, float cap, DType act) = 0;
  virtual void scale(float* x, size_t n, float s, DType act, ScaleBy by) = 0;  // scale_inplace
  virtual void add(float* x, const float* y, size_t n, DType act) = 0;
  virtual void copy(float* dst, const float* src, size_t n) = 0;
  // K/V rows into caches, encoded in each cache's KV type.
  virtual void kv_write(const KvWrite* w, int n) = 0;

  // --- Rounding points. ---
  // Rounds n values in place to t (RNE). Returns the index of the first NaN/Inf, or -1 when there
  // is none or when the device reports them later through pending_nonfinite() under `slot`.
  virtual long round_check(DType t, float* x, size_t n, int slot) = 0;
  // The NaN/Inf met since the last call, one per slot, in slot order (empty on the CPU, which
  // reports them as round_check returns).
  virtual std::vector<NonFiniteHit> pending_nonfinite() = 0;

  // A hint: the next call reads [x, x + n) for the last time before something writes it again, so
  // a device may leave out stores that only later readers would see (CUDA: the rounded values of
  // a rounding point it folds into that call; the fp32 values of an output whose 16-bit copy is
  // what that call's GEMM reads; ~2.4 GB a layer in the GSM8K study's 7B cache-OFF step). The
  // results are the same.
  virtual void last_read(const float* x, size_t n) {
    (void)x;
    (void)n;
  }
  // A hint: the next matmul (or matmul_group member) whose output is exactly [y, y + n) is
  // followed by a round_check of exactly that range to the pass's compute dtype before anything
  // else reads or writes it (no bias between), so a device may have its GEMM store the output in
  // that dtype, rounded once by the GEMM's own epilogue, as GPU stacks run it (CUDA `standard`,
  // $KVPARITY_CUDA_GEMM_OUT16=1: half the bytes of every projection written and read; cuBLAS
  // picks its algorithm by output type too, so its bits are cuBLAS's for that type). Hints not
  // taken by the next matmul call are forgotten.
  virtual void rounded_output(const float* y, size_t n) {
    (void)y;
    (void)n;
  }

  // --- Passes. ---
  // The operations from here to the next to_host form one forward pass. A device may collect them
  // and replay an identical earlier pass as one unit (CUDA graphs); the results are the same.
  virtual void begin_pass() {}

  // --- Memory. ---
  // Blocking copies ordered after the operations queued so far.
  virtual void to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void to_device(void* dst, const void* host_src, size_t bytes) = 0;
};

// `pool` may be null (single thread); the kernels do not own it. Device::Cuda needs a build with
// CUDA and a usable GPU (errors name what is missing). weights_owner: what the weights passed to
// the kernels belong to (an engine's model), or null. A device that copies weights shares the
// copies among the kernels of one owner alive together; the owner outlives them, and the weights'
// bytes do not change while it lives. The CPU reads the weights where they are.
std::unique_ptr<Kernels> make_kernels(KernelPolicy policy, ThreadPool* pool, Device device = Device::Cpu,
                                      const void* weights_owner = nullptr);

}  // namespace kvp
