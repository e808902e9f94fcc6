#include "model/config.h"

#include "core/error.h"

namespace kvp {

std::string arch_name(Arch a) {
  switch (a) {
    case Arch::Llama: return "llama";
    case Arch::Mistral: return "mistral";
    case Arch::Gemma2: return "gemma2";
    case Arch::Qwen2: return "qwen2";
  }
  return "?";
}

Arch parse_arch(const std::string& s) {
  if (s == "llama") return Arch::Llama;
  if (s == "mistral") return Arch::Mistral;
  if (s == "gemma2") return Arch::Gemma2;
  if (s == "qwen2") return Arch::Qwen2;
  fail_usage("unknown architecture '{}' (supported: llama, mistral, gemma2, qwen2)", s);
}

void ModelConfig::validate() const {
  auto bad = [&](const char* what, long v) { fail("{}: invalid config: {} = {}", source, what, v); };
  if (dim <= 0 || dim > (1 << 16)) bad("hidden size", dim);
  if (hidden_dim <= 0 || hidden_dim > (1 << 18)) bad("intermediate size", hidden_dim);
  if (n_layers <= 0 || n_layers > 1024) bad("number of layers", n_layers);
  if (n_heads <= 0 || n_heads > 1024) bad("number of attention heads", n_heads);
  if (n_kv_heads <= 0 || n_kv_heads > n_heads) bad("number of key/value heads", n_kv_heads);
  if (n_heads % n_kv_heads != 0)
    fail("{}: invalid config: {} attention heads are not a multiple of {} key/value heads", source, n_heads,
         n_kv_heads);
  if (head_dim <= 0 || head_dim > 1024 || head_dim % 2 != 0) bad("head dim", head_dim);
  if (vocab_size <= 0 || vocab_size > (1 << 24)) bad("vocab size", vocab_size);
  if (max_seq_len <= 0 || max_seq_len > (1 << 24)) bad("context length", max_seq_len);
  if (!(rope_theta > 0.0f)) fail("{}: invalid config: rope_theta = {}", source, rope_theta);
  if (!(norm_eps > 0.0f) || norm_eps > 1.0f) fail("{}: invalid config: rms_norm_eps = {}", source, norm_eps);
  if (sliding_window < 0) bad("sliding window", sliding_window);
  if (bos_id >= vocab_size) bad("bos token id", bos_id);
  if (eos_id >= vocab_size) bad("eos token id", eos_id);
}

}  // namespace kvp
