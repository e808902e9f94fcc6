#include "io/hf_ministral3.h"

#include <cmath>

#include "core/error.h"
#include "model/config.h"

namespace kvp {

using nlohmann::json;

namespace {

const char* kMinistral3Class = "Ministral3ForCausalLM";

// Ministral3Config.__post_init__'s rope_parameters when none is given.
json default_rope() {
  return {{"rope_type", "yarn"},
          {"rope_theta", 1000000.0},
          {"factor", 16.0},
          {"original_max_position_embeddings", 16384},
          {"beta_fast", 32.0},
          {"beta_slow", 1.0},
          {"mscale_all_dim", 1.0},
          {"mscale", 1.0},
          {"llama_4_scaling_beta", 0.1}};
}

}  // namespace

bool is_ministral3_config(const json& j) {
  if (j.contains("model_type") && j["model_type"].is_string()) return j["model_type"] == "ministral3";
  return j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
         j["architectures"][0] == kMinistral3Class;
}

json ministral3_defaults() {
  return {{"vocab_size", 131072},
          {"hidden_size", 4096},
          {"intermediate_size", 14336},
          {"num_hidden_layers", 34},
          {"num_attention_heads", 32},
          {"num_key_value_heads", 8},
          {"head_dim", 128},
          {"max_position_embeddings", 262144},
          {"rms_norm_eps", 1e-5},
          {"sliding_window", nullptr},
          {"tie_word_embeddings", false},
          {"bos_token_id", 1},
          {"eos_token_id", 2}};
}

void read_ministral3_config(json& j) {
  j["model_type"] = "mistral";
  j.erase("architectures");
  const bool has_rope = (j.contains("rope_parameters") && !j["rope_parameters"].is_null()) ||
                        (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) || j.contains("rope_theta");
  if (!has_rope) j["rope_parameters"] = default_rope();
  // A window only where the file gives one (Ministral3Config's default is none; Mistral's 4096).
  if (!j.contains("sliding_window")) j["sliding_window"] = nullptr;
}

void read_ministral3_temperature(const json& rope, ModelConfig& c, const std::string& source, const std::string& field) {
  if (!rope.is_object() || !rope.contains("llama_4_scaling_beta") || rope["llama_4_scaling_beta"].is_null()) return;
  const json& b = rope["llama_4_scaling_beta"];
  if (!b.is_number() || !(b.get<double>() >= 0.0) || !std::isfinite(b.get<double>()))
    fail("{}: llama_4_scaling_beta must be a number >= 0, got {} (config.json field {}.llama_4_scaling_beta)", source,
         b.dump(), field);
  if (b.get<double>() == 0.0) return;
  // Ministral3Attention divides the positions by this very key of the dict.
  if (!rope.contains("original_max_position_embeddings") || !rope["original_max_position_embeddings"].is_number())
    fail("{}: llama_4_scaling_beta needs original_max_position_embeddings beside it (config.json field {})", source,
         field);
  const double ctx = rope["original_max_position_embeddings"].get<double>();
  if (!(ctx >= 1.0 && ctx <= double(1 << 24)) || ctx != std::floor(ctx))
    fail("{}: original_max_position_embeddings = {} must be a positive integer (config.json field {})", source, ctx,
         field);
  c.query_temperature_beta = float(b.get<double>());
  c.query_temperature_context = int(ctx);
}

void write_ministral3_fields(json& j, const ModelConfig& c, const std::string& path) {
  if (c.arch != Arch::Mistral)
    fail("{}: the query temperature (llama_4_scaling_beta) has a config.json form only on Mistral's decoder "
         "(Ministral3ForCausalLM), not {}",
         path, arch_name(c.arch));
  if (c.rope_scaling == ModelConfig::RopeScaling::Yarn && c.rope_original_max_pos != c.query_temperature_context)
    fail("{}: Ministral 3's temperature context is its YaRN original_max_position_embeddings; {} and {} differ", path,
         c.query_temperature_context, c.rope_original_max_pos);
  j["architectures"] = json::array({kMinistral3Class});
  j["model_type"] = "ministral3";
  json rope = j.contains("rope_scaling") && j["rope_scaling"].is_object() ? j["rope_scaling"] : json::object();
  if (!rope.contains("rope_type")) rope["rope_type"] = "default";
  rope["llama_4_scaling_beta"] = std::stod(fmt::format("{}", c.query_temperature_beta));
  rope["original_max_position_embeddings"] = c.query_temperature_context;
  j["rope_scaling"] = rope;
}

}  // namespace kvp
