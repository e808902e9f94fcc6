#pragma once
// Phi-3's rotary embedding in llama.cpp's GGUF "phi3" (its converter's Phi3MiniModel): the rotated
// dimensions as rope.dimension_count (Phi-4-mini: 96 of 128), and LongRoPE as the F32 tensors
// rope_factors_short.weight / rope_factors_long.weight [dimension_count / 2] with the keys
// rope.scaling.attn_factor (the converter's sqrt(1 + ln(s) / ln(original)), s = context_length /
// original) and rope.scaling.original_context_length. Read as transformers runs the checkpoint they
// came from (hf_phi3.h): the long factors in a forward call that reaches the original context.
// llama.cpp takes them for every position of a context longer than the original instead
// (phi3_llama_cpp_gaps says so).
#include <string>
#include <vector>

#include "io/gguf.h"

namespace kvp {

class GgufMeta;
struct ModelConfig;

// Into c (head_dim, max_seq_len read): rotary_dim and, when the file has the factor tensors, the
// longrope fields; `data` is the file's image. A half-present or malformed longrope is refused by
// key or tensor name.
void read_phi3_gguf_rotary(const GgufMeta& m, const GgufFile& g, const uint8_t* data, ModelConfig& c,
                           const std::string& name);

// Whether `t` is one of the longrope tensors read_phi3_gguf_rotary takes (not model weights).
bool is_phi3_rope_factors(const GgufTensorInfo& t);

std::vector<std::string> phi3_llama_cpp_gaps(const ModelConfig& c);

}  // namespace kvp
