// Decoder forward pass for the four families: Llama; Mistral (+ sliding window); Qwen2 (+ q/k/v
// biases); Gemma-2 (embedding normaliser, (1 + w) RMSNorm, four norms per layer, GeGLU, scaled and
// soft-capped attention scores, window on even layers, final logit soft-capping).
//
// Rounding points (DESIGN.md §3), in the order HF's eager LlamaForCausalLM materialises tensors
// in the compute dtype P. Every one goes through `Pass::materialise`, which also detects NaN/Inf:
//   embed            embedding rows (already P: the table is stored in P)
//   attn_norm        fp32 normalise -> P, * gain -> P                          (kernels.rmsnorm)
//   q, k, v          matmul (fp32 accumulation, + bias for Qwen2) -> P
//   q_rope, k_rope   round(x*cos) + round(rotate_half(x)*sin) -> P, cos/sin fp32 -> P
//                    (llama2.c/GGUF-llama rows hold the pairs adjacent: read there, written in halves)
//   scores           round(q.k) -> P, / sqrt(head_dim) -> P; softmax fp32 -> P    (kernels.attention)
//   attn             P.V (fp32 accumulation) -> P
//   attn_out         o_proj -> P
//   resid_mid        residual + attn_out -> P
//   ffn_norm         as attn_norm
//   gate, up         matmul -> P
//   act              silu(gate) -> P, * up -> P
//   mlp_out          down_proj -> P
//   resid_post       residual + mlp_out -> P
//   final_norm       as attn_norm
//   logits           lm_head -> P (returned as fp32 values)
// Gemma-2 (transformers v4.44.2 Gemma2ForCausalLM, eager) differs at these points:
//   embed            embedding rows -> P, then * normalizer -> P, normalizer = P(sqrt(hidden_size))
//   every norm       fp32 normalise * (1 + w) in fp32 -> P, one rounding    (kernels.rmsnorm_fp32_gain)
//   scores           round(q.k) -> P, * P32(query_pre_attn_scalar^-0.5) -> P; then / cap -> P,
//                    tanh -> P, * cap -> P (attn_logit_softcapping); window on layers with l % 2 == 0
//   attn_out         o_proj -> P, post_attention_layernorm -> P, then resid_mid
//   act              gelu_tanh(gate) -> P, * up -> P
//   mlp_out          down_proj -> P, post_feedforward_layernorm -> P, then resid_post
//   logits           lm_head -> P, / cap -> P, tanh -> P, * cap -> P (final_logit_softcapping)
// K/V enter the cache converted to the KV dtype (lossless when it is wider than P).
#include <cmath>

#include "core/error.h"
#include "kernels/elementwise.h"
#include "kernels/simd_ops.h"
#include "model/forward.h"

