// Decoder forward pass for the seven families: Llama; Mistral (+ sliding window); Qwen2 (+ q/k/v
// biases); Qwen3 (per-head q/k norms before RoPE); their mixtures of experts (Mixtral, Qwen2-MoE,
// Qwen3-MoE); OLMo-2 (below); Gemma-2 (embedding normaliser, (1 + w) RMSNorm,
// four norms per layer, GeGLU, scaled and soft-capped attention scores, window on even layers,
// final logit soft-capping); Gemma-3 (below).
//
// Rounding points (DESIGN.md §3), in the order HF's eager LlamaForCausalLM materialises tensors
// in the compute dtype P. Every one goes through `Pass::materialise`, which also detects NaN/Inf:
//   embed            embedding rows (already P: the table is stored in P)
//   attn_norm        fp32 normalise -> P, * gain -> P                          (kernels.rmsnorm)
//   q, k, v          matmul (fp32 accumulation, + bias for Qwen2) -> P
//   q_norm, k_norm   Qwen3, Gemma-3: each head's row as attn_norm, over head_dim (kernels.rmsnorm)
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
// Gemma-3 (transformers v4.51.3 Gemma3ForCausalLM, eager) is Gemma-2 with: q_norm and k_norm as its
// other norms ((1 + w) in fp32, one rounding) before RoPE; no soft-capping; the window on layers
// with (l + 1) % sliding_window_pattern != 0, which rotate with rope_local_base_freq unscaled, the
// others with rope_theta and rope_scaling.
// OLMo-2 (transformers v4.51.3 Olmo2ForCausalLM, eager) is Llama with these changes:
//   attn_norm, ffn_norm  none: attention and MLP read the residual stream itself
//   q_norm, k_norm   each row of q_proj's [q_dim] and k_proj's [kv_dim] output normalised whole, as
//                    attn_norm rounds (v4.51's Olmo2RMSNorm is Llama's), before RoPE
//   attn_out         o_proj -> P, post_attention_layernorm -> P, then resid_mid
//   mlp_out          down_proj -> P, post_feedforward_layernorm -> P, then resid_post
// OLMo-3 (transformers v4.57.1 Olmo3ForCausalLM, eager) is OLMo-2 as v4.52 on rounds it, with windows:
//   every norm       x * rsqrt(mean(x^2) + eps) * w in fp32 -> P (Olmo2RMSNorm's gain before the cast)
//   q_rope, k_rope   x*cos + rotate_half(x)*sin in fp32 -> P, cos/sin fp32 (OlmoRotaryEmbedding's)
//   windows          sliding_window on the sliding_attention layers (3 of 4), which rotate unscaled;
//                    the full_attention layers take rope_scaling (YaRN in the published checkpoints)
// EXAONE 4.0 (Exaone4ForCausalLM) is OLMo-2's placement (attn_out, mlp_out post-normalised, no
// attn_norm / ffn_norm) with Llama's rounding, q_norm and k_norm per head as Qwen3's, and, with a
// window, its global layers' q_rope = q_norm and k_rope = k_norm (the identity rotation, as SmolLM3's).
// Ministral 3 (Ministral3ForCausalLM) is Mistral with, at positions pos >= C (its YaRN's
// original_max_position_embeddings; 1 below it, which changes nothing):
//   q_scaled         q_rope * round(1 + beta ln(1 + floor(pos / C))) -> P (llama_4_scaling_beta)
// Granite (transformers v4.44 GraniteForCausalLM, eager) is Llama with four multipliers, each a
// Python float applied in fp32 and rounded:
//   embed_scaled     embed * embedding_multiplier -> P
//   scores           round(q.k) -> P, * attention_multiplier -> P (no / sqrt(head_dim))
//   attn_out_scaled  attn_out * residual_multiplier -> P, then resid_mid
//   mlp_out_scaled   mlp_out * residual_multiplier -> P, then resid_post
//   logits_scaled    logits / logits_scaling -> P
// SmolLM3 (Llama's layer) leaves q and k unrotated in its NoPE layers (no_rope_layers): they take
// the identity rotation (cos 1, sin 0), which gives q_rope = q and k_rope = k, the same rounding
// points and ops as any other layer.
// A sparse layer (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE) replaces gate/up/act/mlp_out by its router
// and experts (sparse_mlp below). The routing is decided on the host, from the router's logits, on
// every device: a GPU pass waits for them in every sparse layer.
// K/V enter the cache converted to the KV dtype (lossless when it is wider than P).
#include <algorithm>
#include <cmath>
#include <deque>

