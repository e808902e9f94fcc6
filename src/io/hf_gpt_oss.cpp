#include "io/hf_gpt_oss.h"

#include <vector>

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
  // GptOssConfig's default layer_types: sliding_attention where (l + 1) % 2 != 0, the even layers.
  std::vector<bool> sliding(size_t(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) sliding[size_t(l)] = ModelConfig::local_in_period(l, 2);
  if (auto kinds = hf_layer_types(j, c.n_layers, source)) sliding = *kinds;
  int bad = 0;
  const int period = window_period_of(sliding, &bad);
  if (period < 0 || (period > 0 && c.sliding_window == 0))
    fail("{}: layer kinds that are not a window on all but every n-th layer are not supported (config.json field "
         "layer_types, layer {})",
         source, period < 0 ? bad : 0);
  if (period == 0) {
    c.sliding_window = 0;
    return;
  }
  c.sliding_window_period = period;
}

}  // namespace kvp
