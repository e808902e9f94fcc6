#include "io/gguf_mistral3.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/hf_rope_scaling.h"

namespace kvp {

namespace {

// The rope_scaling entry a mistral3 GGUF's YaRN keys stand for, with the attention factor its graph
// ends at, so that the reader and the writer derive the rest by transformers' one formula.
nlohmann::json mistral3_yarn(double factor, int original, double beta_fast, double beta_slow) {
  return {{"rope_type", "yarn"},     {"factor", factor},       {"original_max_position_embeddings", original},
          {"beta_fast", beta_fast}, {"beta_slow", beta_slow}, {"attention_factor", 1.0}};
}

// Keys whose values would change the YaRN rotation away from what llama.cpp's mistral3 graph does
// (it passes its own attn_factor and ext_factor 1): accepted only at those values.
constexpr const char* kYarnNeutralKeys[] = {"rope.scaling.attn_factor", "rope.scaling.yarn_attn_factor",
                                            "rope.scaling.yarn_ext_factor"};

}  // namespace

void read_mistral3_gguf_keys(const GgufMeta& m, const std::string& A, ModelConfig& c, const std::string& name) {
  c.arch = Arch::Mistral;
  if (c.sliding_window > 0)
    fail("{}: a sliding window is not supported for mistral3 (key {}attention.sliding_window); llama.cpp's mistral3 "
         "graph attends to every position",
         name, A);
  if (m.find(A + "attention.scale") != nullptr)
    fail("{}: key '{}attention.scale' (a score scale other than 1/sqrt(head_dim)) is not supported for mistral3", name,
         A);
  const int context = m.get_int(A + "rope.scaling.original_context_length", c.max_seq_len);
  if (context < 1) fail("{}: key '{}rope.scaling.original_context_length' must be positive", name, A);
  const double beta = m.get_num(A + "attention.temperature_scale", 0.0);
  if (!(beta >= 0.0) || !std::isfinite(beta))
    fail("{}: key '{}attention.temperature_scale' = {} must be a number >= 0", name, A, beta);
  if (beta > 0.0) {
    c.query_temperature_beta = float(beta);
    c.query_temperature_context = context;
  }

  if (c.rope_scaling == ModelConfig::RopeScaling::Linear)
    fail("{}: linear RoPE scaling is not supported for mistral3 (key {}rope.scaling.type): llama.cpp's mistral3 graph "
         "damps the rotation by 1 / (1 + 0.1 ln factor), which no transformers model does",
         name, A);
  const std::string type = m.get_str(A + "rope.scaling.type", "none");
  if (type == "none" || type.empty()) return;
  if (type != "yarn")
    fail("{}: rope scaling type '{}' is not supported for mistral3 (key {}rope.scaling.type; yarn or none)", name, type,
         A);
  for (const char* k : kYarnNeutralKeys)
    if (m.find(A + k) != nullptr && m.get_num(A + k, 1.0) != 1.0)
      fail("{}: key '{}{}' = {}: llama.cpp's mistral3 graph rotates with its own YaRN attention factor and "
           "extrapolation, which this key would contradict; not supported",
           name, A, k, m.get_num(A + k, 1.0));
  const GgufYarnRamp r = read_gguf_yarn_ramp(m, A, name);
  read_hf_rope_scaling(mistral3_yarn(r.factor, context, r.beta_fast, r.beta_slow), "yarn", c, name, A + "rope.scaling");
}

void mistral3_gguf_keys(const ModelConfig& c, const std::string& A, const std::string& path,
                        std::vector<std::pair<std::string, GgufValue>>& out) {
  if (c.arch != Arch::Mistral || c.sliding_window > 0 || c.is_moe() || c.qkv_bias || !c.nope_layers.empty())
    fail("{}: llama.cpp's mistral3 is Mistral's dense decoder without a window, biases or layers without RoPE; this "
         "model is not",
         path);
  // One context for both (llama.cpp's n_ctx_orig_yarn): YaRN's original one, else the temperature's.
  const bool yarn = c.rope_scaling == ModelConfig::RopeScaling::Yarn;
  const bool temperature = c.query_temperature_beta > 0.0f;
  const int context = yarn ? c.rope_original_max_pos : temperature ? c.query_temperature_context : c.max_seq_len;
  if (temperature && c.query_temperature_context != context)
    fail("{}: a mistral3 GGUF divides the temperature's positions by its YaRN original context, {}; this model by {}",
         path, context, c.query_temperature_context);
  if (temperature) out.emplace_back(A + "attention.temperature_scale", GgufValue::of_f32(c.query_temperature_beta));
  if (yarn || temperature)
    out.emplace_back(A + "rope.scaling.original_context_length", GgufValue::of_u32(uint32_t(context)));
  // llama.cpp's graph multiplies cos/sin by 1 / (1 + 0.1 ln s) for any frequency scale s, which only
  // YaRN's own magnitude cancels: linear scaling would come out damped.
  if (c.rope_scaling == ModelConfig::RopeScaling::Linear)
    fail("{}: linear RoPE scaling has no mistral3 GGUF form (llama.cpp's mistral3 graph damps its rotation)", path);
  if (!yarn) return;  // unscaled, or llama3's per-frequency factors (rope_freqs.weight, written by the caller)
  ModelConfig derived = c;
  read_hf_rope_scaling(mistral3_yarn(c.rope_factor, context, c.rope_yarn_beta_fast, c.rope_yarn_beta_slow), "yarn",
                       derived, path, A + "rope.scaling");
  if (!c.rope_yarn_truncate || c.rope_attention_factor != derived.rope_attention_factor)
    fail("{}: a mistral3 GGUF says YaRN by factor, original context and betas only (attention factor 1, the ramp "
         "truncated); this model's RoPE scaling is not that",
         path);
  out.emplace_back(A + "rope.scaling.type", GgufValue::of_str("yarn"));
  out.emplace_back(A + "rope.scaling.factor", GgufValue::of_f32(c.rope_factor));
  out.emplace_back(A + "rope.scaling.yarn_beta_fast", GgufValue::of_f32(float(c.rope_yarn_beta_fast)));
  out.emplace_back(A + "rope.scaling.yarn_beta_slow", GgufValue::of_f32(float(c.rope_yarn_beta_slow)));
  // The converter's mscale_all_dim (1 for every Ministral 3): llama.cpp's graph does not read it.
  out.emplace_back(A + "rope.scaling.yarn_log_multiplier", GgufValue::of_f32(1.0f));
}

}  // namespace kvp
