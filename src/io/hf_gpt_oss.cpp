#include "io/hf_gpt_oss.h"

#include "core/error.h"
#include "io/hf_config_reader.h"
#include "model/config.h"

namespace kvp {

using nlohmann::json;

void fill_gpt_oss_defaults(json& j) {
  const auto absent = [&](const char* k) { return !j.contains(k) || j[k].is_null(); };
  if (absent("rope_scaling") && absent("rope_parameters"))
    j["rope_scaling"] = {{"rope_type", "yarn"},          {"factor", 32.0},  {"beta_fast", 32.0},
                         {"beta_slow", 1.0},             {"truncate", false},
                         {"original_max_position_embeddings", 4096}};
}

void read_gpt_oss_fields(const json& j, ModelConfig& c, const std::string& source) {
  const ConfigReader r(j, source);
  const bool bias = r.get_bool("attention_bias", true);
  c.qkv_bias = bias;
  c.o_bias = bias;
  c.attention_sinks = true;  // GptOssAttention.sinks: hard-wired, no config field
  c.sliding_window = r.get_int("sliding_window", 128);
  if (c.sliding_window < 0) fail("{}: field 'sliding_window' must be a positive integer, got {}", source, c.sliding_window);
  // GptOssConfig's default layer_types: sliding_attention where (l + 1) % 2 != 0, the even layers
  // (hf_config.cpp then reads layer_types, as Gemma's and OLMo-3's).
  c.sliding_window_period = 2;
}

}  // namespace kvp