namespace kvp {

std::string NonFiniteEvent::describe() const {
  std::string where = layer >= 0 ? fmt::format("layer {}", layer) : std::string("model");
  return fmt::format("non-finite value {} in '{}' at {}, position {}, element {} (fp16/bf16 overflow?)", value,
                     tensor, where, position, index);
}

namespace {

void ensure(Activations::Buffer& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// The rows of a pass are the slices' tokens, concatenated: matmuls, norms and element-wise ops
// see all M rows at once (rows never interact there), while RoPE, the cache writes and attention
// run per slice, each against its own sequence's cache and positions.
class Pass {
 public:
  Pass(const Model& model, Kernels& kernels, Activations& act, const std::vector<SequenceSlice>& slices,
       const ForwardOptions& opts)
      : m_(model), c_(model.config), kn_(kernels), a_(act), slices_(slices), opts_(opts), P_(model.dtype),
        gemma_(model.config.arch == Arch::Gemma2) {
    M_ = 0;
    for (const auto& sl : slices_) {
      row0_.push_back(M_);
      for (int i = 0; i < sl.n_tokens; ++i) pos_of_row_.push_back(sl.start_pos + i);
      last_pos_.push_back(sl.start_pos + sl.n_tokens - 1);
      M_ += sl.n_tokens;
    }
  }

  // Rounds [rows, width] to P, stops (or records) at the first NaN/Inf. row_pos[r]: the sequence
  // position of row r (for the message).
  void materialise(float* data, int rows, int width, const char* tensor, int layer, const int* row_pos = nullptr) {
    const long bad = simd::round_find_nonfinite(P_, data, size_t(rows) * width);
    if (bad >= 0) {
      if (row_pos == nullptr) row_pos = pos_of_row_.data();
      NonFiniteEvent e{tensor, layer, row_pos[bad / width], int(bad % width), data[bad]};
      if (opts_.on_nonfinite == NonFinitePolicy::Error) throw Error(ErrorKind::Numeric, e.describe());
      if (a_.nonfinite.size() < 64) a_.nonfinite.push_back(e);
    }
  }

  // Hooks see one slice at a time, so a hook never has to know about batching.
  void hook(HookPoint point, int layer, float* data, int width) {
    if (opts_.hooks == nullptr) return;
    for (size_t s = 0; s < slices_.size(); ++s)
      opts_.hooks->on(HookSite{point, layer, slices_[s].start_pos, slices_[s].n_tokens, width},
                      data + size_t(row0_[s]) * width);
  }

  // F.linear: the bias joins the fp32 accumulator before the single rounding to P.
  void linear(const float* in, const TensorView& W, float* out, const char* tensor, int layer,
              const TensorView* bias = nullptr) {
    kn_.matmul(in, M_, W, out);
    if (bias != nullptr && bias->valid()) {
      const auto* b = static_cast<const float*>(bias->data);
      const int n = int(W.rows());
      for (int m = 0; m < M_; ++m)
        for (int i = 0; i < n; ++i) out[size_t(m) * n + i] += b[i];
    }
    materialise(out, M_, int(W.rows()), tensor, layer);
  }

  const float* run() {
    const int dim = c_.dim, qd = c_.q_dim(), kvd = c_.kv_dim(), hid = c_.hidden_dim, V = c_.vocab_size;
    const size_t M = size_t(M_);
    ensure(a_.x, M * dim);
    ensure(a_.xb, M * dim);
    ensure(a_.q, M * qd);
    ensure(a_.k, M * kvd);
    ensure(a_.v, M * kvd);
    ensure(a_.att, M * qd);
    ensure(a_.proj, M * dim);
    ensure(a_.gate, M * hid);
    ensure(a_.up, M * hid);
    ensure(a_.logits, (opts_.all_logits ? M : slices_.size()) * size_t(V));
    const auto& W = m_.weights;
    // q/k come out of the matmuls in the file's row order; RoPE leaves them in the halves layout.
    const RopePairs pairs = W.qk_layout == RopeLayout::Interleaved ? RopePairs::AdjacentPairs : RopePairs::Halves;

    for (size_t s = 0; s < slices_.size(); ++s) {
      for (int i = 0; i < slices_[s].n_tokens; ++i) {
        const int tok = slices_[s].tokens[i];
        if (tok < 0 || tok >= V)
          fail("token id {} at position {} is outside the vocabulary (size {})", tok, slices_[s].start_pos + i, V);
        const size_t m = size_t(row0_[s] + i);
        view_to_f32(W.embed, size_t(tok) * dim, size_t(dim), a_.x.data() + m * dim);
      }
    }
    materialise(a_.x.data(), M_, dim, "embed", -1);
    if (gemma_) scale_inplace(a_.x.data(), M * dim, float(std::sqrt(double(dim))), P_);
    hook(HookPoint::Embed, -1, a_.x.data(), dim);

    for (int l = 0; l < c_.n_layers; ++l) {
      const LayerWeights& L = W.layers[size_t(l)];
      hook(HookPoint::ResidPre, l, a_.x.data(), dim);
      // Attention block.
      norm(a_.x.data(), L.attn_norm, a_.xb.data());
      materialise(a_.xb.data(), M_, dim, "attn_norm", l);
      linear(a_.xb.data(), L.wq, a_.q.data(), "q_proj", l, &L.bq);
      linear(a_.xb.data(), L.wk, a_.k.data(), "k_proj", l, &L.bk);
      linear(a_.xb.data(), L.wv, a_.v.data(), "v_proj", l, &L.bv);
      for (size_t s = 0; s < slices_.size(); ++s) {
        const SequenceSlice& sl = slices_[s];
        apply_rope(a_.q.data() + size_t(row0_[s]) * qd, sl.n_tokens, c_.n_heads, sl.start_pos, m_.rope, P_, pairs);
        apply_rope(a_.k.data() + size_t(row0_[s]) * kvd, sl.n_tokens, c_.n_kv_heads, sl.start_pos, m_.rope, P_, pairs);
      }
      materialise(a_.q.data(), M_, qd, "q_rope", l);
      materialise(a_.k.data(), M_, kvd, "k_rope", l);
      hook(HookPoint::K, l, a_.k.data(), kvd);
      hook(HookPoint::V, l, a_.v.data(), kvd);
      for (size_t s = 0; s < slices_.size(); ++s) {
        const SequenceSlice& sl = slices_[s];
        sl.cache->write(l, false, a_.k.data() + size_t(row0_[s]) * kvd, sl.n_tokens, sl.start_pos);
        sl.cache->write(l, true, a_.v.data() + size_t(row0_[s]) * kvd, sl.n_tokens, sl.start_pos);
      }

      for (size_t s = 0; s < slices_.size(); ++s) {
        const SequenceSlice& sl = slices_[s];
        AttentionParams ap;
        ap.n_rows = sl.n_tokens;
        ap.start_pos = sl.start_pos;
        ap.n_heads = c_.n_heads;
        ap.n_kv_heads = c_.n_kv_heads;
        ap.head_dim = c_.head_dim;
        ap.q = a_.q.data() + size_t(row0_[s]) * qd;
        ap.k_cache = sl.cache->k(l);
        ap.v_cache = sl.cache->v(l);
        ap.kv = sl.cache->type();
        ap.capacity = sl.cache->capacity();
        ap.out = a_.att.data() + size_t(row0_[s]) * qd;
        ap.score_divisor = std::sqrt(float(c_.head_dim));
        if (gemma_) {
          ap.score_scale = float(std::pow(double(c_.query_pre_attn_scalar), -0.5));
          ap.softcap = c_.attn_logit_softcapping;
        }
        ap.sliding_window = c_.window_for_layer(l);
        ap.act = P_;
        kn_.attention(ap);
      }
      materialise(a_.att.data(), M_, qd, "attn", l);
      linear(a_.att.data(), L.wo, a_.proj.data(), "attn_out", l);
      if (gemma_) {
        norm(a_.proj.data(), L.post_attn_norm, a_.xb.data());
        a_.proj.swap(a_.xb);
        materialise(a_.proj.data(), M_, dim, "post_attn_norm", l);
      }
      hook(HookPoint::AttnOut, l, a_.proj.data(), dim);
      add_inplace(a_.x.data(), a_.proj.data(), M * dim, P_);
      materialise(a_.x.data(), M_, dim, "resid_mid", l);
      hook(HookPoint::ResidMid, l, a_.x.data(), dim);

      // MLP block (SwiGLU).
      norm(a_.x.data(), L.ffn_norm, a_.xb.data());
      materialise(a_.xb.data(), M_, dim, "ffn_norm", l);
      linear(a_.xb.data(), L.w_gate, a_.gate.data(), "gate_proj", l);
      linear(a_.xb.data(), L.w_up, a_.up.data(), "up_proj", l);
      if (gemma_)
        gelu_tanh_mul(a_.gate.data(), a_.up.data(), M * hid, P_);
      else
        silu_mul(a_.gate.data(), a_.up.data(), M * hid, P_);
      materialise(a_.gate.data(), M_, hid, "mlp_act", l);
      linear(a_.gate.data(), L.w_down, a_.proj.data(), "mlp_out", l);
      if (gemma_) {
        norm(a_.proj.data(), L.post_ffn_norm, a_.xb.data());
        a_.proj.swap(a_.xb);
        materialise(a_.proj.data(), M_, dim, "post_ffn_norm", l);
      }
      hook(HookPoint::MlpOut, l, a_.proj.data(), dim);
      add_inplace(a_.x.data(), a_.proj.data(), M * dim, P_);
      materialise(a_.x.data(), M_, dim, "resid_post", l);
      hook(HookPoint::ResidPost, l, a_.x.data(), dim);
    }
    for (const auto& sl : slices_) sl.cache->set_length(sl.start_pos + sl.n_tokens);

    norm(a_.x.data(), W.final_norm, a_.xb.data());
    materialise(a_.xb.data(), M_, dim, "final_norm", -1);
    hook(HookPoint::FinalNorm, -1, a_.xb.data(), dim);
    if (opts_.all_logits) {
      kn_.matmul(a_.xb.data(), M_, W.lm_head, a_.logits.data());
      materialise(a_.logits.data(), M_, V, "logits", -1);
      final_softcap(a_.logits.data(), M * V);
      hook(HookPoint::Logits, -1, a_.logits.data(), V);
    } else {
      // Only each slice's last row: gathered (proj is free by now) so lm_head runs once.
      const int S = int(slices_.size());
      const float* rows = a_.xb.data() + (M - 1) * dim;
      if (S > 1) {
        for (int s = 0; s < S; ++s)
          std::copy_n(a_.xb.data() + size_t(row0_[s] + slices_[s].n_tokens - 1) * dim, dim,
                      a_.proj.data() + size_t(s) * dim);
        rows = a_.proj.data();
      }
      kn_.matmul(rows, S, W.lm_head, a_.logits.data());
      materialise(a_.logits.data(), S, V, "logits", -1, last_pos_.data());
      final_softcap(a_.logits.data(), size_t(S) * V);
      if (opts_.hooks != nullptr)
        for (int s = 0; s < S; ++s)
          opts_.hooks->on(HookSite{HookPoint::Logits, -1, last_pos_[size_t(s)], 1, V}, a_.logits.data() + size_t(s) * V);
    }
    return a_.logits.data();
  }

 private:
  // RMSNorm of M rows: HF Llama's (two roundings) or Gemma-2's (fp32 gain, one rounding).
  void norm(const float* x, const TensorView& w, float* y) {
    const auto* g = static_cast<const float*>(w.data);
    if (gemma_)
      kn_.rmsnorm_fp32_gain(x, M_, c_.dim, g, c_.norm_eps, P_, y);
    else
      kn_.rmsnorm(x, M_, c_.dim, g, c_.norm_eps, P_, y);
  }

  void final_softcap(float* logits, size_t n) {
    if (gemma_ && c_.final_logit_softcapping > 0.0f) softcap_inplace(logits, n, c_.final_logit_softcapping, P_);
  }

  const Model& m_;
  const ModelConfig& c_;
  Kernels& kn_;
  Activations& a_;
  const std::vector<SequenceSlice>& slices_;
  int M_ = 0;
  std::vector<int> row0_;        // first row of each slice
  std::vector<int> pos_of_row_;  // sequence position of each row
  std::vector<int> last_pos_;    // position of each slice's last row
  const ForwardOptions& opts_;
  DType P_;
  bool gemma_;
};

}  // namespace

const float* forward_batch(const Model& model, Kernels& kernels, Activations& act,
                           const std::vector<SequenceSlice>& slices, const ForwardOptions& opts) {
  if (slices.empty()) fail("forward called with no sequences");
  for (size_t s = 0; s < slices.size(); ++s) {
    const SequenceSlice& sl = slices[s];
    const int M = sl.n_tokens, start_pos = sl.start_pos;
    if (sl.cache == nullptr || sl.tokens == nullptr) fail("forward: sequence {} has no cache or tokens", s);
    if (M <= 0) fail("forward called with no tokens");
    const KVCache& cache = *sl.cache;
    if (start_pos < 0 || start_pos + M > cache.capacity())
      fail("positions {}..{} do not fit the KV cache ({} positions)", start_pos, start_pos + M - 1, cache.capacity());
    if (start_pos + M > model.config.max_seq_len)
      fail("sequence of {} tokens exceeds the model's context length {}", start_pos + M, model.config.max_seq_len);
    if (start_pos > cache.length())
      fail("forward at position {} but the cache holds only {} positions", start_pos, cache.length());
    for (size_t t = 0; t < s; ++t)
      if (slices[t].cache == sl.cache) fail("forward: sequences {} and {} share one KV cache", t, s);
  }
  Pass pass(model, kernels, act, slices, opts);
  return pass.run();
}

const float* forward(const Model& model, Kernels& kernels, KVCache& cache, Activations& act, const int* tokens, int M,
                     int start_pos, const ForwardOptions& opts) {
  return forward_batch(model, kernels, act, {SequenceSlice{&cache, tokens, M, start_pos}}, opts);
}

}  // namespace kvp
