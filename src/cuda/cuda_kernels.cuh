#pragma once
// The Kernels interface on a CUDA GPU (DESIGN.md §4a). The `standard` policy does what GPU stacks do:
//  matmul     cuBLAS GemmEx, fp32 accumulation (CUBLAS_COMPUTE_32F; fp32 weights stay IEEE fp32,
//             no TF32), cuBLAS's own shape-dependent choice of algorithm (split-K included).
//  attention  FlashAttention-style prefill and length-dependent split-KV decode (cuda_attention.cu).
//  the rest   element-wise kernels with the CPU's rounding points (cuda_elementwise.cu).
// The `portable` policy swaps in the kernels that compute the CPU portable kernels' bits
// (cuda_portable.cu, cuda_portable_attention.cu): matmul, attention, RMSNorm, the activations with
// the policy's own exp/tanh, and RoPE from the table's libm-free twin. Everything else is shared:
// the element-wise kernels are single correctly rounded operations (the backend builds with
// --fmad=false), the same bits as the CPU's.
// The `invariant` policy runs the portable matmuls and attention too (invariant by construction),
// except that fp16/bf16 passes run their matmuls on tensor cores in one K-only order
// (cuda_invariant_gemm.cu) and, with a KV cache of their dtype, every attention row, decode steps
// included, through the tensor-core flash kernel (cuda_attention_mma_kernel.cuh); its RMSNorm
// (one block a row, an order fixed by the width), element-wise ops and RoPE table are standard's.
// Weights are uploaded once, on first use, in the dtype the model holds them in (the compute
// dtype; quantised matrices as their exact fp32 values, as the CPU computes with them; the fp16/
// bf16 file bytes an fp32 run keeps on the host, widened to fp32 for that run's cuBLAS GEMMs, and
// kept narrow for the fixed-order kernels, which widen them in registers as the CPU does). Small
// per-call data (token ids, positions, per-sequence descriptors) goes through a pinned staging
// ring (cuda_upload_ring.cuh), so a pass never waits for the GPU until its logits are copied back.
// Every launch goes through PassGraphs (cuda_pass_graphs.cuh) with the signature of its arguments,
// so that a pass identical to an earlier one (a decode step) is replayed as a CUDA graph; rounding
// points and cuBLAS input conversions fold into neighbouring kernels where the bits allow
// (cuda_fusion.cuh), since a replayed decode step costs about its number of kernel nodes.
// The class is here so that its parts can live in files of their own: the rotations and cache
// writes in cuda_kernels_rope_kv.cu, attention's plan and launches in cuda_kernels_attention.cu,
// make_kernels in cuda_kernels.cu.
#include <algorithm>
#include <array>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "cuda/cuda_attention_plan.h"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_device_weights.cuh"
#include "cuda/cuda_fusion.cuh"
#include "cuda/cuda_gemm_launches.cuh"
#include "cuda/cuda_nonfinite_hits.cuh"
#include "cuda/cuda_op_timer.cuh"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_pass_graphs.cuh"
#include "cuda/cuda_rope_table.cuh"
#include "cuda/cuda_runtime_api.h"
#include "cuda/cuda_upload_ring.cuh"

namespace kvp::cuda {

class CudaKernels final : public Kernels {
 public:
  // owner: kernels made for one owner share the device copies of its weights (make_kernels).
  CudaKernels(KernelPolicy policy, const void* owner)
      : policy_(policy),
        fusion_([this](uint64_t sig, std::function<void()> f) { graphs_.submit(sig, std::move(f)); },
                &launch_round_checks),
        gemms_(policy, graphs_),
        weights_(shared_device_weights(owner)),
        graphs_(stream()) {
    graphs_.set_enabled(pass_graphs_on() && !op_timing_on());
    fusion_.set_one_by_one(op_timing_on() || !launch_fusion_on());    // timed operations launch one by one
    // A bad $KVPARITY_CUDA_* value is refused now, not at a launch inside a pass.
    if (policy_ == KernelPolicy::Invariant) invariant_gemm_kernel();
    programmatic_launch_on();
    standard_gemv_on();
    gemm_out16_on();
    group_launches_on();
    decode_split_keys();
    gemm_tile_group();
    forced_attention_stages();
    decode_whole_rows();
  }
  ~CudaKernels() override { cudaStreamSynchronize(stream()); }

