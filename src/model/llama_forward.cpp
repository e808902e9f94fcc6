// Decoder forward pass for the families: Llama; Mistral (+ sliding window); Qwen2 (+ q/k/v
// biases); Qwen3 (per-head q/k norms before RoPE); their mixtures of experts (Mixtral, Qwen2-MoE,
// Qwen3-MoE); OLMo-2, OLMo-3, EXAONE 4.0, Ministral 3, Granite, SmolLM3, GPT-OSS (below); the
// MLPs in forward_mlp.cpp; Gemma-2 (embedding normaliser, (1 + w) RMSNorm,
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
// GPT-OSS (transformers v4.55 GptOssForCausalLM, eager) is Llama's block with:
//   every norm       x * rsqrt(mean(x^2) + eps) * w in fp32 -> P, w the file's fp32 values
//                    (_keep_in_fp32_modules: the norms stay in fp32 in a bf16 model)
//   q, k, v, attn_out  + bias in the accumulator (F.linear), then -> P
//   q_rope, k_rope   as Llama's, cos/sin = YaRN's x attention factor in fp32 -> P
//   scores           round(q.k) -> P, * P32(head_dim^-0.5) -> P; each head's sink one more logit:
//                    (scores, sink) - max -> P, softmax fp32 -> P, the sink's column dropped
//   windows          sliding_window on the sliding_attention layers (the even ones)
//   a sparse MLP in every layer, with biases and a clamped SwiGLU (forward_mlp.cpp)
// A sparse layer (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, GPT-OSS) replaces gate/up/act/mlp_out by its
// router and experts (Pass::sparse_mlp, forward_mlp.cpp). The routing is decided on the host, from the router's logits, on
// every device: a GPU pass waits for them in every sparse layer.
// K/V enter the cache converted to the KV dtype (lossless when it is wider than P).
#include <algorithm>
#include <cmath>
#include <deque>

#include "core/error.h"
#include "kernels/portable_math.h"
#include "model/forward_pass.h"

namespace kvp {

std::string NonFiniteEvent::describe() const {
  std::string where = layer >= 0 ? fmt::format("layer {}", layer) : std::string("model");
  return fmt::format("non-finite value {} in '{}' at {}, position {}, element {} (fp16/bf16 overflow?)", value,
                     tensor, where, position, index);
}

namespace detail {

const float* Pass::run() {
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
    kn_.rope(qr, M_, c_.n_heads, rope_rows(rope), rope, P_, pairs);
    materialise(qr, M_, qd, "q_rope", l);
    query_temperature(qr, qd, l);
    kn_.rope(kr, M_, c_.n_kv_heads, rope_rows(rope), rope, P_, pairs);
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
      // GPT-OSS multiplies by its scaling (head_dim**-0.5, a Python float) instead of dividing.
      if (c_.arch == Arch::GptOss) ap.score_scale = float(std::pow(double(c_.head_dim), -0.5));
      ap.sinks = L.sinks.valid() ? static_cast<const float*>(L.sinks.data) : nullptr;
      ap.sliding_window = c_.window_for_layer(l);
      ap.act = P_;
    }
    kn_.last_read(qr, size_t(M_) * qd);  // q's rows, read by the attention alone
    kn_.attention_batch(attn.data(), int(attn.size()));
    materialise(a_.att.data(), M_, qd, "attn", l);
    kn_.last_read(a_.att.data(), M * qd);
    linear(a_.att.data(), L.wo, a_.proj.data(), "attn_out", l, &L.bo);
    add_block_output(L.post_attn_norm, "post_attn_norm", HookPoint::AttnOut, "attn_out_scaled", "resid_mid",
                     HookPoint::ResidMid, l);

    // MLP block (SwiGLU; a sparse layer's experts).
    const float* mlp_in = block_input(L.ffn_norm, "ffn_norm", l);
    if (c_.moe_layer(l)) {
      sparse_mlp(L, l);
    } else {
      static const char* const dense_points[4] = {"gate_proj", "up_proj", "mlp_act", "mlp_out"};
      // Without a norm before it the MLP reads the residual stream, which the residual add reads after.
      gated_mlp(mlp_in, M_, ExpertWeights{L.w_gate, L.w_up, L.w_down}, a_.gate_up.data(), a_.proj.data(),
                dense_points, l, nullptr, !c_.pre_norms());
    }
    add_block_output(L.post_ffn_norm, "post_ffn_norm", HookPoint::MlpOut, "mlp_out_scaled", "resid_post",
                     HookPoint::ResidPost, l);
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

}  // namespace detail

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
  detail::Pass pass(model, kernels, act, slices, opts);
  return pass.run();
}

const float* forward(const Model& model, Kernels& kernels, KVCache& cache, Activations& act, const int* tokens, int M,
                     int start_pos, const ForwardOptions& opts) {
  return forward_batch(model, kernels, act, {SequenceSlice{&cache, tokens, M, start_pos}}, opts);
}

}  // namespace kvp
