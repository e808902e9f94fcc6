#pragma once
// llama.cpp's "gpt-oss" GGUF files (its converter's form of GptOssForCausalLM), read as the model
// transformers runs from the checkpoint they were converted from, and kvparity's writing of them.
//  - Hyper-parameters: llama.cpp's keys; what its graph hard-codes (the clamped SwiGLU's limit 7
//    and alpha 1.702, a softmax over the top-k router logits, the window on the even layers, q/k/v/o
//    biases and sinks) is what GptOssConfig defaults to.
//  - YaRN: factor, original context and the ramp's betas (32 and 1 when absent) as keys; the
//    attention factor transformers derives from the factor (0.1 ln s + 1: llama.cpp's graph ends
//    at the same cos/sin scale); the ramp's range not truncated, as gpt-oss's config.json says
//    ("truncate": false) and transformers does; llama.cpp rounds it to whole dimensions, so its
//    own runs of these files rotate a few frequencies slightly differently.
//  - Tensors: each layer's experts as ffn_{gate,up,down}_exps [experts, rows, cols] (gate and up
//    the even and odd rows of gate_up_proj), their biases as ffn_*_exps.bias [experts, rows], the
//    router ffn_gate_inp (weight and bias), sinks attn_sinks.weight, the post-attention norm
//    post_attention_norm.
#include <string>
#include <utility>
#include <vector>

#include "io/gguf_meta.h"
#include "model/config.h"

namespace kvp {

// The gpt-oss.* keys into c (already holding the keys every architecture shares); errors name the key.
void read_gpt_oss_gguf_keys(const GgufMeta& m, const std::string& A, ModelConfig& c, const std::string& name);

// The keys llama.cpp reads for a gpt-oss model (besides those of every architecture), for the
// writer; fails, naming what, where c has what those files cannot say.
void gpt_oss_gguf_keys(const ModelConfig& c, const std::string& A, const std::string& path,
                       std::vector<std::pair<std::string, GgufValue>>& out);

}  // namespace kvp