  KernelPolicy policy() const override { return policy_; }
  Device device() const override { return Device::Cuda; }

  void matmul(const float* x, int M, const TensorView& W, DType act, float* y) override {
    matmul_one(x, M, W, act, y);
    rounded_.clear();
  }

 private:
  // One matmul, its output in 16 bits where a rounded_output hint names it (the caller forgets
  // the hints after it: matmul after this one, a group after all its members).
  void matmul_one(const float* x, int M, const TensorView& W, DType act, float* y) {
    OpSpan span("matmul");
    const int N = int(W.rows()), K = int(W.cols());
    // The 16-bit input first: the launch still to come that rounds x may write it. fp16/bf16
    // weights of an fp32 pass (kept narrow on the host, where the fixed-order kernels widen them in
    // registers, as the CPU does): an fp32 copy for cuBLAS, since x holds fp32 values that a narrow
    // GEMM input would round. Tensor cores (invariant) where x and W share a 16-bit dtype.
    const Weight* wc = nullptr;
    const void* xa = x;
    bool tensor_cores = false;
    if (M > 0 && N > 0 && K > 0) {
      wc = &(act == DType::F32 && !fixed_order() ? weights_->f32(W) : weights_->get(W));
      tensor_cores = on_tensor_cores(act, wc->store);
      if (fixed_order() ? tensor_cores : wc->store != kF32) xa = converted(x, size_t(M) * K, wc->store);
    }
    if (M <= 0 || N <= 0) return release_held();
    gemm_waits(x, size_t(M) * std::max(K, 0), y, size_t(M) * N);
    if (K == 0) {
      const size_t bytes = size_t(M) * N * sizeof(float);
      graphs_.submit(signature(kMemset, y, bytes), [=] { KVP_CUDA_CHECK(cudaMemsetAsync(y, 0, bytes, stream())); });
      return;
    }
    const size_t n = size_t(M) * N;
    void* y16 = out16_takes(y, n, act, wc->store, tensor_cores, xa, M, wc->p, K) ? out16_slot(n) : nullptr;
    gemms_.gemm(x, xa, M, wc->p, wc->store, K, N, y, tensor_cores, y16);
    if (y16 != nullptr) fusion_.defer_source(y, n, store_of(act), y16);
  }

 public:
  // One launch for the group where a kernel can store the outputs apart: the invariant tensor-core
  // GEMM (any M; the same bits as the members alone), cuBLAS for a single row (the members' rows
  // adjacent: one row of the product). Elsewhere one matmul each, from the same device copies.
  void matmul_group(const float* x, int M, const MatmulOut* outs, int n, DType act) override {
    const TensorView* Ws[3] = {};
    int N = 0;
    bool adjacent = n >= 2 && n <= 3 && M > 0 && group_launches_on();
    for (int i = 0; adjacent && i < n; ++i) {
      Ws[i] = outs[i].W;
      adjacent = Ws[i]->rows() > 0 && (i == 0 || outs[i].y == outs[i - 1].y + size_t(M) * Ws[i - 1]->rows());
      N += int(Ws[i]->rows());
    }
    const int K = adjacent ? int(Ws[0]->cols()) : 0;
    const int store = adjacent ? store_of(Ws[0]->dtype) : kF32;
    // The weights go up as one block on first use whatever M is (a prompt's pass comes first);
    // cuBLAS then takes the group as one launch at M = 1 only.
    const bool groupable =
        K > 0 && (on_tensor_cores(act, store) || (!fixed_order() && (act != DType::F32 || store == kF32)));
    const void* wg = groupable ? weights_->group(Ws, n) : nullptr;
    if (wg == nullptr || (!fixed_order() && M != 1)) {
      for (int i = 0; i < n; ++i) matmul_one(x, M, *outs[i].W, act, outs[i].y);
      rounded_.clear();
      return;
    }
    OpSpan span("matmul");
    const void* xa = store != kF32 ? converted(x, size_t(M) * K, store) : x;
    gemm_waits(x, size_t(M) * K, outs[0].y, size_t(M) * N);
    GemmOut y(outs[0].y);
    if (fixed_order()) {
      y.end0 = int(Ws[0]->rows());
      y.y1 = outs[1].y;
      if (n == 3) y.end1 = y.end0 + int(Ws[1]->rows()), y.y2 = outs[2].y;
    }
    // One cuBLAS row for the members side by side: their 16-bit outputs side by side too, each
    // member pending in its own part.
    const bool tc = on_tensor_cores(act, store);
    bool out16 = true;
    for (int i = 0; i < n; ++i)
      out16 = out16 && out16_takes(outs[i].y, size_t(M) * Ws[i]->rows(), act, store, tc, xa, M, wg, K);
    auto* y16 = out16 ? static_cast<uint16_t*>(out16_slot(size_t(M) * N)) : nullptr;
    rounded_.clear();
    gemms_.gemm(x, xa, M, wg, store, K, N, y, tc, y16);
    for (int i = 0, at = 0; y16 != nullptr && i < n; at += int(Ws[i]->rows()), ++i)
      fusion_.defer_source(outs[i].y, size_t(M) * Ws[i]->rows(), store_of(act), y16 + at);
  }