#include "core/error.h"
#include "kernels/portable_math.h"
#include "model/forward.h"
#include "model/moe_routing.h"

namespace kvp {

std::string NonFiniteEvent::describe() const {
  std::string where = layer >= 0 ? fmt::format("layer {}", layer) : std::string("model");
  return fmt::format("non-finite value {} in '{}' at {}, position {}, element {} (fp16/bf16 overflow?)", value,
                     tensor, where, position, index);
}

namespace {

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
    if (c_.is_moe())
      a_.last_row_experts.assign(slices_.size() * size_t(c_.n_layers) * size_t(c_.moe.n_used), -1);
    else
      a_.last_row_experts.clear();
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

  const float* run() {
    const int dim = c_.dim, qd = c_.q_dim(), kvd = c_.kv_dim(), hid = c_.hidden_dim, V = c_.vocab_size;
    const size_t M = size_t(M_);
    a_.x.ensure(dev_, M * dim);
    a_.xb.ensure(dev_, M * dim);
    a_.qkv.ensure(dev_, M * (qd + 2 * size_t(kvd)));
    float* const q = a_.qkv.data();
    float* const k = q + M * qd;
    float* const v = k + M * kvd;
    a_.att.ensure(dev_, M * qd);
    a_.proj.ensure(dev_, M * dim);
    a_.gate_up.ensure(dev_, 2 * M * hid);
    const size_t logit_rows = opts_.all_logits ? M : slices_.size();
    a_.logits.ensure(dev_, logit_rows * size_t(V));
    const auto& W = m_.weights;
    // q/k come out of the matmuls in the file's row order; RoPE leaves them in the halves layout.
    const RopePairs pairs = W.qk_layout == RopeLayout::Interleaved ? RopePairs::AdjacentPairs : RopePairs::Halves;

    for (int m = 0; m < M_; ++m)
      if (tokens_[size_t(m)] < 0 || tokens_[size_t(m)] >= V)
        fail("token id {} at position {} is outside the vocabulary (size {})", tokens_[size_t(m)],
             pos_of_row_[size_t(m)], V);
    kn_.begin_pass();
    kn_.embed(W.embed, tokens_.data(), M_, a_.x.data());
    materialise(a_.x.data(), M_, dim, "embed", -1);
    if (gemma_) kn_.scale(a_.x.data(), M * dim, float(std::sqrt(double(dim))), P_, ScaleBy::Act);
    if (c_.embedding_multiplier != 1.0f) {
      kn_.scale(a_.x.data(), M * dim, c_.embedding_multiplier, P_, ScaleBy::Fp32);
      materialise(a_.x.data(), M_, dim, "embed_scaled", -1);
    }
    hook(HookPoint::Embed, -1, a_.x.data(), dim);

    std::vector<AttentionParams> attn(slices_.size());
    std::vector<KvWrite> kv_writes(slices_.size());
    for (int l = 0; l < c_.n_layers; ++l) {
      const LayerWeights& L = W.layers[size_t(l)];
      hook(HookPoint::ResidPre, l, a_.x.data(), dim);
      // Attention block (of the normalised residual stream; OLMo-2's of the stream itself).
      const float* attn_in = block_input(L.attn_norm, "attn_norm", l);
      const MatmulOut qkv[] = {{&L.wq, q}, {&L.wk, k}, {&L.wv, v}};
      if (c_.pre_norms()) kn_.last_read(attn_in, M * dim);  // the matmuls' inputs, read by nothing after them
      rounded_next(q, qd, &L.bq);
      rounded_next(k, kvd, &L.bk);
      rounded_next(v, kvd, &L.bv);
      kn_.matmul_group(attn_in, M_, qkv, 3, P_);
      linear_out(q, qd, &L.bq, "q_proj", l);
      linear_out(k, kvd, &L.bk, "k_proj", l);
      linear_out(v, kvd, &L.bv, "v_proj", l);
      // What RoPE rotates: the projections, or (Qwen3, Gemma-3) their per-head norms.
      float* qr = q;
      float* kr = k;
      if (c_.qk_norm()) {
        a_.qk_normed.ensure(dev_, M * (qd + size_t(kvd)));
        qr = a_.qk_normed.data();
        kr = qr + M * qd;
        head_norm(q, c_.n_heads, L.q_norm, qr);
        materialise(qr, M_, qd, "q_norm", l);
        head_norm(k, c_.n_kv_heads, L.k_norm, kr);
        materialise(kr, M_, kvd, "k_norm", l);
      }
      hook(HookPoint::QPre, l, qr, qd);
      hook(HookPoint::KPre, l, kr, kvd);
      // Each rotation right before its rounding point: a device may fuse the two.
      const RopeTable& rope = !c_.rotates(l) ? m_.rope_none : c_.local_rope(l) ? m_.rope_local : m_.rope;
      kn_.rope(qr, M_, c_.n_heads, pos_of_row_.data(), rope, P_, pairs);
      materialise(qr, M_, qd, "q_rope", l);
      query_temperature(qr, qd, l);
      kn_.rope(kr, M_, c_.n_kv_heads, pos_of_row_.data(), rope, P_, pairs);
      materialise(kr, M_, kvd, "k_rope", l);
      hook(HookPoint::Q, l, qr, qd);
      hook(HookPoint::K, l, kr, kvd);
      hook(HookPoint::V, l, v, kvd);
      for (const bool is_v : {false, true}) {
        for (size_t s = 0; s < slices_.size(); ++s) {
          const SequenceSlice& sl = slices_[s];
          KvWrite& w = kv_writes[s];
          w.cache = is_v ? sl.cache->v(l) : sl.cache->k(l);
          w.kv = sl.cache->type();
          w.capacity = sl.cache->capacity();
          w.n_kv_heads = c_.n_kv_heads;
          w.head_dim = c_.head_dim;
          w.rows = (is_v ? v : kr) + size_t(row0_[s]) * kvd;
          w.n_rows = sl.n_tokens;
          w.start_pos = sl.start_pos;
        }
        // K's and V's rows live on only in the cache (the hook points read k before).
        kn_.last_read(is_v ? v : kr, size_t(M_) * kvd);
        kn_.kv_write(kv_writes.data(), int(kv_writes.size()));
      }

      for (size_t s = 0; s < slices_.size(); ++s) {
        const SequenceSlice& sl = slices_[s];
        AttentionParams& ap = attn[s];
        ap.n_rows = sl.n_tokens;
        ap.start_pos = sl.start_pos;
        ap.n_heads = c_.n_heads;
        ap.n_kv_heads = c_.n_kv_heads;
        ap.head_dim = c_.head_dim;
        ap.q = qr + size_t(row0_[s]) * qd;
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
        if (c_.attention_multiplier > 0.0f) ap.score_scale = c_.attention_multiplier;
        ap.sliding_window = c_.window_for_layer(l);
        ap.act = P_;
      }
      kn_.last_read(qr, size_t(M_) * qd);  // q's rows, read by the attention alone
      kn_.attention_batch(attn.data(), int(attn.size()));
      materialise(a_.att.data(), M_, qd, "attn", l);
      kn_.last_read(a_.att.data(), M * qd);
      linear(a_.att.data(), L.wo, a_.proj.data(), "attn_out", l);
      if (c_.post_norms()) {
        norm(a_.proj.data(), L.post_attn_norm, a_.xb.data());
        a_.proj.swap(a_.xb);
        materialise(a_.proj.data(), M_, dim, "post_attn_norm", l);
      }
      hook(HookPoint::AttnOut, l, a_.proj.data(), dim);
      residual_scale(a_.proj.data(), "attn_out_scaled", l);
      kn_.last_read(a_.proj.data(), M * dim);
      kn_.add(a_.x.data(), a_.proj.data(), M * dim, P_);
      materialise(a_.x.data(), M_, dim, "resid_mid", l);
      hook(HookPoint::ResidMid, l, a_.x.data(), dim);

      // MLP block (SwiGLU; a sparse layer's experts).
      const float* mlp_in = block_input(L.ffn_norm, "ffn_norm", l);
      if (c_.moe_layer(l)) {
        sparse_mlp(L, l);
      } else {
        static const char* const dense_points[4] = {"gate_proj", "up_proj", "mlp_act", "mlp_out"};
        // Without a norm before it the MLP reads the residual stream, which the residual add reads after.
        gated_mlp(mlp_in, M_, L.w_gate, L.w_up, L.w_down, a_.gate_up.data(), a_.proj.data(), dense_points, l, nullptr,
                  !c_.pre_norms());
      }
      if (c_.post_norms()) {
        norm(a_.proj.data(), L.post_ffn_norm, a_.xb.data());
        a_.proj.swap(a_.xb);
        materialise(a_.proj.data(), M_, dim, "post_ffn_norm", l);
      }
      hook(HookPoint::MlpOut, l, a_.proj.data(), dim);
      residual_scale(a_.proj.data(), "mlp_out_scaled", l);
      kn_.last_read(a_.proj.data(), M * dim);
      kn_.add(a_.x.data(), a_.proj.data(), M * dim, P_);
      materialise(a_.x.data(), M_, dim, "resid_post", l);
      hook(HookPoint::ResidPost, l, a_.x.data(), dim);
    }
    for (const auto& sl : slices_) sl.cache->set_length(sl.start_pos + sl.n_tokens);

    norm(a_.x.data(), W.final_norm, a_.xb.data());
    materialise(a_.xb.data(), M_, dim, "final_norm", -1);
    hook(HookPoint::FinalNorm, -1, a_.xb.data(), dim);
    if (opts_.all_logits) {
      rounded_next(a_.logits.data(), V, nullptr);
      kn_.matmul(a_.xb.data(), M_, W.lm_head, P_, a_.logits.data());
      materialise(a_.logits.data(), M_, V, "logits", -1);
      final_softcap(a_.logits.data(), M * V);
      logits_scale(a_.logits.data(), M_, V, nullptr);
      hook(HookPoint::Logits, -1, a_.logits.data(), V);
      return finish(logit_rows * size_t(V));
    }
    // Only each slice's last row: gathered (proj is free by now) so lm_head runs once.
    const int S = int(slices_.size());
    const float* rows = a_.xb.data() + (M - 1) * dim;
    if (S > 1) {
      for (int s = 0; s < S; ++s)
        kn_.copy(a_.proj.data() + size_t(s) * dim, a_.xb.data() + size_t(row0_[s] + slices_[s].n_tokens - 1) * dim,
                 size_t(dim));
      rows = a_.proj.data();
    }
    kn_.rounded_output(a_.logits.data(), size_t(S) * V);
    kn_.matmul(rows, S, W.lm_head, P_, a_.logits.data());
    materialise(a_.logits.data(), S, V, "logits", -1, last_pos_.data());
    final_softcap(a_.logits.data(), size_t(S) * V);
    logits_scale(a_.logits.data(), S, V, last_pos_.data());
    const float* out = finish(logit_rows * size_t(V));
    if (opts_.hooks != nullptr && opts_.hooks->wants(HookPoint::Logits, -1))
      for (int s = 0; s < S; ++s)
        opts_.hooks->on(HookSite{HookPoint::Logits, -1, last_pos_[size_t(s)], 1, V},
                        const_cast<float*>(out) + size_t(s) * V);
    return out;
  }

