#pragma once
// Phi-3's own rotary embedding (Phi3Config, Phi3RotaryEmbedding): a partial rotary factor
// (Phi-4-mini rotates 96 of each head's 128 dimensions) and LongRoPE (the 128k Phi-3 models,
// Phi-3.5-mini, Phi-4-mini). kvparity reads Phi3ForCausalLM as the Llama/Mistral decoder it is in
// transformers (hf_config.cpp); these two fields are Phi-3's alone, so they are taken out of the
// config before the decoder's checks, which refuse them for every other family.
//
// LongRoPE as transformers has it (_compute_longrope_parameters, dynamic_rope_update):
// inv_freq[i] = 1 / (ext[i] * theta^(2i/dim)) with dim the rotated dimensions and ext the short
// factors, or the long ones in a forward call whose highest position + 1 exceeds
// original_max_position_embeddings; cos and sin times attention_factor, given or
// sqrt(1 + ln(factor) / ln(original_max_position_embeddings)) for factor > 1, else 1.
// original_max_position_embeddings: rope_scaling's (v5 writes it there), or the config's own field
// (v4), Phi3Config's 4096 when neither. factor: rope_scaling's (v5), or max_position_embeddings /
// original_max_position_embeddings, which transformers v4.45-v4.57 always took; a config where
// the two readings disagree is refused, naming the fields.
#include <nlohmann/json.hpp>
#include <string>

namespace kvp {

struct ModelConfig;

struct Phi3Rotary {
  double partial_rotary_factor = 1.0;
  nlohmann::json longrope;       // the rope_scaling entry, when its type is "longrope"; else null
  nlohmann::json original_max;   // the config's own original_max_position_embeddings; null if absent
};

// Takes partial_rotary_factor and a longrope rope_scaling (or one whose "type" is "su" or "yarn",
// which Phi3Config renames longrope) out of `j` (a Phi3ForCausalLM config, its rope_parameters
// already in rope_scaling form).
Phi3Rotary take_phi3_rotary(nlohmann::json& j, const std::string& source);

// Sets c's rotary_dim and longrope fields; c's head_dim, max_seq_len and rope_theta are read.
void apply_phi3_rotary(const Phi3Rotary& r, ModelConfig& c, const std::string& source, const std::string& rope_field);

// config.json `j` (written as c's decoder) made Phi3ForCausalLM's: model_type phi3, the window or
// null, original_max_position_embeddings, partial_rotary_factor and a longrope rope_scaling
// (attention_factor only where it is not transformers' default), which read back as c. The tensors
// must then be the fused qkv_proj and gate_up_proj (the exporter's).
void write_phi3_fields(nlohmann::json& j, const ModelConfig& c, const std::string& path);

}  // namespace kvp
