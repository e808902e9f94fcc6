#include "model/weights.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/moe_names.h"

namespace kvp {
namespace {

class Builder {
 public:
  // With `count`, the builder makes every check and records what it would hold instead of
  // converting anything: the views it returns then point nowhere (weights_footprint).
  Builder(const Checkpoint& ckpt, DType dtype, ModelWeights& out, WeightsFootprint* count = nullptr)
      : ckpt_(ckpt), dtype_(dtype), out_(out), count_(count) {}

  const TensorView* find(const std::string& name) const {
    auto it = ckpt_.tensors.find(name);
    return it == ckpt_.tensors.end() ? nullptr : &it->second;
  }

  const TensorView& require(const std::string& name, std::vector<int64_t> shape) const {
    const TensorView* t = find(name);
    if (t == nullptr) fail("{}: missing tensor '{}'", ckpt_.path, name);
    if (t->shape != shape)
      fail("{}: tensor '{}' has shape {} but the config implies {}", ckpt_.path, name, shape_str(t->shape),
           shape_str(shape));
    if (count_ != nullptr) count_->used.push_back(name);
    return *t;
  }

  static std::string shape_str(const std::vector<int64_t>& s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
  }

  // A matrix with the compute dtype's values: the file's bytes when they already are (or are
  // quantised: the kernels dequantise on the fly), else a converted copy. An fp32 run keeps fp16 and
  // bf16 files' bytes too: every such value is an fp32 value and the kernels widen W exactly, so
  // the products are the same while a 7B model takes 13 GB instead of 27 and a decode step reads
  // half the bytes. q/k rows stay in the file's RoPE layout.
  TensorView matrix(const std::string& name, std::vector<int64_t> shape) {
    const TensorView& src = require(name, shape);
    const bool in_place = src.quantized() || src.dtype == dtype_ ||
                          (dtype_ == DType::F32 && (src.dtype == DType::F16 || src.dtype == DType::BF16));
    if (count_ != nullptr) {
      TensorView v = src;
      if (!in_place) v.dtype = dtype_;
      v.data = nullptr;
      (in_place ? count_->in_place_bytes : count_->converted_bytes) += v.nbytes();
      return v;
    }
    if (in_place) return src;
    auto converted = std::make_shared<AlignedBuffer>(size_t(src.numel()) * dtype_size(dtype_));
    convert(src, converted->data());
    out_.owned.push_back(converted);
    TensorView v = src;
    v.dtype = dtype_;
    v.data = converted->data();
    return v;
  }

  // Norm gains and biases: small, kept as fp32 values already rounded to the compute dtype
  // (what `model.to(dtype)` stores), so the kernels read floats.
  // Gemma-2 norm gains: vector_f32 returns g = 1 + w (fp32) while this is set.
  void set_gemma_norm(bool on) { gemma_norm_ = on; }
  // GPT-OSS's norms keep the file's fp32 gains (norm_gains_kept_in_fp32): norm() reads them so.
  void set_fp32_norms(bool on) { fp32_norms_ = on; }

  // A norm's gain: as vector_f32, or the file's values unrounded for a model that keeps them in fp32.
  TensorView norm(const std::string& name, int64_t n) { return vector_f32(name, n, !fp32_norms_); }

  TensorView vector_f32(const std::string& name, int64_t n, bool round = true) {
    const TensorView& src = require(name, {n});
    if (count_ != nullptr) {
      count_->vector_bytes += size_t(n) * 4;
      TensorView v = src;
      v.dtype = DType::F32;
      v.data = nullptr;
      return v;
    }
    auto buf = std::make_shared<AlignedBuffer>(size_t(n) * 4);
    float* f = buf->as<float>();
    view_to_f32(src, 0, size_t(n), f);
    std::vector<float> stored(f, f + n);  // the file's values, before rounding to the compute dtype
    if (round)
      for (int64_t i = 0; i < n; ++i) f[i] = round_to(dtype_, f[i]);
    if (gemma_norm_) {
      // Gemma2RMSNorm: (1.0 + self.weight.float()), with the weight stored in the compute dtype.
      // A GGUF gain holds fl(1 + w); fl(s - 1) recovers w exactly when w fits the file's dtype.
      for (int64_t i = 0; i < n; ++i) {
        float w = f[i];
        if (ckpt_.norm_weights_include_one) w = round_to(dtype_, stored[size_t(i)] - 1.0f);
        f[i] = 1.0f + w;
      }
    }
    out_.owned.push_back(buf);
    TensorView v = src;
    v.dtype = DType::F32;
    v.data = f;
    return v;
  }