 private:
  // A gated MLP over `rows` rows of x (positions row_pos; null: the pass's rows): gate, up -> P,
  // act(gate) * up -> P (GeGLU for Gemma, else SwiGLU), down -> P into y, the four rounding points
  // named by `names`. gu: scratch for gate then up ([rows, hidden] each). x_read_after: whether
  // anything reads x after the gate/up matmuls (else a device may drop stores only they would see).
  void gated_mlp(const float* x, int rows, const TensorView& w_gate, const TensorView& w_up,
                 const TensorView& w_down, float* gu, float* y, const char* const names[4], int layer,
                 const int* row_pos, bool x_read_after) {
    const int h = int(w_gate.rows()), dim = c_.dim;
    const size_t n = size_t(rows) * h;
    float* g = gu;
    float* u = gu + n;
    const MatmulOut outs[] = {{&w_gate, g}, {&w_up, u}};
    if (!x_read_after) kn_.last_read(x, size_t(rows) * dim);
    kn_.rounded_output(g, n);
    kn_.rounded_output(u, n);
    kn_.matmul_group(x, rows, outs, 2, P_);
    materialise(g, rows, h, names[0], layer, row_pos);
    materialise(u, rows, h, names[1], layer, row_pos);
    kn_.last_read(u, n);
    if (gemma_)
      kn_.gelu_tanh_mul(g, u, n, P_);
    else
      kn_.silu_mul(g, u, n, P_);
    materialise(g, rows, h, names[2], layer, row_pos);
    kn_.last_read(g, n);
    kn_.rounded_output(y, size_t(rows) * dim);
    kn_.matmul(g, rows, w_down, P_, y);
    materialise(y, rows, dim, names[3], layer, row_pos);
  }

