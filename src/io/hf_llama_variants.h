#pragma once
// Checkpoints whose class is Llama's decoder with one twist, read as `llama` with the twist in
// ModelConfig (hf_config.cpp calls these before the family's own fields are read).
//
// SmolLM3 (SmolLM3ForCausalLM, HuggingFaceTB/SmolLM3-3B): in transformers Llama's decoder whose
// attention skips RoPE in the layers no_rope_layers marks 0 (by default every
// no_rope_layer_interval-th, 4: layers 3, 7, 11, ...), so those layers' q and k carry no position.
// Read as `llama` with ModelConfig::nope_layers; the rest of the model is Llama's, field for field.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvp {

struct ModelConfig;

// Whether config.json `j` is SmolLM3's (model_type "smollm3", or its class in architectures).
bool is_smollm3_config(const nlohmann::json& j);

// Rewrites SmolLM3's config `j` into the Llama config it amounts to (SmolLM3Config's own defaults
// filled in where LlamaConfig's differ) and returns the layers without RoPE, ascending. What it
// cannot run (a sliding window, a no_rope_layers list of the wrong length or values) is refused,
// naming the field; `source` names the file.
std::vector<int> read_smollm3_config(nlohmann::json& j, const std::string& source);

// config.json's SmolLM3 form of a Llama config with layers without RoPE (convert --to hf).
void write_smollm3_fields(nlohmann::json& j, const ModelConfig& c, const std::string& path);

// Granite (GraniteForCausalLM: granite-3.x dense): Llama's decoder with four multipliers
// (ModelConfig::embedding_multiplier and the three beside it).
struct GraniteMultipliers {
  float embedding = 1.0f, attention = 1.0f, residual = 1.0f, logits = 1.0f;
};
bool is_granite_config(const nlohmann::json& j);
// Reads the multipliers (GraniteConfig's defaults, 1.0 each, where absent; note attention's: a
// config without it scales scores by 1, not 1/sqrt(head_dim)) and rewrites `j` as the Llama config
// it otherwise is.
GraniteMultipliers read_granite_config(nlohmann::json& j, const std::string& source);
// config.json's Granite form of a config with multipliers.
void write_granite_fields(nlohmann::json& j, const ModelConfig& c, const std::string& path);

}  // namespace kvp
