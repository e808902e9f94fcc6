#pragma once
// config.json of the mixture-of-experts families: Mixtral (MixtralForCausalLM, Mistral's
// attention), Qwen2-MoE and Qwen3-MoE (Qwen2's / Qwen3's attention), OLMoE (Arch::Olmoe), GPT-OSS
// (Arch::GptOss). hf_config.cpp reads and writes
// the attention's fields as for the dense family; this file the experts'.
#include <optional>
#include <string>
#include <nlohmann/json.hpp>

#include "model/config.h"

namespace kvp {

// The dense family whose attention a MoE config.json's model (model_type, else architectures[0])
// has (OLMoE: Arch::Olmoe; GPT-OSS: Arch::GptOss), or nullopt when it is not one of the five.
std::optional<Arch> hf_moe_family(const nlohmann::json& j);
// The class and model_type transformers names the MoE model of config `c` by (c.is_moe()).
const char* hf_moe_class_name(const ModelConfig& c);
std::string hf_moe_model_type(const ModelConfig& c);

// Reads the experts' fields into c.moe (transformers' v4.51 class defaults where absent); the
// dense fields are read already. Mixtral's experts are intermediate_size wide.
void read_hf_moe_fields(const nlohmann::json& j, ModelConfig& c, const std::string& source);
// Writes them (and refuses what the class cannot say, naming `path`).
void write_hf_moe_fields(nlohmann::json& j, const ModelConfig& c, const std::string& path);

}  // namespace kvp