  // A sparse layer's MLP of the normalised rows a_.xb into a_.proj, with transformers' rounding
  // points (MixtralSparseMoeBlock, Qwen2/3MoeSparseMoeBlock, v4.51):
  //   router_logits   router . x -> P; the routing on the host (model/moe_routing.h), weights in P
  //   expert e        its SwiGLU over the rows that chose it (gathered, ascending), as the dense MLP;
  //                   then * the row's weight -> P
  //   mlp_out         per row, the experts' products added in expert order, each sum -> P
  //                   (index_add_ into zeros in P); Qwen2-MoE: + sigmoid(shared_expert_gate . x -> P)
  //                   -> P times the shared expert's output -> P, the sum -> P
  // The experts' matmuls see only their rows, so under `invariant` they keep their bits whatever
  // else is in the pass; which rows an expert gets is the routing's alone.
  void sparse_mlp(const LayerWeights& L, int l) {
    static const char* const expert_points[4] = {"expert_gate", "expert_up", "expert_act", "expert_out"};
    static const char* const shared_points[4] = {"shared_gate_proj", "shared_up_proj", "shared_act", "shared_out"};
    const MoeConfig& moe = c_.moe;
    const int dim = c_.dim, E = moe.n_experts;
    const size_t M = size_t(M_);
    a_.router.ensure(dev_, M * E);
    linear(a_.xb.data(), L.router, a_.router.data(), "router_logits", l);
    hook(HookPoint::RouterLogits, l, a_.router.data(), E);
    const float* logits = on_host(a_.router.data(), M * E, router_host_);
    routable(logits, E, l);
    const ExpertRouting route = route_experts(logits, M_, E, moe.n_used, moe.norm_topk_prob, P_);
    const size_t k = size_t(moe.n_used);
    for (size_t s = 0; s < slices_.size(); ++s) {
      const size_t last = size_t(row0_[s] + slices_[s].n_tokens - 1);
      std::copy_n(route.expert.begin() + std::ptrdiff_t(last * k), k,
                  a_.last_row_experts.begin() + std::ptrdiff_t((s * size_t(c_.n_layers) + size_t(l)) * k));
    }
    a_.moe_x.ensure(dev_, M * dim);
    a_.moe_y.ensure(dev_, M * dim);
    a_.moe_gate_up.ensure(dev_, 2 * M * size_t(std::max(moe.expert_hidden_dim, moe.shared_hidden_dim)));
    float* const out = a_.proj.data();
    std::vector<char> written(M, 0);
    for (int e = 0; e < E; ++e) {
      const std::vector<int>& rows = route.rows_of[size_t(e)];
      if (rows.empty()) continue;
      const int n = int(rows.size());
      std::vector<int>& pos = row_positions_.emplace_back();
      for (int i = 0; i < n; ++i) {
        kn_.copy(a_.moe_x.data() + size_t(i) * dim, a_.xb.data() + size_t(rows[size_t(i)]) * dim, size_t(dim));
        pos.push_back(pos_of_row_[size_t(rows[size_t(i)])]);
      }
      const ExpertWeights& ew = L.experts[size_t(e)];
      gated_mlp(a_.moe_x.data(), n, ew.gate, ew.up, ew.down, a_.moe_gate_up.data(), a_.moe_y.data(), expert_points, l,
                pos.data(), false);
      for (int i = 0; i < n; ++i) {
        float* y = a_.moe_y.data() + size_t(i) * dim;
        float* o = out + size_t(rows[size_t(i)]) * dim;
        kn_.scale(y, size_t(dim), route.weight_of[size_t(e)][size_t(i)], P_, ScaleBy::Act);
        if (written[size_t(rows[size_t(i)])]++ == 0)
          kn_.copy(o, y, size_t(dim));  // P(0 + y) = y
        else
          kn_.add(o, y, size_t(dim), P_);
      }
    }
    if (moe.shared_hidden_dim > 0) {
      gated_mlp(a_.xb.data(), M_, L.shared.gate, L.shared.up, L.shared.down, a_.moe_gate_up.data(), a_.moe_y.data(),
                shared_points, l, nullptr, true);  // x is the shared gate's input next
      float* gate = a_.router.data();  // the routing is done with the router's logits
      linear(a_.xb.data(), L.shared_gate, gate, "shared_expert_gate", l);
      const float* g = on_host(gate, M, router_host_);
      for (int m = 0; m < M_; ++m) {
        const float s = round_to(P_, 1.0f / (1.0f + pmath::expf_rounded(-g[m])));
        kn_.scale(a_.moe_y.data() + size_t(m) * dim, size_t(dim), s, P_, ScaleBy::Act);
      }
      kn_.add(out, a_.moe_y.data(), M * dim, P_);
    }
    materialise(out, M_, dim, "mlp_out", l);
  }

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
  void routable(const float* logits, int E, int layer) {
    if (dev_ != Device::Cpu)
      for (const NonFiniteHit& h : kn_.pending_nonfinite()) nonfinite(h.slot, h.index, h.value);
    for (size_t i = 0; i < size_t(M_) * E; ++i)
      if (!std::isfinite(logits[i]))
        throw Error(ErrorKind::Numeric,
                    NonFiniteEvent{"router_logits", layer, pos_of_row_[i / size_t(E)], int(i % size_t(E)), logits[i]}
                            .describe() +
                        ": the experts cannot be chosen");
  }

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
  std::vector<Point> points_;
  std::deque<std::vector<int>> row_positions_;  // positions of gathered rows, named by points_
  std::vector<float> hook_rows_;  // host copy of a hooked tensor (devices other than the CPU)
  std::vector<float> router_host_;  // host copy of a sparse layer's router logits (the same)
  const ForwardOptions& opts_;
  DType P_;
  bool gemma_;
  Device dev_;
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