 private:
  // Chunks convert independently, so they split across the cores: a bf16 7B model run in fp16 is
  // 13 GB to convert before the first token (~30 s on one core).
  void convert(const TensorView& src, void* dst) {
    const size_t n = size_t(src.numel());
    constexpr size_t kChunk = 1 << 16;
    if (!pool_) pool_.emplace(cores_here(64));
    const long chunks = long((n + kChunk - 1) / kChunk);
    pool_->parallel_pieces(chunks, pool_->piece_for(chunks, 4, 1), [&](long b, long e, int) {
      std::vector<float> tmp(kChunk);
      for (size_t i = size_t(b) * kChunk; i < std::min(n, size_t(e) * kChunk); i += kChunk) {
        const size_t c = std::min(kChunk, n - i);
        view_to_f32(src, i, c, tmp.data());
        from_f32(dtype_, tmp.data(), static_cast<uint8_t*>(dst) + i * dtype_size(dtype_), c);
      }
    });
  }

  const Checkpoint& ckpt_;
  DType dtype_;
  ModelWeights& out_;
  WeightsFootprint* count_;
  std::optional<ThreadPool> pool_;  // made by the first conversion
  bool gemma_norm_ = false;
  bool fp32_norms_ = false;
};

}  // namespace

namespace {
size_t mlp_bytes(const ExpertWeights& e) { return e.gate.nbytes() + e.up.nbytes() + e.down.nbytes(); }
}  // namespace

size_t ModelWeights::matrix_bytes() const {
  size_t total = lm_head.nbytes();
  for (const auto& l : layers) {
    total += l.wq.nbytes() + l.wk.nbytes() + l.wv.nbytes() + l.wo.nbytes() + l.w_gate.nbytes() + l.w_up.nbytes() +
             l.w_down.nbytes();
    if (!l.experts.empty())
      total += l.router.nbytes() + size_t(moe_used) * mlp_bytes(l.experts[0]) + mlp_bytes(l.shared) +
               l.shared_gate.nbytes();
  }
  return total;
}

std::vector<std::pair<const void*, size_t>> ModelWeights::matrix_ranges() const {
  std::vector<std::pair<const void*, size_t>> r{{lm_head.data, lm_head.nbytes()}};
  auto add = [&r](const TensorView& t) {
    if (t.valid()) r.emplace_back(t.data, t.nbytes());
  };
  for (const auto& l : layers) {
    for (const TensorView* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.router, &l.shared_gate})
      add(*t);
    for (const ExpertWeights* e = l.experts.data(); e != l.experts.data() + l.experts.size(); ++e)
      for (const TensorView* t : {&e->gate, &e->up, &e->down}) add(*t);
    for (const TensorView* t : {&l.shared.gate, &l.shared.up, &l.shared.down}) add(*t);
  }
  return r;
}

