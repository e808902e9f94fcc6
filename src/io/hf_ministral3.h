#pragma once
// Ministral 3 (Ministral3ForCausalLM; the text model of the 2512 series' Mistral3ForConditionalGeneration
// checkpoints, Ministral-3-3B/8B/14B): in transformers Mistral's decoder whose queries, once rotated,
// are multiplied by Llama-4's attention temperature 1 + beta ln(1 + floor(pos / original_max_position_
// embeddings)) (rope_parameters' llama_4_scaling_beta; 1 below that context), with YaRN RoPE.
// Read as `mistral` with ModelConfig::query_temperature_beta; hf_config.cpp calls these.
#include <nlohmann/json.hpp>
#include <string>

namespace kvp {

struct ModelConfig;

// Whether config.json `j` is Ministral 3's (model_type "ministral3", or its class in architectures).
bool is_ministral3_config(const nlohmann::json& j);

// Ministral3Config's class defaults (transformers v5), for a wrapper's text_config that lists only
// what differs from them.
nlohmann::json ministral3_defaults();

// Rewrites `j` as the Mistral config it otherwise is: model_type "mistral", Ministral3Config's own
// RoPE (YaRN x16 over 16384, beta 0.1) where the file gives none.
void read_ministral3_config(nlohmann::json& j);

// The temperature's beta and context from the RoPE dict (config.json's rope_scaling, or v5's
// rope_parameters as hf_rope_parameters.h leaves it there), into c; `field` names where it was.
void read_ministral3_temperature(const nlohmann::json& rope, ModelConfig& c, const std::string& source,
                                 const std::string& field);

// config.json's Ministral 3 form of a Mistral config with a query temperature.
void write_ministral3_fields(nlohmann::json& j, const ModelConfig& c, const std::string& path);

}  // namespace kvp
