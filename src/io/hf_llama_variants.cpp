#include "io/hf_llama_variants.h"

#include <fmt/format.h>

#include "core/error.h"
#include "model/config.h"

namespace kvp {

using nlohmann::json;

namespace {

constexpr const char* kClass = "SmolLM3ForCausalLM";
constexpr const char* kGranite = "GraniteForCausalLM";

bool is_config_of(const json& j, const char* model_type, const char* cls) {
  if (j.contains("model_type") && j["model_type"].is_string()) return j["model_type"] == model_type;
  return j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
         j["architectures"][0] == cls;
}

}  // namespace

bool is_smollm3_config(const json& j) { return is_config_of(j, "smollm3", kClass); }

std::vector<int> read_smollm3_config(json& j, const std::string& source) {
  auto int_field = [&](const char* k) -> int64_t {
    if (!j.contains(k) || !j[k].is_number_integer()) fail("{}: field '{}' must be an integer, got {}", source, k,
                                                           j.contains(k) ? j[k].dump() : "nothing");
    return j[k].get<int64_t>();
  };
  if (!j.contains("num_hidden_layers")) j["num_hidden_layers"] = 36;
  const int64_t n_layers = int_field("num_hidden_layers");
  if (n_layers <= 0 || n_layers > 1024) fail("{}: invalid config: num_hidden_layers = {}", source, n_layers);
  // SmolLM3Config's defaults where LlamaConfig's differ (the class's own, for a config that omits them).
  // (SmolLM3Config's __init__: the 3B's shape, tied, base 2e6 as its default_theta.)
  for (const auto& [k, v] :
       {std::pair<const char*, json>{"vocab_size", 128256}, {"hidden_size", 2048}, {"intermediate_size", 11008},
        {"num_attention_heads", 16}, {"num_key_value_heads", 4}, {"max_position_embeddings", 32768},
        {"rms_norm_eps", 1e-6}, {"tie_word_embeddings", true}, {"rope_theta", 2000000.0}, {"bos_token_id", 128000},
        {"eos_token_id", 128001}})
    if (!j.contains(k)) j[k] = v;
  // The window: SmolLM3Attention windows a layer only with use_sliding_window and that layer's kind
  // "sliding_attention"; the published models set neither.
  if (j.contains("use_sliding_window") && !j["use_sliding_window"].is_boolean())
    fail("{}: field 'use_sliding_window' must be a bool, got {}", source, j["use_sliding_window"].dump());
  if (j.value("use_sliding_window", false))
    fail("{}: a sliding window is not supported for SmolLM3 (config.json field use_sliding_window)", source);
  for (const char* k : {"use_sliding_window", "sliding_window", "max_window_layers", "layer_types"}) j.erase(k);

  // no_rope_layers[l]: 1 where layer l rotates, 0 where it is a NoPE layer (the name says the
  // opposite of its values: SmolLM3Attention's use_rope = config.no_rope_layers[layer_idx]). When
  // absent, SmolLM3Config makes it from no_rope_layer_interval: (l + 1) % interval != 0.
  std::vector<int> nope;
  if (j.contains("no_rope_layers") && !j["no_rope_layers"].is_null()) {
    const json& list = j["no_rope_layers"];
    // The class reads the first num_hidden_layers entries ("at least the same length").
    if (!list.is_array() || int64_t(list.size()) < n_layers)
      fail("{}: field 'no_rope_layers' must list 0 or 1 for each of the {} layers, got {}", source, n_layers,
           list.dump().substr(0, 200));
    for (int64_t l = 0; l < n_layers; ++l) {
      const json& x = list[size_t(l)];
      if (!(x.is_number_integer() || x.is_boolean()) || (x.is_number_integer() && x != 0 && x != 1))
        fail("{}: field 'no_rope_layers' entry {} must be 0 or 1, got {}", source, l, x.dump());
      if (x == 0 || x == false) nope.push_back(int(l));
    }
  } else {
    const int64_t interval = j.contains("no_rope_layer_interval") ? int_field("no_rope_layer_interval") : 4;
    if (interval <= 0) fail("{}: field 'no_rope_layer_interval' = {} must be positive", source, interval);
    for (int64_t l = 0; l < n_layers; ++l)
      if ((l + 1) % interval == 0) nope.push_back(int(l));
  }
  j.erase("no_rope_layers");
  j.erase("no_rope_layer_interval");
  j["model_type"] = "llama";
  j.erase("architectures");
  return nope;
}

void write_smollm3_fields(json& j, const ModelConfig& c, const std::string& path) {
  if (c.arch != Arch::Llama) fail("{}: layers without RoPE exist only in SmolLM3 (Llama's decoder), not {}", path,
                                  arch_name(c.arch));
  j["architectures"] = json::array({kClass});
  j["model_type"] = "smollm3";
  json list = json::array();
  for (int l = 0; l < c.n_layers; ++l) list.push_back(c.rotates(l) ? 1 : 0);
  j["no_rope_layers"] = list;
  j["use_sliding_window"] = false;
  j["sliding_window"] = nullptr;
  j.erase("pretraining_tp");
}

bool is_granite_config(const json& j) { return is_config_of(j, "granite", kGranite); }

GraniteMultipliers read_granite_config(json& j, const std::string& source) {
  auto number = [&](const char* k) -> float {
    if (!j.contains(k) || j[k].is_null()) return 1.0f;
    if (!j[k].is_number()) fail("{}: field '{}' must be a number, got {}", source, k, j[k].dump());
    return float(j[k].get<double>());
  };
  GraniteMultipliers m{number("embedding_multiplier"), number("attention_multiplier"), number("residual_multiplier"),
                       number("logits_scaling")};
  for (const char* k : {"embedding_multiplier", "attention_multiplier", "residual_multiplier", "logits_scaling"})
    j.erase(k);
  j["model_type"] = "llama";
  j.erase("architectures");
  return m;
}

void write_granite_fields(json& j, const ModelConfig& c, const std::string& path) {
  if (c.arch != Arch::Llama) fail("{}: Granite's multipliers exist on Llama's decoder only, not {}", path, arch_name(c.arch));
  if (!c.nope_layers.empty()) fail("{}: a Granite model with layers without RoPE has no config.json form", path);
  auto num = [](float f) { return std::stod(fmt::format("{}", f)); };  // the shortest decimal, as transformers writes
  j["architectures"] = json::array({kGranite});
  j["model_type"] = "granite";
  // Granite multiplies its scores by a number; Llama's divide by sqrt(head_dim), which no number
  // reproduces bit for bit.
  if (!(c.attention_multiplier > 0.0f))
    fail("{}: a Granite model that scales scores as Llama does has no config.json form", path);
  j["embedding_multiplier"] = num(c.embedding_multiplier);
  j["attention_multiplier"] = num(c.attention_multiplier);
  j["residual_multiplier"] = num(c.residual_multiplier);
  j["logits_scaling"] = num(c.logits_scaling);
  j.erase("pretraining_tp");
}

}  // namespace kvp
