#pragma once
// Writes a checkpoint (loaded from any format, or synthesised) as an HF directory or a GGUF file,
// producing the RoPE row layout each target expects. Used by `kvparity convert` and `kvparity synth`.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.h"

namespace kvp {

struct ExportOptions {
  std::optional<DType> dtype;          // convert every tensor; default keeps each tensor's dtype
  const VocabSpec* vocab = nullptr;    // embedded into GGUF as tokenizer.ggml.*
  std::string tokenizer_json;          // copied into an HF directory as tokenizer.json (with the
                                       // tokenizer_config.json beside it, if any)
  // Written into an HF directory as tokenizer.json / tokenizer_config.json (a vocabulary put into
  // HF form); used instead of tokenizer_json when set.
  std::string tokenizer_json_text, tokenizer_config_text;
  // The model's chat template (Jinja): a GGUF's tokenizer.chat_template, or chat_template in the
  // tokenizer_config.json written from tokenizer_config_text (a copied one keeps its own).
  std::string chat_template;
  // GGUF only: a quantised format or mix for every matrix (model/quant_recipe.h), e.g. "Q4_K_M".
  // Empty keeps each tensor's type (a quantised source stays quantised in a GGUF, and is
  // dequantised into an HF directory).
  std::string quant;
  // With `quant`: every matrix in the one format (llama-quantize --pure), no llama.cpp mix.
  bool quant_pure = false;
  // Hears how far the export got: stage "writing" (tensor bytes converted and written, of all;
  // each tensor is converted, quantised or re-laid out as the writer reaches it).
  std::function<void(const char* stage, size_t done, size_t total)> progress;
  // For a checkpoint that holds shapes only (synthesize_deferred): makes a tensor's data, into a
  // buffer it adds to `keep`, when the writer reaches it. Unset: the views' own data.
  std::function<TensorView(const TensorView& shape, std::vector<std::shared_ptr<AlignedBuffer>>& keep)> source;
};

// format: "hf" (out = directory: config.json, model.safetensors[, tokenizer.json, tokenizer_config.json])
// or "gguf" (out = file).
void export_checkpoint(const Checkpoint& ckpt, const std::string& format, const std::string& out,
                       const ExportOptions& opts = {});

}  // namespace kvp
