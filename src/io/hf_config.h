#pragma once
// Hugging Face config.json <-> ModelConfig for the llama / mistral / gemma2 / qwen2 families.
#include <map>
#include <string>

#include "model/config.h"

namespace kvp {

// Parses config.json text. `source` names the file in errors and becomes ModelConfig::source.
// `extras`, when given, receives family values ModelConfig has no field for (see Checkpoint::extras).
// `text_model_of`, when given, receives the class of the vision-language wrapper whose text model the
// config describes (hf_text_model.h), or "" for a plain causal LM; `read_from`, the class of a model
// read as another family's ("Phi3ForCausalLM", read as llama or mistral), or "". Calls
// ModelConfig::validate().
ModelConfig parse_hf_config(const std::string& json_text, const std::string& source,
                            std::map<std::string, double>* extras = nullptr, std::string* text_model_of = nullptr,
                            std::string* read_from = nullptr);
ModelConfig read_hf_config(const std::string& path, std::map<std::string, double>* extras = nullptr,
                           std::string* text_model_of = nullptr, std::string* read_from = nullptr);

// Writes a config.json that transformers would load as the family's *ForCausalLM.
// `torch_dtype`: "float32" | "float16" | "bfloat16". `extras` supplies Gemma-2's
// query_pre_attn_scalar / attn_logit_softcapping / final_logit_softcapping (transformers'
// Gemma2Config defaults are used for any that are missing). Atomic (path.tmp, then rename).
void write_hf_config(const std::string& path, const ModelConfig& cfg, const std::string& torch_dtype = "float32",
                     const std::map<std::string, double>& extras = {});
// The text write_hf_config writes (its checks run here): an exporter renders it before it writes
// any tensor, so a model config.json cannot say leaves nothing behind.
std::string hf_config_text(const std::string& path, const ModelConfig& cfg, const std::string& torch_dtype = "float32",
                           const std::map<std::string, double>& extras = {});

}  // namespace kvp
