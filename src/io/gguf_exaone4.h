#pragma once
// llama.cpp's "exaone4" GGUF files (its converter's form of Exaone4ForCausalLM: EXAONE-4.0-1.2B,
// -32B), read as the model transformers runs from the checkpoint they were converted from, and
// kvparity's writing of them.
//  - Tensors: OLMo-2's names (post_attention_norm, post_ffw_norm, no norm before the blocks) with
//    q/k norms per head (attn_q_norm / attn_k_norm of head_dim values); q/k rows in halves (the
//    converter does not permute them).
//  - The window: attention.sliding_window (absent: none, every layer global and rotating, as
//    EXAONE-4.0-1.2B) and attention.sliding_window_pattern, one bool a layer (the converter writes
//    it from layer_types); the global layers take no RoPE. llama.cpp's own loader reads neither the
//    pattern nor, but for 64-layer models (EXAONE-4.0-32B: pattern 4 hard-coded), the window:
//    kvparity follows the converter's source, and a window without a pattern is read as llama.cpp's
//    32B rule where it applies and refused elsewhere (transformers' default, every 4th layer global,
//    and llama.cpp's, no window, would disagree). gguf_llama_cpp_gaps says where llama.cpp differs.
#include <string>
#include <utility>
#include <vector>

#include "io/gguf_meta.h"
#include "model/config.h"

namespace kvp {

// The exaone4.* keys into c (already holding the keys every architecture shares); errors name the key.
void read_exaone4_gguf_keys(const GgufMeta& m, const std::string& A, ModelConfig& c, const std::string& name);

// The window keys for the writer; fails, naming what, where c has layers without RoPE that are not
// its global layers (no GGUF form).
void exaone4_gguf_keys(const ModelConfig& c, const std::string& A, const std::string& path,
                       std::vector<std::pair<std::string, GgufValue>>& out);

// Where llama.cpp's exaone4 loader runs c otherwise than transformers does (empty: alike).
std::vector<std::string> exaone4_llama_cpp_gaps(const ModelConfig& c);

}  // namespace kvp
