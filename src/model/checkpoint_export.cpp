#include "model/checkpoint_export.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "io/hf_config.h"
#include "io/model_writer.h"
#include "model/weights.h"

namespace kvp {
namespace {

bool is_qk(const std::string& name, int* heads, const ModelConfig& c) {
  if (name.find("self_attn.q_proj.") != std::string::npos) { *heads = c.n_heads; return true; }
  if (name.find("self_attn.k_proj.") != std::string::npos) { *heads = c.n_kv_heads; return true; }
  return false;
}

// A copy of `t` in `dtype` with q/k rows moved from layout `from` to `to`.
// `norm_shift` is added to RMSNorm gains: Gemma-2 GGUF files store (1 + w) where HF stores w.
TensorView prepare(const TensorView& t, DType dtype, RopeLayout from, RopeLayout to, const ModelConfig& c,
                   float norm_shift, std::vector<std::shared_ptr<AlignedBuffer>>& keep) {
  int heads = 0;
  const bool permute = from != to && is_qk(t.name, &heads, c);
  const bool is_norm = t.name.size() > 11 && t.name.compare(t.name.size() - 11, 11, "norm.weight") == 0;
  const float shift = is_norm ? norm_shift : 0.0f;
  if (t.dtype == dtype && !permute && shift == 0.0f) return t;
  TensorView out = t;
  out.dtype = dtype;
  const size_t n = size_t(t.numel());
  auto conv = std::make_shared<AlignedBuffer>(n * dtype_size(dtype));
  if (t.dtype == dtype && shift == 0.0f) {
    std::memcpy(conv->data(), t.data, n * dtype_size(dtype));
  } else {
    std::vector<float> tmp(n);
    to_f32(t.dtype, t.data, tmp.data(), n);
    for (auto& v : tmp) v += shift;
    from_f32(dtype, tmp.data(), conv->data(), n);
  }
  keep.push_back(conv);
  out.data = conv->data();
  if (permute) {
    auto perm = std::make_shared<AlignedBuffer>(n * dtype_size(dtype));
    const int64_t in = t.shape.size() == 2 ? t.shape[1] : 1;
    const int head_dim = int(t.shape[0] / heads);
    if (to == RopeLayout::Halves)
      interleaved_to_halves(conv->data(), perm->data(), dtype, heads, head_dim, in);
    else
      halves_to_interleaved(conv->data(), perm->data(), dtype, heads, head_dim, in);
    keep.push_back(perm);
    out.data = perm->data();
  }
  return out;
}

std::string torch_dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
  }
  return "float32";
}

}  // namespace

void export_checkpoint(const Checkpoint& ckpt, const std::string& format, const std::string& out,
                       const ExportOptions& opts) {
  const ModelConfig& c = ckpt.config;
  c.validate();
  RopeLayout target;
  if (format == "hf") {
    target = RopeLayout::Halves;
  } else if (format == "gguf") {
    // llama.cpp's "llama" arch (also used for Mistral) expects adjacent pairs; qwen2/gemma2 use halves.
    target = (c.arch == Arch::Llama || c.arch == Arch::Mistral) ? RopeLayout::Interleaved : RopeLayout::Halves;
  } else {
    fail_usage("unknown output format '{}' (expected hf or gguf)", format);
  }
  if (format == "hf" && c.rope_scaling == ModelConfig::RopeScaling::FreqFactors)
    fail("{}: this model's RoPE frequency factors (GGUF rope_freqs.weight) have no config.json form; export to "
         "gguf instead",
         out);
  // Gemma-2's hyper-parameters come from the config (the source of truth); extras only carry them.
  std::map<std::string, double> extras = ckpt.extras;
  if (c.arch == Arch::Gemma2) {
    extras["query_pre_attn_scalar"] = c.query_pre_attn_scalar;
    extras["attn_logit_softcapping"] = c.attn_logit_softcapping;
    extras["final_logit_softcapping"] = c.final_logit_softcapping;
  }
  float norm_shift = 0.0f;
  if (c.arch == Arch::Gemma2) {
    if (format == "gguf" && !ckpt.norm_weights_include_one) norm_shift = 1.0f;
    if (format == "hf" && ckpt.norm_weights_include_one) norm_shift = -1.0f;
  }
  std::vector<std::shared_ptr<AlignedBuffer>> keep;
  std::vector<TensorView> tensors;
  DType common = DType::F32;
  bool first = true;
  for (const auto& [name, t] : ckpt.tensors) {
    // llama.cpp keeps 1-D tensors (norm gains, biases) in F32 whatever the matrices' type; the
    // upcast is exact, and the loader rounds them to the compute dtype again.
    const DType d = (format == "gguf" && t.shape.size() == 1) ? DType::F32 : opts.dtype.value_or(t.dtype);
    tensors.push_back(prepare(t, d, ckpt.qk_layout, target, c, norm_shift, keep));
    if (t.shape.size() == 2 && first) {
      common = d;
      first = false;
    }
  }
  namespace fs = std::filesystem;
  if (format == "hf") {
    std::error_code ec;
    fs::create_directories(out, ec);
    if (ec) fail("{}: cannot create output directory: {}", out, ec.message());
    write_safetensors(out + "/model.safetensors", tensors);
    write_hf_config(out + "/config.json", c, torch_dtype_name(common), extras);
    if (!opts.tokenizer_json_text.empty()) {
      write_file_atomic(out + "/tokenizer.json", opts.tokenizer_json_text);
      if (!opts.tokenizer_config_text.empty()) write_file_atomic(out + "/tokenizer_config.json", opts.tokenizer_config_text);
    } else if (!opts.tokenizer_json.empty()) {
      fs::copy_file(opts.tokenizer_json, out + "/tokenizer.json", fs::copy_options::overwrite_existing, ec);
      if (ec) fail("{}: cannot copy tokenizer.json into {}: {}", opts.tokenizer_json, out, ec.message());
      // Special tokens, add_bos_token and chat template live there, not in tokenizer.json.
      const fs::path config = fs::path(opts.tokenizer_json).parent_path() / "tokenizer_config.json";
      if (fs::is_regular_file(config, ec)) {
        fs::copy_file(config, out + "/tokenizer_config.json", fs::copy_options::overwrite_existing, ec);
        if (ec) fail("{}: cannot copy tokenizer_config.json into {}: {}", config.string(), out, ec.message());
      }
    }
  } else {
    if (fs::path(out).has_parent_path()) {
      std::error_code ec;
      fs::create_directories(fs::path(out).parent_path(), ec);
    }
    GgufWriteOptions go;
    go.extras = extras;
    write_gguf(out, c, tensors, opts.vocab, go);
  }
}

}  // namespace kvp
