#pragma once
// GPT-OSS (GptOssForCausalLM: gpt-oss-20b, gpt-oss-120b), as transformers v4.55+ has it: Llama's
// pre-norm block with biases on q/k/v/o, a learned sink logit per attention head, a window
// (sliding_window, 128) on the sliding_attention layers (every other one, the first included),
// YaRN on every layer, and a sparse MLP in every layer (hf_moe_config.h reads the experts' fields).
// hf_config.cpp calls these for model_type "gpt_oss".
#include <nlohmann/json.hpp>
#include <string>

namespace kvp {

struct ModelConfig;

// GptOssConfig's defaults for the fields its published configs always give but a hand-written one
// may leave out, inserted into j before it is read: rope_scaling (YaRN, factor 32 over 4096
// positions, untruncated) when neither it nor rope_parameters is present.
void fill_gpt_oss_defaults(nlohmann::json& j);

// The attention's fields into c: the biases (attention_bias, default true), the sinks, the window
// (sliding_window, 128) on GptOssConfig's default layers, the even ones; the caller then applies
// layer_types where given.
void read_gpt_oss_fields(const nlohmann::json& j, ModelConfig& c, const std::string& source);

// The attention's fields of c into config.json j (the experts' are hf_moe_config.h's); fails,
// naming `path`, for a model GptOssConfig cannot say (no biases or sinks, a window not on every
// other layer).
void write_gpt_oss_fields(nlohmann::json& j, const ModelConfig& c, const std::string& path);

}  // namespace kvp
