#pragma once
// The canonical (Hugging Face) tensor names of a sparse layer's MLP: Mixtral's
// (block_sparse_moe.gate, block_sparse_moe.experts.{e}.w1 / w3 / w2 for gate / up / down) or
// Qwen-MoE's and OLMoE's (mlp.gate, mlp.experts.{e}.gate_proj / up_proj / down_proj, Qwen2-MoE's
// mlp.shared_expert.* and mlp.shared_expert_gate). GPT-OSS's router is mlp.router (weight and
// bias); its fused experts are unpacked (io/hf_gpt_oss_experts.h) into Qwen's per-expert names, each
// matrix with a .bias beside it. Loaders, writers and the weights builder all name them here.
#include <string>

#include "model/config.h"

namespace kvp {

enum class ExpertMatrix { Gate, Up, Down };

inline std::string moe_layer_prefix(const ModelConfig& c, int layer) {
  return "model.layers." + std::to_string(layer) + (c.mixtral_names() ? ".block_sparse_moe." : ".mlp.");
}

inline std::string moe_router_name(const ModelConfig& c, int layer) {
  return moe_layer_prefix(c, layer) + (c.arch == Arch::GptOss ? "router.weight" : "gate.weight");
}
inline std::string moe_router_bias_name(const ModelConfig& c, int layer) {
  return moe_layer_prefix(c, layer) + "router.bias";
}

// A SwiGLU matrix's own name: Mixtral's w1 / w3 / w2, else (Qwen's experts, the shared expert)
// gate_proj / up_proj / down_proj.
inline const char* expert_matrix_suffix(bool mixtral, ExpertMatrix m) {
  static const char* const mixtral_names[] = {"w1", "w3", "w2"};
  static const char* const qwen_names[] = {"gate_proj", "up_proj", "down_proj"};
  return (mixtral ? mixtral_names : qwen_names)[int(m)];
}

inline std::string expert_matrix_name(const ModelConfig& c, int layer, int expert, ExpertMatrix m) {
  return moe_layer_prefix(c, layer) + "experts." + std::to_string(expert) + "." +
         expert_matrix_suffix(c.mixtral_names(), m) + ".weight";
}

// GPT-OSS: the bias of expert `expert`'s matrix m (gate_proj.bias, ...).
inline std::string expert_bias_name(const ModelConfig& c, int layer, int expert, ExpertMatrix m) {
  return moe_layer_prefix(c, layer) + "experts." + std::to_string(expert) + "." +
         expert_matrix_suffix(c.mixtral_names(), m) + ".bias";
}

// One matrix of all a layer's experts as one [experts, rows, cols] tensor (GGUF's ffn_*_exps):
// expert_matrix_name without the index, a name of kvparity's that no HF checkpoint has.
inline std::string stacked_experts_name(const ModelConfig& c, int layer, ExpertMatrix m) {
  return moe_layer_prefix(c, layer) + "experts." + expert_matrix_suffix(c.mixtral_names(), m) + ".weight";
}

// GPT-OSS's biases of one matrix of all a layer's experts as one [experts, rows] tensor (GGUF's
// ffn_*_exps.bias), named as stacked_experts_name names the matrices.
inline std::string stacked_expert_biases_name(const ModelConfig& c, int layer, ExpertMatrix m) {
  return moe_layer_prefix(c, layer) + "experts." + expert_matrix_suffix(c.mixtral_names(), m) + ".bias";
}

inline std::string shared_expert_name(int layer, ExpertMatrix m) {
  return "model.layers." + std::to_string(layer) + ".mlp.shared_expert." + expert_matrix_suffix(false, m) +
         ".weight";
}

inline std::string shared_expert_gate_name(int layer) {
  return "model.layers." + std::to_string(layer) + ".mlp.shared_expert_gate.weight";
}

}  // namespace kvp
