#include "io/llama2c.h"

#include <cstring>

#include "core/error.h"
#include "core/mapped_file.h"

namespace kvp {

Checkpoint parse_llama2c(const uint8_t* data, size_t size, const std::string& name) {
  constexpr size_t kHeader = 7 * sizeof(int32_t);
  if (size < kHeader)
    fail("{}: not a recognised model file ({} bytes; expected GGUF, safetensors, an HF directory or a llama2.c "
         ".bin with a {}-byte header)",
         name, size, kHeader);
  int32_t h[7];
  std::memcpy(h, data, kHeader);
  const bool shared = h[5] > 0;
  ModelConfig c;
  c.source = name;
  c.arch = Arch::Llama;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  c.vocab_size = h[5] == INT32_MIN ? 0 : (h[5] < 0 ? -h[5] : h[5]);
  c.max_seq_len = h[6];
  c.rope_theta = 10000.0f;
  c.norm_eps = 1e-5f;
  c.tied_embeddings = shared;
  c.bos_id = 1;
  c.eos_id = 2;
  c.bos_ends_generation = true;
  if (c.n_heads <= 0 || c.dim <= 0 || c.dim % c.n_heads != 0)
    fail("{}: not a recognised model file: as a llama2.c header, dim = {} is not a positive multiple of n_heads = {}",
         name, c.dim, c.n_heads);
  c.head_dim = c.dim / c.n_heads;
  // validate() bounds every header value, which also keeps the size arithmetic below in range.
  try {
    c.validate();
  } catch (const Error& e) {
    fail("{} (read as a llama2.c .bin because it is neither GGUF nor safetensors)", e.what());
  }

  const uint64_t dim = uint64_t(c.dim), hid = uint64_t(c.hidden_dim), L = uint64_t(c.n_layers),
                 V = uint64_t(c.vocab_size), kv = uint64_t(c.kv_dim()), hs = uint64_t(c.head_dim),
                 T = uint64_t(c.max_seq_len);
  const uint64_t floats = V * dim + L * dim + L * dim * dim + 2 * L * kv * dim + L * dim * dim + L * dim +
                          3 * L * hid * dim + dim + T * hs + (shared ? 0 : V * dim);
  const uint64_t expected = kHeader + floats * sizeof(float);
  if (uint64_t(size) != expected)
    fail("{}: llama2.c checkpoint size mismatch: header (dim {}, hidden {}, layers {}, heads {}, kv heads {}, vocab {}, "
         "seq_len {}) implies {} bytes, file has {} bytes",
         name, c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, h[5], c.max_seq_len, expected, size);

  Checkpoint ck;
  ck.path = name;
  ck.format = "llama2c";
  ck.qk_layout = RopeLayout::Interleaved;
  const float* p = reinterpret_cast<const float*>(data + kHeader);
  auto add = [&](const std::string& n, std::vector<int64_t> shape, const float* at) {
    TensorView t;
    t.name = n;
    t.dtype = DType::F32;
    t.shape = std::move(shape);
    t.data = at;
    ck.tensors[n] = std::move(t);
  };
  // Each array is [L, ...] stacked; per-layer views are slices of it.
  auto per_layer = [&](const char* suffix, std::vector<int64_t> shape) {
    uint64_t per = 1;
    for (auto d : shape) per *= uint64_t(d);
    for (uint64_t l = 0; l < L; ++l) add(fmt::format("model.layers.{}.{}", l, suffix), shape, p + l * per);
    p += L * per;
  };
  const int64_t D = c.dim, H = c.hidden_dim, KV = c.kv_dim();
  add("model.embed_tokens.weight", {int64_t(V), D}, p);
  p += V * dim;
  per_layer("input_layernorm.weight", {D});
  per_layer("self_attn.q_proj.weight", {D, D});
  per_layer("self_attn.k_proj.weight", {KV, D});
  per_layer("self_attn.v_proj.weight", {KV, D});
  per_layer("self_attn.o_proj.weight", {D, D});
  per_layer("post_attention_layernorm.weight", {D});
  per_layer("mlp.gate_proj.weight", {H, D});  // w1
  per_layer("mlp.down_proj.weight", {D, H});  // w2
  per_layer("mlp.up_proj.weight", {H, D});    // w3
  add("model.norm.weight", {D}, p);
  p += dim;
  p += T * hs;  // freq_cis_real and freq_cis_imag: RoPE tables kvparity recomputes
  if (!shared) add("lm_head.weight", {int64_t(V), D}, p);
  ck.config = c;
  return ck;
}

Checkpoint load_llama2c(const std::string& path) {
  auto mf = MappedFile::open(path);
  Checkpoint ck = parse_llama2c(mf->data(), mf->size(), path);
  ck.keepalive.push_back(mf);
  ck.files = {path};
  return ck;
}

}  // namespace kvp
