#pragma once
// EXAONE 4.0 (Exaone4ForCausalLM: EXAONE-4.0-1.2B, -32B), as transformers has it: OLMo-2's block
// placement (no norm before attention or the MLP, their outputs normalised before the residual
// adds) with Llama's RMSNorm rounding, q and k normalised per head (as Qwen3), and, when
// sliding_window is set, a hybrid of windowed layers that rotate and global layers that take no
// positional encoding ("global NoPE"); without a window every layer is global and rotates.
// hf_config.cpp calls these for model_type "exaone4".
#include <nlohmann/json.hpp>
#include <string>

namespace kvp {

struct ModelConfig;

// The window and the layer kinds, into c (whose n_layers is read): layer_types where given, else
// sliding_window_pattern (an int P: all but every P-th layer local; or a string of L and G, "LLLG",
// repeated), Exaone4Config's 4 when absent; the global layers become NoPE layers. A pattern that is
// not all-but-every-P-th is refused, naming the field.
void read_exaone4_fields(const nlohmann::json& j, ModelConfig& c, const std::string& source);

// config.json's fields for an EXAONE 4.0 model (sliding_window, sliding_window_pattern, layer_types).
void write_exaone4_fields(nlohmann::json& j, const ModelConfig& c, const std::string& path);

}  // namespace kvp