namespace {

ModelWeights build(const Checkpoint& ckpt, DType dtype, WeightsFootprint* count) {
  const ModelConfig& c = ckpt.config;
  c.validate();
  if (c.qkv_bias && c.arch != Arch::Qwen2 && c.arch != Arch::GptOss)
    fail("{}: q/k/v biases are only supported for qwen2 and gpt_oss (architecture '{}')", ckpt.path, arch_name(c.arch));
  // A per-head gain runs along head_dim in the order q/k rows hold it; only the halves layout
  // (HF, GGUF qwen3 and gemma3) holds them in the order the gain was trained on.
  if (c.qk_norm() && ckpt.qk_layout != RopeLayout::Halves)
    fail("{}: per-head q/k norms need q/k rows in HF's (halves) RoPE layout", ckpt.path);
  const bool gemma = c.gemma_family();
  if (ckpt.norm_weights_include_one && !gemma)
    fail("{}: norm gains stored as (1 + w) only exist for gemma2 and gemma3 (architecture '{}')", ckpt.path,
         arch_name(c.arch));
  ModelWeights w;
  w.dtype = dtype;
  w.qk_layout = ckpt.qk_layout;
  w.keepalive = ckpt.keepalive;
  w.moe_used = c.moe.n_used;
  Builder b(ckpt, dtype, w, count);
  b.set_gemma_norm(gemma);
  b.set_fp32_norms(c.norm_gains_kept_in_fp32());
  const int64_t dim = c.dim, q = c.q_dim(), kv = c.kv_dim(), hid = c.hidden_dim, vocab = c.vocab_size;
  w.embed = b.matrix("model.embed_tokens.weight", {vocab, dim});
  w.final_norm = b.norm("model.norm.weight", dim);
  if (c.tied_embeddings) {
    if (b.find("lm_head.weight") != nullptr)
      fail("{}: config says tie_word_embeddings but the file also has 'lm_head.weight'", ckpt.path);
    w.lm_head = w.embed;
  } else {
    w.lm_head = b.matrix("lm_head.weight", {vocab, dim});
  }
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerWeights l;
    if (c.pre_norms()) l.attn_norm = b.norm(p + "input_layernorm.weight", dim);
    l.wq = b.matrix(p + "self_attn.q_proj.weight", {q, dim});
    l.wk = b.matrix(p + "self_attn.k_proj.weight", {kv, dim});
    l.wv = b.matrix(p + "self_attn.v_proj.weight", {kv, dim});
    l.wo = b.matrix(p + "self_attn.o_proj.weight", {dim, q});
    if (c.qkv_bias) {
      l.bq = b.vector_f32(p + "self_attn.q_proj.bias", q);
      l.bk = b.vector_f32(p + "self_attn.k_proj.bias", kv);
      l.bv = b.vector_f32(p + "self_attn.v_proj.bias", kv);
    }
    if (c.o_bias) l.bo = b.vector_f32(p + "self_attn.o_proj.bias", dim);
    if (c.attention_sinks) l.sinks = b.vector_f32(p + "self_attn.sinks", c.n_heads);
    if (c.qk_norm()) {
      const bool per_head = c.qk_norm_per_head();
      l.q_norm = b.norm(p + "self_attn.q_norm.weight", per_head ? c.head_dim : q);
      l.k_norm = b.norm(p + "self_attn.k_norm.weight", per_head ? c.head_dim : kv);
    }
    if (!c.pre_norms()) {  // OLMo-2: each block's output normalised, nothing before it
      l.post_attn_norm = b.norm(p + "post_attention_layernorm.weight", dim);
      l.post_ffn_norm = b.norm(p + "post_feedforward_layernorm.weight", dim);
    } else if (gemma) {
      l.post_attn_norm = b.norm(p + "post_attention_layernorm.weight", dim);
      l.ffn_norm = b.norm(p + "pre_feedforward_layernorm.weight", dim);
      l.post_ffn_norm = b.norm(p + "post_feedforward_layernorm.weight", dim);
    } else {
      l.ffn_norm = b.norm(p + "post_attention_layernorm.weight", dim);
    }
    if (c.moe_layer(i)) {
      const int64_t eh = c.moe.expert_hidden_dim, sh = c.moe.shared_hidden_dim;
      auto swiglu = [&](auto name, int64_t h) {
        return ExpertWeights{b.matrix(name(ExpertMatrix::Gate), {h, dim}), b.matrix(name(ExpertMatrix::Up), {h, dim}),
                             b.matrix(name(ExpertMatrix::Down), {dim, h})};
      };
      l.router = b.matrix(moe_router_name(c, i), {c.moe.n_experts, dim});
      const bool biased = c.arch == Arch::GptOss;
      if (biased) l.router_bias = b.vector_f32(moe_router_bias_name(c, i), c.moe.n_experts);
      for (int e = 0; e < c.moe.n_experts; ++e) {
        ExpertWeights ew = swiglu([&](ExpertMatrix m) { return expert_matrix_name(c, i, e, m); }, eh);
        if (biased) {
          ew.gate_bias = b.vector_f32(expert_bias_name(c, i, e, ExpertMatrix::Gate), eh);
          ew.up_bias = b.vector_f32(expert_bias_name(c, i, e, ExpertMatrix::Up), eh);
          ew.down_bias = b.vector_f32(expert_bias_name(c, i, e, ExpertMatrix::Down), dim);
        }
        l.experts.push_back(std::move(ew));
      }
      if (sh > 0) {
        l.shared = swiglu([&](ExpertMatrix m) { return shared_expert_name(i, m); }, sh);
        l.shared_gate = b.matrix(shared_expert_gate_name(i), {1, dim});
      }
    } else {
      l.w_gate = b.matrix(p + "mlp.gate_proj.weight", {hid, dim});
      l.w_up = b.matrix(p + "mlp.up_proj.weight", {hid, dim});
      l.w_down = b.matrix(p + "mlp.down_proj.weight", {dim, hid});
    }
    w.layers.push_back(std::move(l));
  }
  return w;
}

int64_t numel_of(const Checkpoint& ckpt, const std::vector<std::string>& names, size_t first, size_t last) {
  int64_t n = 0;
  for (size_t i = first; i < last; ++i) n += ckpt.tensors.at(names[i]).numel();
  return n;
}

}  // namespace

ModelWeights build_weights(const Checkpoint& ckpt, DType dtype) { return build(ckpt, dtype, nullptr); }

WeightsFootprint weights_footprint(const Checkpoint& ckpt, DType dtype) {
  WeightsFootprint f;
  const ModelWeights w = build(ckpt, dtype, &f);
  f.decode_bytes = w.matrix_bytes();
  // build() reads the embedding, the final norm, the head (when not tied), then each layer's
  // tensors in order: count parameters along that order.
  const size_t layers_from = ckpt.config.tied_embeddings ? 2 : 3;
  f.embedding_parameters = numel_of(ckpt, f.used, 0, 1);
  f.final_norm_parameters = numel_of(ckpt, f.used, 1, 2);
  f.head_parameters = numel_of(ckpt, f.used, 2, layers_from);
  f.layer_parameters = numel_of(ckpt, f.used, layers_from, f.used.size());
  f.parameters = f.embedding_parameters + f.final_norm_parameters + f.head_parameters + f.layer_parameters;
  return f;
}

}  // namespace kvp