  void attention(const AttentionParams& p) override { attention_batch(&p, 1); }

  // Plans the slices' rows and decode steps by policy and launches them (cuda_kernels_attention.cu).
  void attention_batch(const AttentionParams* p, int n) override;

  void rmsnorm(const float* x, int M, int dim, const float* w, float eps, DType act, float* y) override {
    norm(x, M, dim, w, eps, act, false, y);
  }
  void rmsnorm_fp32_gain(const float* x, int M, int dim, const float* g, float eps, DType act, float* y) override {
    norm(x, M, dim, g, eps, act, true, y);
  }

  void embed(const TensorView& table, const int* tokens, int M, float* x) override {
    OpSpan span("embed");
    fusion_.flush();
    const Weight& w = weights_->get(table);
    const void* tp = w.p;
    const int store = w.store, dim = int(table.cols());
    wrote(x, size_t(M) * dim);
    const int* ids = upload(kTokenIds, tokens, size_t(M));
    graphs_.submit(signature(kEmbed, tp, store, ids, M, dim, x), [=] { launch_embed(tp, store, ids, M, dim, x); });
  }

  void add_bias(float* y, int M, const TensorView& b) override {
    OpSpan span("add_bias");
    release_held();
    const Weight& w = weights_->get(b);
    if (w.store != kF32) fail_input("bias '" + b.name + "' is not stored as fp32");
    const auto* bp = static_cast<const float*>(w.p);
    const int N = int(b.numel());
    fusion_.settle(y, size_t(M) * N);
    wrote(y, size_t(M) * N);
    graphs_.submit(signature(kBias, y, M, N, bp), [=] { launch_add_bias(y, M, N, bp); });
  }

  void rope(float* x, int M, int n_heads, const int* row_pos, const RopeTable& table, DType act,
            RopePairs pairs) override;

