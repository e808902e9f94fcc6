#include "model/config.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/portable_math.h"

namespace kvp {

std::string arch_name(Arch a) {
  switch (a) {
    case Arch::Llama: return "llama";
    case Arch::Mistral: return "mistral";
    case Arch::Gemma2: return "gemma2";
    case Arch::Qwen2: return "qwen2";
    case Arch::Qwen3: return "qwen3";
    case Arch::Gemma3: return "gemma3";
    case Arch::Olmo2: return "olmo2";
    case Arch::Olmoe: return "olmoe";
    case Arch::Olmo3: return "olmo3";
    case Arch::Exaone4: return "exaone4";
    case Arch::GptOss: return "gpt_oss";
  }
  return "?";
}

std::string family_name(const ModelConfig& c) {
  if (!c.is_moe()) return arch_name(c.arch);
  if (c.mixtral_names()) return "mixtral";
  if (c.arch == Arch::Olmoe || c.arch == Arch::GptOss) return arch_name(c.arch);
  return arch_name(c.arch) + "_moe";
}

Arch parse_arch(const std::string& s) {
  if (s == "llama") return Arch::Llama;
  if (s == "mistral") return Arch::Mistral;
  if (s == "gemma2") return Arch::Gemma2;
  if (s == "qwen2") return Arch::Qwen2;
  if (s == "qwen3") return Arch::Qwen3;
  if (s == "gemma3") return Arch::Gemma3;
  if (s == "olmo2") return Arch::Olmo2;
  if (s == "olmoe") return Arch::Olmoe;
  if (s == "olmo3") return Arch::Olmo3;
  if (s == "exaone4") return Arch::Exaone4;
  if (s == "gpt_oss") return Arch::GptOss;
  fail_usage(
      "unknown architecture '{}' (supported: llama, mistral, gemma2, qwen2, qwen3, gemma3, olmo2, olmoe, olmo3, "
      "exaone4, gpt_oss)",
      s);
}

void ModelConfig::validate() const {
  auto bad = [&](const char* what, long v) { fail("{}: invalid config: {} = {}", source, what, v); };
  if (dim <= 0 || dim > (1 << 16)) bad("hidden size", dim);
  if (hidden_dim <= 0 || hidden_dim > (1 << 18)) bad("intermediate size", hidden_dim);
  if (n_layers <= 0 || n_layers > 1024) bad("number of layers", n_layers);
  if (n_heads <= 0 || n_heads > 1024) bad("number of attention heads", n_heads);
  if (n_kv_heads <= 0 || n_kv_heads > n_heads) bad("number of key/value heads", n_kv_heads);
  if (n_heads % n_kv_heads != 0)
    fail("{}: invalid config: {} attention heads are not a multiple of {} key/value heads", source, n_heads,
         n_kv_heads);
  if (head_dim <= 0 || head_dim > 1024 || head_dim % 2 != 0) bad("head dim", head_dim);
  if (vocab_size <= 0 || vocab_size > (1 << 24)) bad("vocab size", vocab_size);
  if (max_seq_len <= 0 || max_seq_len > (1 << 24)) bad("context length", max_seq_len);
  if (!(rope_theta > 0.0f)) fail("{}: invalid config: rope_theta = {}", source, rope_theta);
  if (!(norm_eps > 0.0f) || norm_eps > 1.0f) fail("{}: invalid config: rms_norm_eps = {}", source, norm_eps);
  if (sliding_window < 0) bad("sliding window", sliding_window);
  if (sliding_window_period < 1 || sliding_window_period > 1024) bad("sliding window layer period", sliding_window_period);
  if (rope_local_theta < 0.0f || !std::isfinite(rope_local_theta))
    fail("{}: invalid config: rope_local_base_freq = {}", source, rope_local_theta);
  for (size_t i = 0; i < nope_layers.size(); ++i) {
    if (nope_layers[i] < 0 || nope_layers[i] >= n_layers) bad("layer without RoPE", nope_layers[i]);
    if (i > 0 && nope_layers[i] <= nope_layers[i - 1])
      fail("{}: invalid config: the layers without RoPE must be listed once each, ascending", source);
  }
  for (auto [name, v] : {std::pair{"embedding_multiplier", embedding_multiplier},
                         std::pair{"residual_multiplier", residual_multiplier}, std::pair{"logits_scaling", logits_scaling}})
    if (!(v > 0.0f) || !std::isfinite(v)) fail("{}: invalid config: {} = {} (must be a positive number)", source, name, v);
  if (attention_multiplier < 0.0f || !std::isfinite(attention_multiplier))
    fail("{}: invalid config: attention_multiplier = {}", source, attention_multiplier);
  if (int e; std::frexp(logits_scaling, &e) != 0.5f)
    fail("{}: logits_scaling = {} is not supported: only a power of two, whose division is multiplication by its "
         "exact reciprocal (the published Granite models' 8 and 16 are)",
         source, logits_scaling);
  if (granite_multipliers() && (gemma_family() || post_norms_only()))
    fail("{}: invalid config: Granite's multipliers on {}, which has its own scaling", source, arch_name(arch));
  if (query_pre_attn_scalar < 0.0f || !std::isfinite(query_pre_attn_scalar))
    fail("{}: invalid config: query_pre_attn_scalar = {}", source, query_pre_attn_scalar);
  if (gemma_family() && !(query_pre_attn_scalar > 0.0f))
    fail("{}: invalid config: {} needs query_pre_attn_scalar > 0 (got {})", source, arch_name(arch),
         query_pre_attn_scalar);
  if (attn_logit_softcapping < 0.0f || !std::isfinite(attn_logit_softcapping))
    fail("{}: invalid config: attn_logit_softcapping = {}", source, attn_logit_softcapping);
  if (final_logit_softcapping < 0.0f || !std::isfinite(final_logit_softcapping))
    fail("{}: invalid config: final_logit_softcapping = {}", source, final_logit_softcapping);
  if (rotary_dim < 0 || rotary_dim > head_dim || rotary_dim % 2 != 0)
    fail("{}: invalid config: {} rotated dimensions of a head of {} (partial_rotary_factor; must be even, at most "
         "head_dim)",
         source, rotary_dim, head_dim);
  if (rope_scaling == RopeScaling::LongRope) {
    const size_t n = size_t(rotated_dims() / 2);
    for (auto [name, f] : {std::pair{"short_factor", &rope_short_factors}, std::pair{"long_factor", &rope_long_factors}}) {
      if (f->size() != n)
        fail("{}: invalid config: longrope {} has {} entries for {} rotated dimensions (expected {})", source, name,
             f->size(), rotated_dims(), n);
      for (float v : *f)
        if (!(v > 0.0f && std::isfinite(v))) fail("{}: invalid config: longrope {} entry {}", source, name, v);
    }
    if (rope_original_max_pos <= 0 || rope_original_max_pos > max_seq_len)
      fail("{}: invalid config: longrope original_max_position_embeddings = {} (must be in [1, {}])", source,
           rope_original_max_pos, max_seq_len);
    if (!(rope_attention_factor > 0.0) || !std::isfinite(rope_attention_factor))
      fail("{}: invalid config: longrope attention_factor = {} (must be a positive number)", source,
           rope_attention_factor);
  } else if (rope_scaling == RopeScaling::FreqFactors) {
    if (rope_freq_factors.size() != size_t(head_dim / 2))
      fail("{}: invalid config: {} rope frequency factors for head_dim {} (expected {})", source,
           rope_freq_factors.size(), head_dim, head_dim / 2);
    for (float f : rope_freq_factors)
      if (!(f > 0.0f && std::isfinite(f))) fail("{}: invalid config: rope frequency factor {}", source, f);
  } else if (rope_scaling != RopeScaling::None && !(rope_factor > 0.0f && std::isfinite(rope_factor)))
    fail("{}: invalid config: rope_scaling factor = {}", source, rope_factor);
  if (query_temperature_beta < 0.0f || !std::isfinite(query_temperature_beta))
    fail("{}: invalid config: llama_4_scaling_beta = {}", source, query_temperature_beta);
  if (query_temperature_beta > 0.0f && query_temperature_context <= 0)
    bad("query temperature context (original_max_position_embeddings)", query_temperature_context);
  if (rope_scaling == RopeScaling::Yarn) {
    if (rope_original_max_pos <= 0)
      fail("{}: invalid config: yarn rope_scaling needs original_max_position_embeddings > 0 (got {})", source,
           rope_original_max_pos);
    for (auto [name, v] : {std::pair{"beta_fast", rope_yarn_beta_fast}, std::pair{"beta_slow", rope_yarn_beta_slow},
                           std::pair{"attention_factor", rope_attention_factor}})
      if (!(v > 0.0) || !std::isfinite(v))
        fail("{}: invalid config: yarn rope_scaling {} = {} (must be a positive number)", source, name, v);
  }
  if (rope_scaling == RopeScaling::Llama3 &&
      (!(rope_high_freq_factor > rope_low_freq_factor) || !(rope_low_freq_factor > 0.0f) || rope_original_max_pos <= 0))
    fail("{}: invalid config: llama3 rope_scaling needs high_freq_factor > low_freq_factor > 0 and "
         "original_max_position_embeddings > 0",
         source);
  if (is_moe()) {
    if (moe.n_experts > 4096) bad("number of experts", moe.n_experts);
    if (moe.n_used <= 0 || moe.n_used > moe.n_experts)
      fail("{}: invalid config: {} experts per token of {} experts", source, moe.n_used, moe.n_experts);
    if (moe.expert_hidden_dim <= 0 || moe.expert_hidden_dim > (1 << 18))
      bad("expert intermediate size", moe.expert_hidden_dim);
    if (moe.shared_hidden_dim < 0 || moe.shared_hidden_dim > (1 << 18))
      bad("shared expert intermediate size", moe.shared_hidden_dim);
    if (moe.sparse_step < 1 || moe.sparse_step > n_layers) bad("decoder sparse step", moe.sparse_step);
    for (int l : moe.dense_layers)
      if (l < 0 || l >= n_layers) bad("dense (mlp_only) layer", l);
    if (gemma_family() || post_norms_only())
      fail("{}: invalid config: {} has no mixture-of-experts form", source, arch_name(arch));
    if (moe.shared_hidden_dim > 0 && arch != Arch::Qwen2)
      fail("{}: invalid config: a shared expert exists only in Qwen2-MoE, not {}", source, arch_name(arch));
    if (!(moe.swiglu_limit >= 0.0f) || !std::isfinite(moe.swiglu_limit))
      fail("{}: invalid config: swiglu_limit = {}", source, moe.swiglu_limit);
    if (!(moe.swiglu_alpha > 0.0f) || !std::isfinite(moe.swiglu_alpha))
      fail("{}: invalid config: swiglu alpha = {}", source, moe.swiglu_alpha);
    // The clamped SwiGLU, the experts' biases and the top-k-then-softmax routing go together in
    // GPT-OSS, and the forward pass takes them as one kind of sparse layer.
    const bool gpt_oss_experts = moe.swiglu_limit > 0.0f || moe.routing == MoeConfig::Routing::TopKThenSoftmax;
    if (gpt_oss_experts != (arch == Arch::GptOss))
      fail("{}: invalid config: GPT-OSS's experts (clamped SwiGLU, top-k-then-softmax routing) exist only in "
           "gpt_oss, and gpt_oss has only them (architecture '{}')",
           source, arch_name(arch));
    if (arch == Arch::GptOss && (moe.sparse_step != 1 || !moe.dense_layers.empty()))
      fail("{}: invalid config: every layer of gpt_oss is sparse", source);
  } else if (arch == Arch::Olmoe || arch == Arch::GptOss) {
    fail("{}: invalid config: {} is a mixture of experts, and this one has none", source, arch_name(arch));
  } else if (moe.n_used != 0 || moe.expert_hidden_dim != 0 || moe.shared_hidden_dim != 0) {
    fail("{}: invalid config: expert settings without experts", source);
  }
  if ((o_bias || attention_sinks) && arch != Arch::GptOss)
    fail("{}: invalid config: an o_proj bias and attention sinks exist only in gpt_oss, not {}", source,
         arch_name(arch));
  if (bos_id >= vocab_size) bad("bos token id", bos_id);
  if (eos_id >= vocab_size) bad("eos token id", eos_id);
  for (int id : more_eos_ids)
    if (id < 0 || id >= vocab_size) bad("eos token id", id);
}

int window_period_of(const std::vector<bool>& windowed, int* mismatch) {
  if (std::find(windowed.begin(), windowed.end(), true) == windowed.end()) return 0;
  const auto global = std::find(windowed.begin(), windowed.end(), false);
  const int period = global == windowed.end() ? 1 : int(global - windowed.begin()) + 1;
  for (size_t l = 0; l < windowed.size(); ++l)
    if (windowed[l] != ModelConfig::local_in_period(int(l), period)) {
      *mismatch = int(l);
      return -1;
    }
  return period;
}

float ModelConfig::query_temperature(int pos) const {
  if (query_temperature_beta == 0.0f || pos < query_temperature_context) return 1.0f;
  // _get_llama_4_attn_scale on fp32 tensors: pos / context, floor, log (portable_math's, the same
  // bits on every machine, within an ulp of torch's), each op rounded to fp32.
  const float steps = std::floor(float(pos) / float(query_temperature_context));
  const float ln = float(pmath::log(double(1.0f + steps)));
  return 1.0f + query_temperature_beta * ln;
}

bool ModelConfig::ends_generation(int id) const {
  return id == eos_id || std::find(more_eos_ids.begin(), more_eos_ids.end(), id) != more_eos_ids.end();
}

}  // namespace kvp
