#pragma once
// The forward pass of model/forward.h as one object per call: llama_forward.cpp runs its layers,
// forward_mlp.cpp its MLPs (the dense one and a sparse layer's experts). Internal to the model;
// the rounding points it materialises are listed in llama_forward.cpp.
#include <deque>
#include <vector>

#include "core/error.h"
#include "model/forward.h"

namespace kvp::detail {

// The rows of a pass are the slices' tokens, concatenated: matmuls, norms and element-wise ops
// see all M rows at once (rows never interact there), while RoPE, the cache writes and attention
// run per slice, each against its own sequence's cache and positions. Every operation goes
// through the kernels, on buffers of the kernels' device; the host sees only token ids going in,
// the logits coming out, and the rows hooks ask for.
class Pass {
 public:
  Pass(const Model& model, Kernels& kernels, Activations& act, const std::vector<SequenceSlice>& slices,
       const ForwardOptions& opts)
      : m_(model), c_(model.config), kn_(kernels), a_(act), slices_(slices), opts_(opts), P_(model.dtype),
        gemma_(model.config.gemma_family()), dev_(kernels.device()) {
    M_ = 0;
    for (const auto& sl : slices_) {
      row0_.push_back(M_);
      for (int i = 0; i < sl.n_tokens; ++i) {
        pos_of_row_.push_back(sl.start_pos + i);
        tokens_.push_back(sl.tokens[i]);
      }
      last_pos_.push_back(sl.start_pos + sl.n_tokens - 1);
      M_ += sl.n_tokens;
    }
    // longrope: transformers takes the long factors in a forward call whose highest position
    // reaches original_max_position_embeddings, for all of its rows; kvparity decides per sequence
    // (transformers' batch takes its longest's), so that a sequence in a batch is rotated as alone.
    if (const RopeTable& t = m_.rope; t.long_rows() > 0) {
      for (size_t s = 0; s < slices_.size(); ++s) {
        const int off = last_pos_[s] >= t.long_from() ? t.long_rows() : 0;
        for (int i = 0; i < slices_[s].n_tokens; ++i) long_rope_row_.push_back(slices_[s].start_pos + i + off);
      }
    }
    if (c_.is_moe())
      a_.last_row_experts.assign(slices_.size() * size_t(c_.n_layers) * size_t(c_.moe.n_used), -1);
    else
      a_.last_row_experts.clear();
  }

  // The rows of `table` that rotate this pass's rows: their positions, or longrope's choice.
  const int* rope_rows(const RopeTable& table) const {
    return &table == &m_.rope && !long_rope_row_.empty() ? long_rope_row_.data() : pos_of_row_.data();
  }

  // Rounds [rows, width] to P; a NaN/Inf stops the run (or is recorded). Devices that check once
  // per pass report it in finish(), by the rounding point's slot. row_pos[r]: the sequence
  // position of row r (for the message).
  void materialise(float* data, int rows, int width, const char* tensor, int layer, const int* row_pos = nullptr) {
    const int slot = int(points_.size());
    points_.push_back(Point{tensor, layer, width, row_pos == nullptr ? pos_of_row_.data() : row_pos});
    const long bad = kn_.round_check(P_, data, size_t(rows) * width, slot);
    if (bad >= 0) {
      float value = 0.0f;
      kn_.to_host(&value, data + bad, sizeof(float));
      nonfinite(slot, bad, value);
    }
  }

  // Hooks see one slice at a time, so a hook never has to know about batching.
  void hook(HookPoint point, int layer, float* data, int width) {
    if (opts_.hooks == nullptr || !opts_.hooks->wants(point, layer)) return;
    const size_t n = size_t(M_) * width;
    float* rows = on_host(data, n, hook_rows_);
    for (size_t s = 0; s < slices_.size(); ++s)
      opts_.hooks->on(HookSite{point, layer, slices_[s].start_pos, slices_[s].n_tokens, width},
                      rows + size_t(row0_[s]) * width);
    if (dev_ != Device::Cpu && opts_.hooks->writes(point, layer)) kn_.to_device(data, rows, n * sizeof(float));
  }

  // F.linear: the bias joins the fp32 accumulator before the single rounding to P.
  void linear(const float* in, const TensorView& W, float* out, const char* tensor, int layer,
              const TensorView* bias = nullptr) {
    rounded_next(out, int(W.rows()), bias);
    kn_.matmul(in, M_, W, P_, out);
    linear_out(out, int(W.rows()), bias, tensor, layer);
  }
  // Before a linear layer's matmul: its output is rounded next (linear_out) unless a bias comes
  // between.
  void rounded_next(const float* out, int width, const TensorView* bias) {
    if (bias == nullptr || !bias->valid()) kn_.rounded_output(out, size_t(M_) * width);
  }
  // The rest of a linear layer whose matmul has run (alone or in a matmul_group).
  void linear_out(float* out, int width, const TensorView* bias, const char* tensor, int layer) {
    if (bias != nullptr && bias->valid()) kn_.add_bias(out, M_, *bias);
    materialise(out, M_, width, tensor, layer);
  }

