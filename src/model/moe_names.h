#pragma once
// The canonical (Hugging Face) tensor names of a sparse layer's MLP: Mixtral's
// (block_sparse_moe.gate, block_sparse_moe.experts.{e}.w1 / w3 / w2 for gate / up / down) or
// Qwen-MoE's (mlp.gate, mlp.experts.{e}.gate_proj / up_proj / down_proj, Qwen2-MoE's
// mlp.shared_expert.* and mlp.shared_expert_gate). Loaders, writers and the weights builder all
// name them here.
#include <string>

#include "model/config.h"

namespace kvp {

enum class ExpertMatrix { Gate, Up, Down };

inline std::string moe_layer_prefix(const ModelConfig& c, int layer) {
  return "model.layers." + std::to_string(layer) + (c.mixtral_names() ? ".block_sparse_moe." : ".mlp.");
}

inline std::string moe_router_name(const ModelConfig& c, int layer) {
  return moe_layer_prefix(c, layer) + "gate.weight";
}

inline std::string expert_matrix_name(const ModelConfig& c, int layer, int expert, ExpertMatrix m) {
  static const char* mixtral[] = {"w1", "w3", "w2"};
  static const char* qwen[] = {"gate_proj", "up_proj", "down_proj"};
  return moe_layer_prefix(c, layer) + "experts." + std::to_string(expert) + "." +
         (c.mixtral_names() ? mixtral : qwen)[int(m)] + ".weight";
}

// One matrix of all a layer's experts as one [experts, rows, cols] tensor (GGUF's ffn_*_exps):
// expert_matrix_name without the index, a name of kvparity's that no HF checkpoint has.
inline std::string stacked_experts_name(const ModelConfig& c, int layer, ExpertMatrix m) {
  static const char* mixtral[] = {"w1", "w3", "w2"};
  static const char* qwen[] = {"gate_proj", "up_proj", "down_proj"};
  return moe_layer_prefix(c, layer) + "experts." + (c.mixtral_names() ? mixtral : qwen)[int(m)] + ".weight";
}

inline std::string shared_expert_name(int layer, ExpertMatrix m) {
  static const char* names[] = {"gate_proj", "up_proj", "down_proj"};
  return "model.layers." + std::to_string(layer) + ".mlp.shared_expert." + names[int(m)] + ".weight";
}

inline std::string shared_expert_gate_name(int layer) {
  return "model.layers." + std::to_string(layer) + ".mlp.shared_expert_gate.weight";
}

}  // namespace kvp
