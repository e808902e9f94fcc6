#pragma once
// Architecture-neutral hyper-parameters. Loaders fill it from config.json, GGUF keys or a
// llama2.c header; the forward pass reads only this.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvp {

enum class Arch { Llama, Mistral, Gemma2, Qwen2 };

std::string arch_name(Arch a);          // "llama" | "mistral" | "gemma2" | "qwen2"
Arch parse_arch(const std::string& s);  // accepts the names above; errors name the value

struct ModelConfig {
  Arch arch = Arch::Llama;
  int dim = 0;              // hidden_size
  int hidden_dim = 0;       // intermediate_size (MLP)
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;         // usually dim / n_heads (Gemma-2 sets it independently)
  int vocab_size = 0;
  int max_seq_len = 0;      // max_position_embeddings / context length
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;
  bool tied_embeddings = false;
  int bos_id = 1;
  int eos_id = 2;           // -1 when the model has none
  // Family features (issue 4); for plain Llama these stay at their defaults.
  bool qkv_bias = false;
  int sliding_window = 0;   // 0 = none
  std::string source;       // file or directory the config came from, for error messages

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  // Throws a clear error naming `source` when the numbers are inconsistent or unsupported.
  void validate() const;
};

}  // namespace kvp
