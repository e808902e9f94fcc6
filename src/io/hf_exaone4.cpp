#include "io/hf_exaone4.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "model/config.h"

namespace kvp {

using nlohmann::json;

namespace {

// Each layer's kind (true: sliding_attention), from layer_types or the pattern.
std::vector<bool> layer_kinds(const json& j, int n_layers, const std::string& source) {
  std::vector<bool> sliding;
  if (j.contains("layer_types") && !j["layer_types"].is_null()) {
    const json& lt = j["layer_types"];
    if (!lt.is_array() || int(lt.size()) != n_layers)
      fail("{}: field 'layer_types' must list one kind per layer ({} layers)", source, n_layers);
    for (const json& t : lt) {
      if (!t.is_string() || (t != "full_attention" && t != "sliding_attention"))
        fail("{}: layer kind {} is not supported (config.json field layer_types)", source, t.dump());
      sliding.push_back(t == "sliding_attention");
    }
    return sliding;
  }
  const json p = j.contains("sliding_window_pattern") && !j["sliding_window_pattern"].is_null()
                     ? j["sliding_window_pattern"]
                     : json(4);  // Exaone4Config's default
  // Exaone4Config builds layer_types from an int only ((i + 1) % P); a string ("LLLG") comes with
  // layer_types in the published configs, and without them transformers cannot build the model.
  if (!p.is_number_integer() || p.get<int64_t>() < 1 || p.get<int64_t>() > 1024)
    fail("{}: sliding_window_pattern {} without layer_types is not supported (config.json field "
         "sliding_window_pattern; an integer period, or layer_types)",
         source, p.dump());
  const int period = p.get<int>();
  for (int l = 0; l < n_layers; ++l) sliding.push_back((l + 1) % period != 0);
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
  const auto first_global = std::find(sliding.begin(), sliding.end(), false);
  if (first_global == sliding.begin() && c.nope_layers.size() == size_t(c.n_layers)) return;  // none local
  c.sliding_window = window;
  c.sliding_window_period = first_global == sliding.end() ? 1 : int(first_global - sliding.begin()) + 1;
  for (int l = 0; l < c.n_layers; ++l)
    if (sliding[size_t(l)] != (c.window_for_layer(l) > 0))
      fail("{}: layer kinds that are not a window on all but every n-th layer are not supported (config.json "
           "field layer_types, layer {})",
           source, l);
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