  void silu_mul(float* gate, const float* up, size_t n, DType act) override { gated(gate, up, n, act, {}); }
  void gelu_tanh_mul(float* gate, const float* up, size_t n, DType act) override {
    gated(gate, up, n, act, {GatedAct::kGeluTanh});
  }
  void clamped_swiglu(float* gate, const float* up, size_t n, float alpha, float limit, DType act) override {
    gated(gate, up, n, act, {GatedAct::kClampedSwiglu, alpha, limit});
  }
  void softcap(float* x, size_t n, float cap, DType act) override {
    OpSpan span("softcap");
    fusion_.flush();
    const int a = store_of(act);
    wrote(x, n);
    const bool pt = portable();
    if (n)
      graphs_.submit(signature(kSoftcap, x, n, cap, a),
                     [=] { pt ? launch_portable_softcap(x, n, cap, a) : launch_softcap(x, n, cap, a); });
  }
  void scale(float* x, size_t n, float s, DType act, ScaleBy by) override {
    OpSpan span("scale");
    fusion_.flush();
    const int a = store_of(act);
    const float sr = by == ScaleBy::Act ? round_to(act, s) : s;
    wrote(x, n);
    if (n) graphs_.submit(signature(kScale, x, n, sr, a), [=] { launch_scale(x, n, sr, a); });
  }
  void add(float* x, const float* y, size_t n, DType act) override {
    OpSpan span("add");
    release_held();
    const int a = store_of(act);
    // y's pending rounding point (the projection's): rounded as the kernel reads it, unless y
    // overlaps x otherwise than exactly. In place (x == y) the kernel reads back what the round
    // wrote, so the write-back stays.
    InRound in;
    if (x == y)
      in = fusion_.take(y, n, a);
    else if (!overlap(x, n, y, n))
      in = take_input(y, n, a);
    fusion_.settle(x, n);
    fusion_.settle(y, n);
    wrote(x, n);
    auto* yw = const_cast<float*>(y);  // written back only by its pending round: an activation buffer
    add_held_ = AddHeld{x, yw, n, a, in};
    if (n)
      fusion_.hold(
          x, n, a, mix_in(signature(kAdd, x, y, n, a), in),
          [=](NonFiniteSlot c, OutCopy) { launch_add(x, yw, n, a, c, in); }, false, kAddHeld);
  }
  void copy(float* dst, const float* src, size_t n) override {
    OpSpan span("copy");
    fusion_.flush();
    wrote(dst, n);
    if (n)
      graphs_.submit(signature(kCopy, dst, src, n), [=] {
        KVP_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream()));
      });
  }

  void kv_write(const KvWrite* w, int n) override;

  long round_check(DType t, float* x, size_t n, int slot) override {
    OpSpan span("round_check");
    if (n == 0) return -1;
    if (!hits_.holds(slot)) {
      fusion_.flush();  // launches still to come name the hits buffer that grows
      end_collecting(true);
      hits_.grow(slot);
    }
    const NonFiniteSlot chk = hits_.at(slot);
    const int a = store_of(t);
    wrote(x, n);
    // The held operation already rounds its output to `a`: it becomes this rounding point.
    if (fusion_.fuse_check(x, n, a, chk)) return -1;
    // A GEMM output already rounded to `a` in its 16-bit source: this point is its check.
    if (fusion_.check_source(x, n, a, chk)) return -1;
    release_held();
    fusion_.settle(x, n);
    fusion_.defer_round(x, n, a, chk);
    return -1;
  }

  std::vector<NonFiniteHit> pending_nonfinite() override {
    fusion_.flush();
    end_collecting(false);
    pass_open_ = false;
    return hits_.read();
  }

  void last_read(const float* x, size_t n) override {
    if (skip_dead_writes_on()) dead_ = Range{x, n};
  }
  void rounded_output(const float* y, size_t n) override {
    if (rounded_.size() < 8) rounded_.push_back(Range{y, n});
  }

  void begin_pass() override {
    fusion_.flush();
    dead_ = Range{};
    rounded_.clear();
    // A pass that ended early (an error thrown mid-pass) leaves its kernels' reports behind; they
    // must not be read as this pass's, under its slot names.
    // (Its launches still collected are dropped with the collection, below.)
    if (pass_open_) hits_.read();
    pass_open_ = true;
    ring_.begin_pass();
    graphs_.begin_pass();
  }

  void to_host(void* host_dst, const void* src, size_t bytes) override {
    fusion_.flush();
    end_collecting(false);
    KVP_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream()));
    KVP_CUDA_CHECK(cudaStreamSynchronize(stream()));
    ring_.consumed();
  }
  void to_device(void* dst, const void* host_src, size_t bytes) override {
    fusion_.flush();
    wrote(dst, bytes / sizeof(float));
    end_collecting(false);
    KVP_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream()));
    KVP_CUDA_CHECK(cudaStreamSynchronize(stream()));
  }

 private:
  // The decode launches' partial states: (m, l, o) for `width` slots of each step's heads (the
  // standard split kernel's splits, invariant's chunks).
  float* part_mem(size_t steps, const AttentionParams& a, int width) {
    const size_t floats = steps * size_t(a.n_heads) * width * (a.head_dim + 2);
    return static_cast<float*>(grow(parts_, floats * sizeof(float)));
  }
  // Their counts (cuda_ops.h): a zero a (step, head), which every launch leaves as it found it (a
  // launch stops halfway only on a device fault, after which the context is lost anyway).
  unsigned* count_mem(size_t steps, int n_heads) {
    const size_t bytes = steps * size_t(n_heads) * sizeof(unsigned);
    if (bytes > counts_.bytes) {
      grow(counts_, bytes);
      KVP_CUDA_CHECK(cudaMemsetAsync(counts_.p, 0, counts_.bytes, stream()));
    }
    return static_cast<unsigned*>(counts_.p);
  }
  // An attention launch over `descs` (the plan's prefill rows or its decode steps; `beside`, the
  // other kind), held as the operation that rounds the attention output when its rows are that
  // whole output: the output's rounding point and o_proj's 16-bit copy ride in it (Fusion::hold).
  void submit_attention(uint64_t sig, const std::vector<AttnDesc>& descs, const std::vector<AttnDesc>& beside,
                        const AttnShape& s, std::function<void(const AttnStore&)> launch) {
    const size_t width = size_t(s.n_heads) * s.head_dim;  // a row of the attention output
    const float* base = output_block(descs, beside, width);
    if (base == nullptr) return graphs_.submit(sig, [launch] { launch(AttnStore{}); });
    size_t rows = 0;
    for (const AttnDesc& d : descs) rows += size_t(d.n_rows);
    sig = PassGraphs::mix(sig, uint64_t(reinterpret_cast<uintptr_t>(base)));
    const int act = s.act;
    fusion_.hold(
        base, rows * width, act, sig,
        [launch, act, base](NonFiniteSlot c, OutCopy copy) {
          launch(AttnStore{c.hits != nullptr ? act : -1, c, copy, base});
        },
        true);
  }
  // A buffer of at least n bytes, grown by grown_size's steps (a cache-OFF pass is a row a
  // sequence longer each step). Growing frees the old one, which launches collected but not yet
  // run may name: they run first.
  void* grow(Block& b, size_t n) {
    if (n <= b.bytes) return b.p;
    end_collecting(true);
    if (&b == &xconv_) conv_ = Converted{};
    return b.ensure(grown_size(b.bytes, n));
  }

  void norm(const float* x, int M, int dim, const float* w, float eps, DType act, bool fp32_gain, float* y) {
    OpSpan span("rmsnorm");
    // invariant: the standard kernel (one block a row, its order fixed by dim) and its fusions.
    const bool pt = portable();
    const size_t n = size_t(std::max(M, 0)) * dim;
    // The held residual add whose output this normalises, its check attached: one kernel.
    AddIn add{};
    if (!pt && add_held_.joins(x, n, y) && fusion_.take_checked(kAddHeld, &add.chk))
      add = AddIn{add_held_.y, add_held_.act, add.chk, add_held_.in};
    fusion_.flush();
    if (M <= 0) return;
    const float* g = weights_->vector(w, dim);
    const int a = store_of(act);
    wrote(y, n);
    const uint64_t sig =
        PassGraphs::mix(signature(kNorm, x, M, dim, g, eps, a, fp32_gain, y),
                        mix_in(signature(kAdd, add.y, add.act, add.chk.hits, add.chk.slot, add.chk.any), add.y_in));
    fusion_.hold(
        y, n, a, sig,
        [=](NonFiniteSlot c, OutCopy cp) {
          pt ? launch_portable_rmsnorm(x, M, dim, g, eps, a, fp32_gain, y, c)
             : launch_rmsnorm(x, M, dim, g, eps, a, fp32_gain, y, c, cp, add);
        },
        !pt);
  }

  // x (n values of the compute dtype in fp32 storage) in the 16-bit storage type `store`: an exact
  // conversion. q/k/v (and gate/up) read one input: converted once while nothing writes it. Written
  // by the launch still to come that rounds x, if there is one.
  const void* converted(const float* x, size_t n, int store) {
    // last_read's range: the GEMM reads the copy alone, so the launch that writes it may leave x's
    // fp32 values out (the copy stays valid while nothing writes x, and nothing reads x before).
    const bool only = last_read_of(x, n);
    if (conv_.x != x || conv_.n != n || conv_.store != store) {
      void* xs = grow(xconv_, n * 2);
      if (!fusion_.fuse_copy(x, n, store, xs, only)) {
        release_held();
        fusion_.settle(x, n);
        graphs_.submit(signature(kConvert, x, n, xs, store), [=] { launch_to_storage(x, n, xs, store); });
      }
      conv_ = Converted{x, n, store};
    }
    return xconv_.p;
  }

  // The gated activations (GatedAct): one element-wise kernel each, which takes gate's and up's
  // pending rounding points (the projections', or their biases') and is held as the operation
  // that rounds its output.
  void gated(float* gate, const float* up, size_t n, DType act, GatedAct how) {
    OpSpan span("gated_act");
    release_held();
    const int a = store_of(act);
    const bool pt = portable();
    // gate's and up's pending rounding points (the projections'): rounded as the kernel reads them.
    InRound gin, uin;
    if (!pt && !overlap(gate, n, up, n)) {
      gin = fusion_.take(gate, n, a);
      gin.write_back = !skip_dead_writes_on();  // else the kernel stores its result over it
      uin = take_input(up, n, a);
    }
    fusion_.settle(gate, n);
    fusion_.settle(up, n);
    wrote(gate, n);
    auto* uw = const_cast<float*>(up);  // written back only by its pending round: an activation buffer
    if (n)
      fusion_.hold(
          gate, n, a, mix_in(mix_in(signature(kGated, gate, up, n, a, how), gin), uin),
          [=](NonFiniteSlot c, OutCopy cp) {
            pt ? launch_portable_gated(gate, up, n, a, how, c) : launch_gated(gate, uw, n, a, how, c, gin, uin, cp);
          },
          !pt);
  }

  void release_held() { fusion_.release(); }

  // What a GEMM reading nx floats at x and writing ny at y is queued after: the held launch, x's
  // and y's pending rounding points; y's 16-bit copy is stale from here.
  void gemm_waits(const float* x, size_t nx, float* y, size_t ny) {
    release_held();
    fusion_.settle(x, nx);
    fusion_.settle(y, ny);
    wrote(y, ny);
  }

  // Whether the GEMM writing exactly y[n] writes it in act's 16-bit type (rounded_output): the
  // switch, a hint for y, `standard`'s cuBLAS GEMM (not the GEMV) of weights in that type.
  bool out16_takes(const float* y, size_t n, DType act, int store, bool tensor_cores, const void* xa, int M,
                   const void* wp, int K) const {
    if (act == DType::F32 || store != store_of(act) || !gemm_out16_on() ||
        !gemms_.on_cublas(xa, M, wp, store, K, tensor_cores))
      return false;
    for (const Range& r : rounded_)
      if (r.x == y && r.n == n) return true;
    return false;
  }
  // Room for a GEMM's n 16-bit outputs (the held launch released): the first of the buffers that
  // no pending round still reads (q, k and v are pending together; gate and up), grown if need
  // be; with none free, the first one's readers launched first.
  void* out16_slot(size_t n) {
    release_held();
    size_t s = 0;
    while (s + 1 < out16_.size() && fusion_.source_over(out16_[s].p, out16_[s].bytes)) ++s;
    fusion_.settle_source(out16_[s].p, out16_[s].bytes);
    return grow(out16_[s], n * sizeof(uint16_t));
  }

  bool on_tensor_cores(DType act, int store) const {
    return policy_ == KernelPolicy::Invariant && act != DType::F32 && store == store_of(act);
  }

  static uint64_t mix_in(uint64_t sig, const InRound& in) {
    if (in.act < 0) return sig;
    return PassGraphs::mix(sig, signature(kRound, in.act, in.chk.hits, in.chk.slot, in.chk.any, in.write_back, in.src));
  }

  // x's pending round taken by the kernel that reads x next (Fusion::take), not written back where
  // last_read said this is x's last read before it is written again.
  InRound take_input(const float* x, size_t n, int act) {
    InRound in = fusion_.take(x, n, act);
    if (last_read_of(x, n)) in.write_back = false;
    return in;
  }
  // Whether last_read named exactly [x, x + n); the range is forgotten once asked about.
  bool last_read_of(const float* x, size_t n) {
    if (dead_.x != x || dead_.n != n) return false;
    dead_ = Range{};
    return true;
  }

  // The rotations of q and k and the cache writes (cuda_kernels_rope_kv.cu).
  bool takes_rope(const std::vector<KvWriteDesc>& d, int heads, int hd);
  bool take_q16(std::vector<AttnDesc>& rows, const AttnShape& s);
  void launch_kv(const KvHeld& k, InRound in, const float* base, int first);
  void launch_rope_kv(const KvHeld& k, InRound in, const float* base, int first);

  // The fp16/bf16 copy of a matmul input in xconv_, valid until something writes the input.
  struct Converted {
    const float* x = nullptr;
    size_t n = 0;
    int store = -1;
  };
  void wrote(const void* p, size_t n_floats) {
    if (dead_.x != nullptr && overlap(dead_.x, dead_.n, p, n_floats)) dead_ = Range{};
    const auto* b = static_cast<const char*>(p);
    const auto* c = reinterpret_cast<const char*>(conv_.x);
    if (conv_.x != nullptr && b < c + conv_.n * sizeof(float) && c < b + n_floats * sizeof(float)) conv_ = Converted{};
  }

  static int kv_store(const KvType& kv) {
    if (!kv.is_dtype())
      fail_input("--kv-dtype " + kv.name() +
                 ": quantised KV caches are not available on CUDA yet (use fp32, fp16 or bf16, or --device cpu)");
    return store_of(kv.dtype());
  }

  void end_collecting(bool flush) { ring_.end_collecting(flush); }
  template <typename T>
  const T* upload(UploadRing::Kind kind, const T* host, size_t n) {
    return ring_.upload(kind, host, n);
  }
  static constexpr auto kTokenIds = UploadRing::kTokenIds, kPositions = UploadRing::kPositions,
                        kKvDescs = UploadRing::kKvDescs, kAttnPrefillDescs = UploadRing::kAttnPrefillDescs,
                        kAttnDecodeDescs = UploadRing::kAttnDecodeDescs;

  bool portable() const { return policy_ == KernelPolicy::Portable; }
  bool fixed_order() const { return policy_ == KernelPolicy::Portable || policy_ == KernelPolicy::Invariant; }

  KernelPolicy policy_;
  Fusion fusion_;
  GemmLaunches gemms_;
  std::shared_ptr<DeviceWeights> weights_;  // shared with the owner's other kernels
  Block xconv_, parts_, counts_, q16_;
  std::array<Block, 3> out16_;  // 16-bit GEMM outputs (out16_slot)
  DeviceRopeTable rope_table_;
  KvHeld kv_held_;
  RopeHeld rope_held_;
  RopeJob rope_q_{};
  std::vector<int> rope_pos_;  // the positions of the last rotation, on the host
  AddHeld add_held_;
  Converted conv_;
  struct Range {
    const float* x = nullptr;
    size_t n = 0;
  };
  // last_read's range, until a pending round of exactly that range is taken or anything writes it.
  Range dead_;
  std::vector<Range> rounded_;  // rounded_output's ranges, until the next matmul call
  NonFiniteHits hits_;
  bool pass_open_ = false;  // begin_pass seen, pending_nonfinite not yet
  // (Binds the reference only.) A held launch (q's rotation, K's cache write) reads an earlier
  // upload, which a restart rewrites: it is queued first.
  UploadRing ring_{graphs_, [this] { release_held(); }};
  PassGraphs graphs_;  // last: destroyed first, while the stream and buffers are still there
};

}  // namespace kvp::cuda