  const float* run();

 private:
  // A gated MLP over `rows` rows of x (positions row_pos; null: the pass's rows): gate, up -> P,
  // act(gate) * up -> P (GeGLU for Gemma, else SwiGLU), down -> P into y, the four rounding points
  // named by `names`. gu: scratch for gate then up ([rows, hidden] each). x_read_after: whether
  // anything reads x after the gate/up matmuls (else a device may drop stores only they would see).
  // GPT-OSS's experts: each bias (where w has them) is added after its matmul's rounding, one more
  // rounding point each (GptOssExperts adds them to bmm's output), and the activation is the clamped
  // SwiGLU (the model's swiglu_limit).
  void gated_mlp(const float* x, int rows, const ExpertWeights& w, float* gu, float* y, const char* const names[4],
                 int layer, const int* row_pos, bool x_read_after);

  // A sparse layer's MLP of the normalised rows a_.xb into a_.proj, with transformers' rounding
  // points (MixtralSparseMoeBlock, Qwen2/3MoeSparseMoeBlock, v4.51):
  //   router_logits   router . x -> P; the routing on the host (model/moe_routing.h), weights in P
  //   expert e        its SwiGLU over the rows that chose it (gathered, ascending), as the dense MLP;
  //                   then * the row's weight -> P
  //   mlp_out         per row, the experts' products added in expert order, each sum -> P
  //                   (index_add_ into zeros in P); Qwen2-MoE: + sigmoid(shared_expert_gate . x -> P)
  //                   -> P times the shared expert's output -> P, the sum -> P
  // GPT-OSS (GptOssMLP, the inference path of v4.55) differs:
  //   router_logits   router . x + bias -> P (F.linear); the top k logits, a softmax over them -> P
  //   expert e        gate, up -> P, each + its bias -> P; the clamped SwiGLU -> P; down -> P,
  //                   + bias -> P; then * the row's weight -> P
  //   mlp_out         the weighted experts summed in fp32 in expert order (.sum(dim=0)), one rounding
  // The experts' matmuls see only their rows, so under `invariant` they keep their bits whatever
  // else is in the pass; which rows an expert gets is the routing's alone.
  void sparse_mlp(const LayerWeights& L, int l);

  // n floats of x where the host can read them: x itself on the CPU; else copied into `host` (the
  // device's one wait in the middle of a pass, after which it runs the rest of the pass eagerly).
  float* on_host(float* x, size_t n, std::vector<float>& host) {
    if (dev_ == Device::Cpu) return x;
    host.resize(n);
    kn_.to_host(host.data(), x, n * sizeof(float));
    return host.data();
  }

  // The routing needs finite router logits, whatever the NaN/Inf policy: a row with none cannot
  // choose its experts. A device reports first what its rounding points met so far (in pass
  // order, as finish() would), so the error names where the overflow began, not where it arrived.
  void routable(const float* logits, int E, int layer);

  struct Point {  // a rounding point of this pass, for naming a NaN/Inf found there
    const char* tensor;
    int layer;
    int width;
    const int* row_pos;
  };

  void nonfinite(int slot, long bad, float value) {
    const Point& p = points_[size_t(slot)];
    NonFiniteEvent e{p.tensor, p.layer, p.row_pos[bad / p.width], int(bad % p.width), value};
    if (opts_.on_nonfinite == NonFinitePolicy::Error) throw Error(ErrorKind::Numeric, e.describe());
    if (a_.nonfinite.size() < 64) a_.nonfinite.push_back(e);
  }

  // The logits in host memory; on a device, the one wait of the pass, after which the NaN/Inf it
  // met are reported in pass order.
  const float* finish(size_t n) {
    if (dev_ == Device::Cpu) return a_.logits.data();
    a_.host_logits.resize(n);
    kn_.to_host(a_.host_logits.data(), a_.logits.data(), n * sizeof(float));
    for (const NonFiniteHit& h : kn_.pending_nonfinite()) nonfinite(h.slot, h.index, h.value);
    return a_.host_logits.data();
  }

  // RMSNorm of the M rows of the residual stream: HF Llama's (two roundings) or Gemma's (fp32 gain,
  // one rounding).
  void norm(const float* x, const TensorView& w, float* y) { norm_rows(x, M_, c_.dim, w, y); }

  // What a block (attention, MLP) reads: the residual stream normalised into xb (`point`, the
  // rounding point), or for a model without pre-norms (OLMo-2) the stream itself.
  const float* block_input(const TensorView& w, const char* point, int layer) {
    if (!c_.pre_norms()) return a_.x.data();
    norm(a_.x.data(), w, a_.xb.data());
    materialise(a_.xb.data(), M_, c_.dim, point, layer);
    return a_.xb.data();
  }

