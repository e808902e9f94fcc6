#pragma once
// What a loader hands to the model builder: hyper-parameters, tensors by canonical (Hugging Face)
// name still in the file's dtype and layout, and what keeps their memory alive.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"
#include "tokenizer/vocab_spec.h"

namespace kvp {

// How the rows of q_proj/k_proj are ordered within each head for RoPE.
//  Halves:      rotate_half (HF checkpoints; kvparity's internal convention).
//  Interleaved: adjacent pairs (2i, 2i+1) (llama2.c, llama.cpp's GGUF "llama" arch).
enum class RopeLayout { Halves, Interleaved };

// A safetensors U8 tensor: raw bytes no model reads as numbers (GPT-OSS's MXFP4 `*_blocks` and
// `*_scales`), held apart from `tensors` until the loader that understands them repacks them.
struct ByteTensor {
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
};

struct Checkpoint {
  std::string path;
  std::string format;  // "llama2c" | "hf" | "safetensors" | "gguf"
  ModelConfig config;
  // Canonical names: model.embed_tokens.weight, model.layers.{i}.input_layernorm.weight,
  // model.layers.{i}.self_attn.{q,k,v,o}_proj.weight (+ .bias), model.layers.{i}.post_attention_layernorm.weight,
  // model.layers.{i}.mlp.{gate,up,down}_proj.weight, model.norm.weight, lm_head.weight (absent if tied).
  // Shapes are PyTorch's ([out, in] for linear weights).
  std::map<std::string, TensorView> tensors;
  // U8 tensors by name; every one must be consumed on load (a loader that leaves one refuses it).
  std::map<std::string, ByteTensor> byte_tensors;
  RopeLayout qk_layout = RopeLayout::Halves;
  std::vector<std::shared_ptr<const void>> keepalive;  // mappings and buffers the views point into
  std::vector<std::string> files;        // the files the tensors were mapped from (an HF directory's shards)
  std::optional<VocabSpec> vocab;        // GGUF embedded vocabulary
  std::string tokenizer_path;            // tokenizer.json beside an HF checkpoint, if present
  std::string chat_template;             // GGUF tokenizer.chat_template (Jinja), if present
  // The vision-language class (config.json architectures) whose text model this is, "" for a plain
  // causal LM; its other tensors stay in `tensors` under their own names and are never read.
  std::string text_model_of;
  // The config's class when kvparity reads it as another family's ("Phi3ForCausalLM": llama, or
  // mistral with a window; its fused projections split into views), "" otherwise.
  std::string read_from;
  // Family hyper-parameters ModelConfig has no field for yet, by their config.json name.
  // Gemma-2: query_pre_attn_scalar, attn_logit_softcapping, final_logit_softcapping (when known).
  std::map<std::string, double> extras;
  // Gemma-2 RMSNorm multiplies by (1 + w). HF files store w; llama.cpp's GGUF stores (1 + w)
  // already added (rounded to the file dtype). The bytes are left as stored; this says which.
  bool norm_weights_include_one = false;
};

// Opens a llama2.c .bin, a .gguf, a .safetensors file (config.json beside it), or an HF directory.
// Format is chosen by magic bytes / directory contents, not only the extension.
Checkpoint open_checkpoint(const std::string& path);

}  // namespace kvp
