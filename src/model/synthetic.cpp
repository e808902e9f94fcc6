#include "model/synthetic.h"

#include <cmath>

#include "core/error.h"
#include "runtime/rng.h"

namespace kvp {

std::vector<std::string> synthetic_presets() { return {"tiny", "tinyllama-1.1b", "llama2-7b"}; }

ModelConfig synthetic_config(const std::string& arch_s, const std::string& preset) {
  ModelConfig c;
  c.arch = parse_arch(arch_s);
  if (c.arch != Arch::Llama)
    fail_usage("synth: architecture '{}' is not supported yet (supported: llama)", arch_s);
  if (preset == "tiny") {
    c.dim = 128; c.hidden_dim = 352; c.n_layers = 4; c.n_heads = 8; c.n_kv_heads = 4;
    c.vocab_size = 512; c.max_seq_len = 512;
  } else if (preset == "tinyllama-1.1b") {
    c.dim = 2048; c.hidden_dim = 5632; c.n_layers = 22; c.n_heads = 32; c.n_kv_heads = 4;
    c.vocab_size = 32000; c.max_seq_len = 2048;
  } else if (preset == "llama2-7b") {
    c.dim = 4096; c.hidden_dim = 11008; c.n_layers = 32; c.n_heads = 32; c.n_kv_heads = 32;
    c.vocab_size = 32000; c.max_seq_len = 4096;
  } else {
    fail_usage("synth: unknown preset '{}' (expected tiny, tinyllama-1.1b or llama2-7b)", preset);
  }
  c.head_dim = c.dim / c.n_heads;
  c.rope_theta = 10000.0f;
  c.norm_eps = 1e-5f;
  c.tied_embeddings = false;
  c.bos_id = 1;
  c.eos_id = 2;
  c.source = "synthetic:" + arch_s + "/" + preset;
  c.validate();
  return c;
}

namespace {

struct Filler {
  DType dtype;
  uint64_t seed;
  std::vector<std::shared_ptr<const void>>* keep;

  // Uniform(-a, a) has standard deviation a/sqrt(3).
  TensorView uniform(const std::string& name, std::vector<int64_t> shape, uint64_t index, float mean, float stddev) {
    TensorView t;
    t.name = name;
    t.dtype = dtype;
    t.shape = std::move(shape);
    const size_t n = size_t(t.numel());
    auto buf = std::make_shared<AlignedBuffer>(n * dtype_size(dtype));
    const float a = stddev * std::sqrt(3.0f);
    std::vector<float> chunk(4096);
    for (size_t i = 0; i < n; i += chunk.size()) {
      const size_t c = std::min(chunk.size(), n - i);
      for (size_t j = 0; j < c; j += 4) {
        const uint64_t ctr = (i + j) / 4;
        const auto r = philox4x32({uint32_t(ctr), uint32_t(ctr >> 32), uint32_t(index), 0x5eedu},
                                  {uint32_t(seed), uint32_t(seed >> 32)});
        for (size_t k = 0; k < 4 && j + k < c; ++k) {
          const float u = float(r[k] >> 8) * (1.0f / 16777216.0f);  // [0, 1)
          chunk[j + k] = mean + a * (2.0f * u - 1.0f);
        }
      }
      from_f32(dtype, chunk.data(), static_cast<uint8_t*>(buf->data()) + i * dtype_size(dtype), c);
    }
    t.data = buf->data();
    keep->push_back(buf);
    return t;
  }
};

}  // namespace

Checkpoint synthesize_checkpoint(const ModelConfig& cfg, DType dtype, uint64_t seed, float final_gain) {
  cfg.validate();
  Checkpoint ck;
  ck.path = cfg.source.empty() ? "synthetic" : cfg.source;
  ck.format = "synthetic";
  ck.config = cfg;
  ck.qk_layout = RopeLayout::Halves;
  Filler f{dtype, seed, &ck.keepalive};
  uint64_t index = 0;
  auto add = [&](TensorView t) { ck.tensors[t.name] = std::move(t); };
  const int64_t dim = cfg.dim, q = cfg.q_dim(), kv = cfg.kv_dim(), hid = cfg.hidden_dim, vocab = cfg.vocab_size;
  const float w_dim = 1.0f / std::sqrt(float(dim)), w_q = 1.0f / std::sqrt(float(q)),
              w_hid = 1.0f / std::sqrt(float(hid));
  add(f.uniform("model.embed_tokens.weight", {vocab, dim}, index++, 0.0f, 1.0f));
  for (int l = 0; l < cfg.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(f.uniform(p + "input_layernorm.weight", {dim}, index++, 1.0f, 0.1f));
    add(f.uniform(p + "self_attn.q_proj.weight", {q, dim}, index++, 0.0f, 2.5f * w_dim));
    add(f.uniform(p + "self_attn.k_proj.weight", {kv, dim}, index++, 0.0f, 2.5f * w_dim));
    add(f.uniform(p + "self_attn.v_proj.weight", {kv, dim}, index++, 0.0f, w_dim));
    add(f.uniform(p + "self_attn.o_proj.weight", {dim, q}, index++, 0.0f, w_q));
    add(f.uniform(p + "post_attention_layernorm.weight", {dim}, index++, 1.0f, 0.1f));
    add(f.uniform(p + "mlp.gate_proj.weight", {hid, dim}, index++, 0.0f, w_dim));
    add(f.uniform(p + "mlp.up_proj.weight", {hid, dim}, index++, 0.0f, w_dim));
    add(f.uniform(p + "mlp.down_proj.weight", {dim, hid}, index++, 0.0f, w_hid));
  }
  add(f.uniform("model.norm.weight", {dim}, index++, final_gain, 0.1f * final_gain));
  if (!cfg.tied_embeddings) add(f.uniform("lm_head.weight", {vocab, dim}, index++, 0.0f, w_dim));
  return ck;
}

}  // namespace kvp
