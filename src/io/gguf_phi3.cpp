#include "io/gguf_phi3.h"

#include <cmath>
#include <cstring>
#include <fmt/format.h>

#include "core/error.h"
#include "io/gguf_meta.h"
#include "model/config.h"

namespace kvp {

namespace {

constexpr const char* kLong = kPhi3RopeFactorsLong;
constexpr const char* kShort = kPhi3RopeFactorsShort;

std::vector<float> factors_of(const GgufFile& g, const uint8_t* data, const GgufTensorInfo& t, int n,
                              const std::string& name) {
  if (t.type != uint32_t(GgmlType::F32) || t.ne.size() != 1 || t.ne[0] != uint64_t(n))
    fail("{}: tensor '{}' must be F32 with rope.dimension_count / 2 = {} entries", name, t.name, n);
  std::vector<float> f(static_cast<size_t>(n));
  std::memcpy(f.data(), data + g.data_offset + t.offset, size_t(n) * sizeof(float));
  return f;
}

}  // namespace

bool is_phi3_rope_factors(const GgufTensorInfo& t) { return t.name == kLong || t.name == kShort; }

void read_phi3_gguf_rotary(const GgufMeta& m, const GgufFile& g, const uint8_t* data, ModelConfig& c,
                           const std::string& name) {
  const std::string A = "phi3.";
  const int rd = m.get_int(A + "rope.dimension_count", c.head_dim);
  if (rd < 2 || rd > c.head_dim || rd % 2 != 0)
    fail("{}: key '{}rope.dimension_count' = {} must be even and in [2, head_dim = {}]", name, A, rd, c.head_dim);
  c.rotary_dim = rd == c.head_dim ? 0 : rd;
  const GgufTensorInfo *lo = nullptr, *sh = nullptr;
  for (const GgufTensorInfo& t : g.tensors) {
    if (t.name == kLong) lo = &t;
    if (t.name == kShort) sh = &t;
  }
  const GgufValue* attn = m.find(A + "rope.scaling.attn_factor");
  if (lo == nullptr && sh == nullptr) {
    if (attn != nullptr)
      fail("{}: key '{}rope.scaling.attn_factor' without the longrope tensors {} and {}", name, A, kShort, kLong);
    return;
  }
  if (lo == nullptr || sh == nullptr)
    fail("{}: longrope needs both tensors {} and {}; the file has only '{}'", name, kShort, kLong,
         lo != nullptr ? kLong : kShort);
  if (const std::string t = m.get_str(A + "rope.scaling.type", "longrope"); t != "longrope" && t != "none")
    fail("{}: key '{}rope.scaling.type' = '{}' beside the longrope tensors", name, A, t);
  c.rope_scaling = ModelConfig::RopeScaling::LongRope;
  c.rope_short_factors = factors_of(g, data, *sh, rd / 2, name);
  c.rope_long_factors = factors_of(g, data, *lo, rd / 2, name);
  c.rope_original_max_pos = m.get_int(A + "rope.scaling.original_context_length");
  if (c.rope_original_max_pos < 1)
    fail("{}: key '{}rope.scaling.original_context_length' = 0", name, A);
  c.rope_factor = float(double(c.max_seq_len) / double(c.rope_original_max_pos));
  // The converter's attention factor is transformers' default (the config's own attention_factor,
  // if any, is not carried); a file without the key: llama.cpp's 1.
  c.rope_attention_factor = m.get_num(A + "rope.scaling.attn_factor", 1.0);
}

std::vector<std::string> phi3_llama_cpp_gaps(const ModelConfig& c) {
  if (c.rope_scaling != ModelConfig::RopeScaling::LongRope) return {};
  return {fmt::format("longrope: llama.cpp takes the long factors for every position of a context longer than {} "
                      "(n_ctx), transformers and kvparity in each forward call that reaches position {}",
                      c.rope_original_max_pos, c.rope_original_max_pos)};
}

}  // namespace kvp
