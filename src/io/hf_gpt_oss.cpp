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

void write_gpt_oss_fields(json& j, const ModelConfig& c, const std::string& path) {
  if (!c.qkv_bias || !c.o_bias || !c.attention_sinks)
    fail("{}: GptOssConfig's attention has q/k/v/o biases (attention_bias) and sinks, all or none of the biases and "
         "always the sinks; this model has no config.json form",
         path);
  if (c.sliding_window <= 0 || c.sliding_window_period != 2)
    fail("{}: gpt_oss windows every other layer (layer_types); this model's window ({}, period {}) has no "
         "config.json form kvparity reads back",
         path, c.sliding_window, c.sliding_window_period);
  j["attention_bias"] = true;
  j["sliding_window"] = c.sliding_window;
  j["layer_types"] = json::array();
  for (int l = 0; l < c.n_layers; ++l)
    j["layer_types"].push_back(c.window_for_layer(l) > 0 ? "sliding_attention" : "full_attention");
}

}  // namespace kvp
