#include "io/hf_exaone4.h"

#include <vector>

#include "core/error.h"
#include "io/hf_config_reader.h"
#include "model/config.h"

namespace kvp {

using nlohmann::json;

namespace {

// Each layer's kind (true: sliding_attention), from layer_types or the pattern.
std::vector<bool> layer_kinds(const json& j, int n_layers, const std::string& source) {
  if (auto kinds = hf_layer_types(j, n_layers, source)) return *kinds;
  const json p = j.contains("sliding_window_pattern") && !j["sliding_window_pattern"].is_null()
                     ? j["sliding_window_pattern"]
                     : json(4);  // Exaone4Config's default
  // Exaone4Config builds layer_types from an int only ((i + 1) % P); a string ("LLLG") comes with
  // layer_types in the published configs, and without them transformers cannot build the model.
  if (!p.is_number_integer() || p.get<int64_t>() < 1 || p.get<int64_t>() > 1024)
    fail("{}: sliding_window_pattern {} without layer_types is not supported (config.json field "
         "sliding_window_pattern; an integer period, or layer_types)",
         source, p.dump());
  std::vector<bool> sliding;
  for (int l = 0; l < n_layers; ++l) sliding.push_back(ModelConfig::local_in_period(l, p.get<int>()));
  return sliding;
}

}  // namespace

void read_exaone4_fields(const json& j, ModelConfig& c, const std::string& source) {
  c.sliding_window = 0;
  c.sliding_window_period = 1;
  c.nope_layers.clear();
  // No window: every layer global, and every one rotates (Exaone4Attention rotates when
  // sliding_window is None).
  if (j.contains("sliding_window") && j["sliding_window"].is_null()) return;
  int window = 4096;
  if (j.contains("sliding_window")) {
    if (!j["sliding_window"].is_number_integer() || j["sliding_window"].get<int64_t>() < 1 ||
        j["sliding_window"].get<int64_t>() > int64_t(1) << 24)
      fail("{}: field 'sliding_window' must be a positive integer or null, got {}", source, j["sliding_window"].dump());
    window = j["sliding_window"].get<int>();
  }
  const std::vector<bool> sliding = layer_kinds(j, c.n_layers, source);
  // The global layers take no RoPE; the local ones the window.
  for (int l = 0; l < c.n_layers; ++l)
    if (!sliding[size_t(l)]) c.nope_layers.push_back(l);
  int bad = 0;
  const int period = window_period_of(sliding, &bad);
  if (period < 0)
    fail("{}: layer kinds that are not a window on all but every n-th layer are not supported (config.json "
         "field layer_types, layer {})",
         source, bad);
  if (period == 0) return;  // none local: every layer global, none rotating
  c.sliding_window = window;
  c.sliding_window_period = period;
}

void write_exaone4_fields(json& j, const ModelConfig& c, const std::string& path) {
  json kinds = json::array();
  std::vector<int> global;
  for (int l = 0; l < c.n_layers; ++l) {
    const bool local = c.sliding_window > 0 && c.local_layer(l);
    kinds.push_back(local ? "sliding_attention" : "full_attention");
    if (!local) global.push_back(l);
  }
  if (c.nope_layers.empty() && c.sliding_window == 0) {  // all global, all rotating
    j["sliding_window"] = nullptr;
    j["sliding_window_pattern"] = nullptr;
    j["layer_types"] = kinds;
    return;
  }
  // A window (or global NoPE) ties the rest: exactly the global layers skip RoPE.
  if (c.nope_layers != global)
    fail("{}: exaone4's layers without RoPE are its global layers when it has a window; this model's are not, "
         "which has no config.json form",
         path);
  j["sliding_window"] = c.sliding_window > 0 ? c.sliding_window : 4096;
  j["sliding_window_pattern"] = c.sliding_window > 0 ? c.local_layer_pattern() : 1;
  j["layer_types"] = kinds;
}

}  // namespace kvp
