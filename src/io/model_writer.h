#pragma once
// Writers for `kvparity convert` / `kvparity synth`. Every writer writes `path.tmp` and renames
// it over `path` only once everything was written and flushed, so a failure never leaves a
// half-written model behind. Errors are kvp::Error naming the path.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/progress.h"
#include "core/tensor.h"
#include "io/gguf.h"
#include "io/hf_config.h"  // write_hf_config
#include "model/config.h"
#include "tokenizer/vocab_spec.h"

namespace kvp {

// A tensor's bytes made when the writer reaches it, so a file of many gigabytes is written holding
// one tensor at a time: called once per tensor, in order, with its view (name, type and shape as
// the header says; its data may be null); returns bytes of the view's nbytes() that stay valid
// until the next call.
using TensorBytes = std::function<const void*(size_t index, const TensorView& tensor)>;

// Tensors are written contiguously in the given order; each TensorView's name, dtype and shape
// go into the header. The header is padded with spaces so the data section starts 8-aligned.
// `progress` hears the tensor bytes written so far. With `bytes`, the views' data is not read.
// Tensor i is written as raw bytes (dtype U8, one byte an element of its shape, its view's dtype
// ignored) where `u8` says so: GPT-OSS's MXFP4 blocks and scales.
void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}},
                       const Progress& progress = {}, const TensorBytes& bytes = {},
                       const std::vector<bool>& u8 = {});

// Writes model.safetensors.index.json for shards the caller wrote: weight_map maps tensor name to
// shard file name (relative to the index's directory).
void write_safetensors_index(const std::string& path, const std::map<std::string, std::string>& weight_map,
                             uint64_t total_size);

struct GgufWriteOptions {
  TensorBytes bytes;  // the tensors' bytes, made as they are written (else their views' data)
  std::string name = "kvparity";  // general.name
  // Checkpoint::extras (Gemma-2 softcaps, query_pre_attn_scalar), written under gemma2.* keys.
  std::map<std::string, double> extras;
  // Extra key/values written after the standard ones, e.g. Gemma-2's
  // "gemma2.attn_logit_softcapping". They override standard keys of the same name.
  std::map<std::string, GgufValue> extra_kv;
  // general.file_type (llama_ftype) when set; otherwise derived from the matrices' float dtype.
  std::optional<uint32_t> file_type;
  Progress progress;  // the tensor bytes written so far
  // general.architecture and the keys' prefix; "" = the config's family's (gguf_arch_for). "phi3"
  // takes the tensors under transformers' fused names (self_attn.qkv_proj, mlp.gate_up_proj), as
  // llama.cpp's converter writes Phi-3.
  std::string arch;
};

// GGUF v3 as llama.cpp reads it: general.architecture ("llama" for Llama and Mistral, "qwen2",
// "gemma2"), the <arch>.* hyper-parameters, tokenizer.ggml.* when `vocab` is given, tensors
// renamed from canonical HF names to llama.cpp names, dims innermost first, data 32-aligned.
// Bytes are written as given: the caller supplies q/k rows in the layout the target arch expects
// (Interleaved for "llama", Halves otherwise) and, for Gemma-2, norm weights with the 1 added.
void write_gguf(const std::string& path, const ModelConfig& cfg, const std::vector<TensorView>& tensors,
                const VocabSpec* vocab, const GgufWriteOptions& opts = {});

}  // namespace kvp
