#include "io/gguf_gpt_oss.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/hf_rope_scaling.h"

namespace kvp {

namespace {

// llama.cpp's gpt-oss graph: the clamped SwiGLU's constants (build_moe_ffn's swiglu_oai) and the
// layers' window period (set_swa_pattern(2): the even layers windowed).
constexpr float kSwigluLimit = 7.0f;
constexpr float kSwigluAlpha = 1.702f;
constexpr int kWindowPeriod = 2;

// Keys whose values feed llama.cpp's own YaRN formula, not transformers': refused rather than
// read as something they are not.
constexpr const char* kLlamaCppYarnKeys[] = {"rope.scaling.attn_factor", "rope.scaling.yarn_attn_factor",
                                             "rope.scaling.yarn_ext_factor", "rope.scaling.yarn_log_multiplier"};

// The rope_scaling entry a gpt-oss GGUF's YaRN keys stand for (its config.json's form, untruncated),
// so that the reader and the writer derive the attention factor by transformers' one formula.
nlohmann::json gpt_oss_yarn(double factor, int original, double beta_fast, double beta_slow) {
  return {{"rope_type", "yarn"},     {"factor", factor},       {"original_max_position_embeddings", original},
          {"beta_fast", beta_fast}, {"beta_slow", beta_slow}, {"truncate", false}};
}

void read_window_pattern(const GgufMeta& m, const std::string& A, const ModelConfig& c, const std::string& name) {
  const std::string key = A + "attention.sliding_window_pattern";
  const GgufValue* v = m.find(key);
  if (v == nullptr) return;
  int period = -1;
  if (v->type == GgufType::Array && v->elem == GgufType::Bool && v->size() == size_t(c.n_layers)) {
    std::vector<bool> windowed;
    for (size_t l = 0; l < v->size(); ++l) windowed.push_back(v->at(l).u != 0);
    int bad = 0;
    period = window_period_of(windowed, &bad);
  } else if (v->is_integer()) {
    period = int(m.integer(key, *v, 0, INT32_MAX));
  } else {
    fail("{}: key '{}' must be an integer or an array of one bool per layer ({} layers)", name, key, c.n_layers);
  }
  if (period != kWindowPeriod)
    fail("{}: key '{}': gpt-oss windows every other layer (the even ones); this file says otherwise", name, key);
}

}  // namespace

void read_gpt_oss_gguf_keys(const GgufMeta& m, const std::string& A, ModelConfig& c, const std::string& name) {
  c.arch = Arch::GptOss;
  c.qkv_bias = c.o_bias = c.attention_sinks = true;
  c.sliding_window = m.get_int(A + "attention.sliding_window");
  c.sliding_window_period = kWindowPeriod;
  read_window_pattern(m, A, c, name);

  MoeConfig& moe = c.moe;
  moe.n_experts = m.get_int(A + "expert_count");
  moe.n_used = m.get_int(A + "expert_used_count");
  moe.expert_hidden_dim = m.get_int(A + "expert_feed_forward_length");
  moe.norm_topk_prob = false;
  moe.routing = MoeConfig::Routing::TopKThenSoftmax;
  moe.swiglu_limit = kSwigluLimit;
  moe.swiglu_alpha = kSwigluAlpha;

  const std::string type = m.get_str(A + "rope.scaling.type", "none");
  if (type == "none" || type.empty()) return;
  if (type != "yarn")
    fail("{}: rope scaling type '{}' is not gpt-oss's (key {}rope.scaling.type; yarn or none)", name, type, A);
  for (const char* k : kLlamaCppYarnKeys)
    if (m.find(A + k) != nullptr)
      fail("{}: key '{}{}' feeds llama.cpp's own YaRN formula, which is not transformers'; kvparity reads gpt-oss's "
           "YaRN from its factor, original context and betas only",
           name, A, k);
  const GgufYarnRamp r = read_gguf_yarn_ramp(m, A, name);
  const int orig = m.get_int(A + "rope.scaling.original_context_length");
  if (orig < 1) fail("{}: key '{}rope.scaling.original_context_length' must be positive", name, A);
  read_hf_rope_scaling(gpt_oss_yarn(r.factor, orig, r.beta_fast, r.beta_slow), "yarn", c, name, A + "rope.scaling");
}

void gpt_oss_gguf_keys(const ModelConfig& c, const std::string& A, const std::string& path,
                       std::vector<std::pair<std::string, GgufValue>>& out) {
  const MoeConfig& moe = c.moe;
  if (moe.swiglu_limit != kSwigluLimit || moe.swiglu_alpha != kSwigluAlpha)
    fail("{}: llama.cpp's gpt-oss clamps its SwiGLU at 7 with alpha 1.702 (no key says otherwise); this model's are "
         "{} and {}",
         path, moe.swiglu_limit, moe.swiglu_alpha);
  if (!c.qkv_bias || !c.o_bias || !c.attention_sinks)
    fail("{}: llama.cpp's gpt-oss has q/k/v/o biases and attention sinks; this model lacks some", path);
  if (c.sliding_window <= 0 || c.sliding_window_period != kWindowPeriod)
    fail("{}: llama.cpp's gpt-oss windows the even layers; this model's window ({}, period {}) has no key there", path,
         c.sliding_window, c.sliding_window_period);
  out.emplace_back(A + "attention.sliding_window", GgufValue::of_u32(uint32_t(c.sliding_window)));
  out.emplace_back(A + "expert_count", GgufValue::of_u32(uint32_t(moe.n_experts)));
  out.emplace_back(A + "expert_used_count", GgufValue::of_u32(uint32_t(moe.n_used)));
  out.emplace_back(A + "expert_feed_forward_length", GgufValue::of_u32(uint32_t(moe.expert_hidden_dim)));
  if (c.rope_scaling == ModelConfig::RopeScaling::None) return;
  // What the reader derives from these keys must be what this model does: the default attention
  // factor, no truncation (transformers' YaRN for gpt-oss).
  const double f = c.rope_factor;
  ModelConfig derived = c;
  if (c.rope_scaling == ModelConfig::RopeScaling::Yarn)
    read_hf_rope_scaling(gpt_oss_yarn(f, c.rope_original_max_pos, c.rope_yarn_beta_fast, c.rope_yarn_beta_slow), "yarn",
                         derived, path, A + "rope.scaling");
  const double mscale = derived.rope_attention_factor;
  if (c.rope_scaling != ModelConfig::RopeScaling::Yarn || c.rope_yarn_truncate ||
      std::fabs(c.rope_attention_factor - mscale) > 1e-12 * mscale)
    fail("{}: a gpt-oss GGUF says YaRN by factor, original context and betas only (attention factor 0.1 ln s + 1, "
         "untruncated); this model's RoPE scaling is not that",
         path);
  out.emplace_back(A + "rope.scaling.type", GgufValue::of_str("yarn"));
  out.emplace_back(A + "rope.scaling.factor", GgufValue::of_f32(float(f)));
  out.emplace_back(A + "rope.scaling.original_context_length", GgufValue::of_u32(uint32_t(c.rope_original_max_pos)));
  out.emplace_back(A + "rope.scaling.yarn_beta_fast", GgufValue::of_f32(float(c.rope_yarn_beta_fast)));
  out.emplace_back(A + "rope.scaling.yarn_beta_slow", GgufValue::of_f32(float(c.rope_yarn_beta_slow)));
}

}  // namespace kvp
