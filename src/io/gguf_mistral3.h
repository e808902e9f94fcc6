#pragma once
// llama.cpp's "mistral3" GGUF files (its converter's form of Ministral3ForCausalLM and of the text
// model of Mistral3ForConditionalGeneration: the Ministral-3 2512 series), read as the model
// transformers runs from the checkpoint they were converted from, and kvparity's writing of them.
//  - Tensors: Llama's (q/k rows permuted into adjacent pairs, as the converter's LlamaModel does).
//  - The query temperature (Llama-4's, hf_ministral3.h): beta from attention.temperature_scale, over
//    rope.scaling.original_context_length (llama.cpp's n_ctx_orig_yarn; absent: context_length), as
//    llama.cpp's graph computes it: 1 + beta ln(1 + floor(pos / context)).
//  - YaRN: factor, original context and the ramp's betas (32 and 1 when absent), the ramp truncated
//    to whole dimensions (llama.cpp's, and transformers' default); the attention factor 1: llama.cpp's
//    mistral3 graph cancels its rotation's own YaRN magnitude (attn_factor 1 / (1 + 0.1 ln s)),
//    which is transformers' factor for Ministral 3's mscale = mscale_all_dim (1 in every published
//    config); yarn_log_multiplier (the converter's mscale_all_dim) is not read by that graph and not
//    by kvparity. A file whose keys say another attention factor is refused.
#include <string>
#include <utility>
#include <vector>

#include "io/gguf_meta.h"
#include "model/config.h"

namespace kvp {

// The mistral3.* keys into c (already holding the keys every architecture shares); errors name the key.
void read_mistral3_gguf_keys(const GgufMeta& m, const std::string& A, ModelConfig& c, const std::string& name);

// The keys llama.cpp reads for a mistral3 model (besides those of every architecture), for the
// writer; fails, naming what, where c has what those files cannot say.
void mistral3_gguf_keys(const ModelConfig& c, const std::string& A, const std::string& path,
                        std::vector<std::pair<std::string, GgufValue>>& out);

}  // namespace kvp