  // Qwen3's and Gemma-3's q_norm / k_norm: every head's row of x [M, n_heads * head_dim] normalised
  // over head_dim with one gain for all heads, as the model's other norms round (the rows of
  // [M * n_heads, head_dim]). OLMo-2's: each row of x normalised whole, a gain per element.
  void head_norm(const float* x, int n_heads, const TensorView& w, float* y) {
    if (c_.qk_norm_per_head())
      norm_rows(x, M_ * n_heads, c_.head_dim, w, y);
    else
      norm_rows(x, M_, n_heads * c_.head_dim, w, y);
  }

  // Ministral 3: rows at positions past the temperature's context x query_temperature(pos) -> P,
  // consecutive rows of one factor as one scale.
  void query_temperature(float* q, size_t qd, int layer) {
    if (c_.query_temperature_beta == 0.0f) return;
    bool scaled = false;
    for (int m = 0; m < M_;) {
      const float f = c_.query_temperature(pos_of_row_[size_t(m)]);
      int e = m + 1;
      while (e < M_ && c_.query_temperature(pos_of_row_[size_t(e)]) == f) ++e;
      if (f != 1.0f) {
        kn_.scale(q + size_t(m) * qd, size_t(e - m) * qd, f, P_, ScaleBy::Act);
        scaled = true;
      }
      m = e;
    }
    if (scaled) materialise(q, M_, int(qd), "q_scaled", layer);
  }

  void norm_rows(const float* x, int rows, int width, const TensorView& w, float* y) {
    const auto* g = static_cast<const float*>(w.data);
    if (c_.norm_gain_in_fp32())
      kn_.rmsnorm_fp32_gain(x, rows, width, g, c_.norm_eps, P_, y);
    else
      kn_.rmsnorm(x, rows, width, g, c_.norm_eps, P_, y);
  }

  // A block's output in a_.proj into the residual stream a_.x: normalised first where the family
  // normalises outputs (post_norm, rounding point `post_point`), hooked (`out_hook`), scaled
  // (Granite), then added (`resid_point`, hooked at `resid_hook`).
  void add_block_output(const TensorView& post_norm, const char* post_point, HookPoint out_hook,
                        const char* scaled_point, const char* resid_point, HookPoint resid_hook, int layer) {
    const int dim = c_.dim;
    const size_t n = size_t(M_) * size_t(dim);
    if (c_.post_norms()) {
      norm(a_.proj.data(), post_norm, a_.xb.data());
      a_.proj.swap(a_.xb);
      materialise(a_.proj.data(), M_, dim, post_point, layer);
    }
    hook(out_hook, layer, a_.proj.data(), dim);
    residual_scale(a_.proj.data(), scaled_point, layer);
    kn_.last_read(a_.proj.data(), n);
    kn_.add(a_.x.data(), a_.proj.data(), n, P_);
    materialise(a_.x.data(), M_, dim, resid_point, layer);
    hook(resid_hook, layer, a_.x.data(), dim);
  }

  // Granite: a block's output x residual_multiplier -> P, before its residual add (the hook point
  // before it is the block's output, as the module returns it).
  void residual_scale(float* y, const char* point, int layer) {
    if (c_.residual_multiplier == 1.0f) return;
    kn_.scale(y, size_t(M_) * size_t(c_.dim), c_.residual_multiplier, P_, ScaleBy::Fp32);
    materialise(y, M_, c_.dim, point, layer);
  }
  // Granite: logits / logits_scaling -> P, a power of two (ModelConfig::validate), so x its exact
  // reciprocal gives the quotient's bits.
  void logits_scale(float* logits, int rows, int V, const int* row_pos) {
    if (c_.logits_scaling == 1.0f) return;
    kn_.scale(logits, size_t(rows) * size_t(V), 1.0f / c_.logits_scaling, P_, ScaleBy::Fp32);
    materialise(logits, rows, V, "logits_scaled", -1, row_pos);
  }
  void final_softcap(float* logits, size_t n) {
    if (gemma_ && c_.final_logit_softcapping > 0.0f) kn_.softcap(logits, n, c_.final_logit_softcapping, P_);
  }

  const Model& m_;
  const ModelConfig& c_;
  Kernels& kn_;
  Activations& a_;
  const std::vector<SequenceSlice>& slices_;
  int M_ = 0;
  std::vector<int> row0_;        // first row of each slice
  std::vector<int> pos_of_row_;  // sequence position of each row
  std::vector<int> tokens_;      // token id of each row
  std::vector<int> last_pos_;    // position of each slice's last row
  std::vector<int> long_rope_row_;  // longrope: the RoPE table row of each row (RopeTable::rows)
  std::vector<Point> points_;
  std::deque<std::vector<int>> row_positions_;  // positions of gathered rows, named by points_
  std::vector<float> hook_rows_;  // host copy of a hooked tensor (devices other than the CPU)
  std::vector<float> router_host_;  // host copy of a sparse layer's router logits (the same)
  const ForwardOptions& opts_;
  DType P_;
  bool gemma_;
  Device dev_;
};

}  // namespace kvp::detail
