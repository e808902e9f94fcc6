#include "io/gguf.h"
#include "io/gguf_exaone4.h"
#include "io/gguf_phi3.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>
#include <stdexcept>

#include "core/error.h"
#include "core/quant.h"
#include "io/io_util.h"

namespace kvp {

namespace {

constexpr uint64_t kMaxKeyLen = 65535;        // GGUF spec: keys are at most 2^16-1 bytes
constexpr uint64_t kMaxTensorNameLen = 1024;  // spec says 64; some writers exceed it slightly
constexpr int kMaxArrayDepth = 8;             // nested arrays; bounds recursion on hostile input

// Smallest encoded size of one value of type t, used to bound counts before allocating.
uint64_t min_encoded_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::Bool: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    case GgufType::String: return 8;
    case GgufType::Array: return 12;
  }
  return 1;
}

bool valid_type(uint32_t t) { return t <= 12; }

std::string ggml_type_name(uint32_t t) {
  static const char* names[] = {"F32",  "F16",  "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1", "Q8_0", "Q8_1",
                                "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS",
                                "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64",
                                "IQ1_M", "BF16", "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0",
                                "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4"};
  if (t < sizeof(names) / sizeof(names[0])) return names[t];
  return fmt::format("type {}", t);
}

// `what()` names the string in the error; built only then, since vocabularies hold 10^5 strings.
template <class What>
std::string read_string(io::ByteReader& r, uint64_t max_len, const What& what) {
  const uint64_t len = r.read<uint64_t>("string length");
  if (len > max_len || len > r.remaining())
    fail("{}: {}: string length {} at offset {} exceeds {} (bytes left in file: {})", r.name(), what(), len,
         r.pos() - 8, len > max_len ? max_len : r.remaining(), r.remaining());
  const uint8_t* p = r.take(len, "string");
  return std::string(reinterpret_cast<const char*>(p), size_t(len));
}

GgufValue read_value(io::ByteReader& r, GgufType t, const std::string& key, int depth) {
  GgufValue v;
  v.type = t;
  switch (t) {
    case GgufType::U8: v.u = r.read<uint8_t>("u8"); break;
    case GgufType::I8: v.i = r.read<int8_t>("i8"); break;
    case GgufType::U16: v.u = r.read<uint16_t>("u16"); break;
    case GgufType::I16: v.i = r.read<int16_t>("i16"); break;
    case GgufType::U32: v.u = r.read<uint32_t>("u32"); break;
    case GgufType::I32: v.i = r.read<int32_t>("i32"); break;
    case GgufType::U64: v.u = r.read<uint64_t>("u64"); break;
    case GgufType::I64: v.i = r.read<int64_t>("i64"); break;
    case GgufType::F32: v.f = r.read<float>("f32"); break;
    case GgufType::F64: v.f = r.read<double>("f64"); break;
    case GgufType::Bool: {
      uint8_t b = r.read<uint8_t>("bool");
      if (b > 1) fail("{}: key '{}': bool value {} is neither 0 nor 1", r.name(), key, b);
      v.u = b;
      break;
    }
    case GgufType::String: v.s = read_string(r, r.size(), [&] { return "value of key '" + key + "'"; }); break;
    case GgufType::Array: {
      if (depth >= kMaxArrayDepth) fail("{}: key '{}': arrays nested deeper than {}", r.name(), key, kMaxArrayDepth);
      const uint32_t et = r.read<uint32_t>("array element type");
      if (!valid_type(et)) fail("{}: key '{}': unknown array element type {}", r.name(), key, et);
      v.elem = GgufType(et);
      const uint64_t n = r.read<uint64_t>("array length");
      if (n > r.remaining() / min_encoded_size(v.elem))
        fail("{}: key '{}': array of {} {} elements cannot fit in the {} bytes left in the file", r.name(), key, n,
             gguf_type_name(v.elem), r.remaining());
      if (v.elem == GgufType::String) {
        v.strings.reserve(size_t(n));
        for (uint64_t k = 0; k < n; ++k)
          v.strings.push_back(read_string(r, r.size(), [&] { return "value of key '" + key + "'"; }));
      } else if (v.elem == GgufType::Array) {
        v.arr.reserve(size_t(n));
        for (uint64_t k = 0; k < n; ++k) v.arr.push_back(read_value(r, v.elem, key, depth + 1));
      } else {
        const size_t bytes = size_t(n) * gguf_scalar_size(v.elem);  // <= remaining, checked above
        const uint8_t* p = r.take(bytes, "array elements");
        if (v.elem == GgufType::Bool)
          for (size_t k = 0; k < bytes; ++k)
            if (p[k] > 1) fail("{}: key '{}': bool value {} is neither 0 nor 1", r.name(), key, p[k]);
        v.packed.assign(p, p + bytes);
      }
      break;
    }
  }
  return v;
}

// llama.cpp per-block tensor names -> HF suffixes. Gemma-2's four norms are the exception
// handled in block_map(): there ffn_norm is the pre-FFN norm.
struct BlockName {
  const char* gguf;
  const char* hf;
};
const BlockName kBlockNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};
const BlockName kLlamaNorms[] = {{"ffn_norm.weight", "post_attention_layernorm.weight"}};
const BlockName kHeadNorms[] = {  // Qwen3's and Gemma-3's
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
};
const BlockName kOlmo2Norms[] = {  // OLMo-2: each block's output normalised, nothing before it
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
};
const BlockName kGemma2Norms[] = {
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
};

// Mixtures of experts: the router, and each matrix of all experts as one [experts, rows, cols]
// tensor, under a stacked name of kvparity's (the expert's own name without its index; the GGUF
// loader splits it into the experts' views, the exporter stacks them: model/moe_names.h).
// llama.cpp's Mixtral is arch "llama" with Mixtral's names, Qwen-MoE qwen2moe / qwen3moe.
const BlockName kMixtralExperts[] = {
    {"ffn_gate_inp.weight", "block_sparse_moe.gate.weight"},
    {"ffn_gate_exps.weight", "block_sparse_moe.experts.w1.weight"},
    {"ffn_up_exps.weight", "block_sparse_moe.experts.w3.weight"},
    {"ffn_down_exps.weight", "block_sparse_moe.experts.w2.weight"},
};
const BlockName kQwenExperts[] = {
    {"ffn_gate_inp.weight", "mlp.gate.weight"},
    {"ffn_gate_exps.weight", "mlp.experts.gate_proj.weight"},
    {"ffn_up_exps.weight", "mlp.experts.up_proj.weight"},
    {"ffn_down_exps.weight", "mlp.experts.down_proj.weight"},
};
const BlockName kQwen2SharedExpert[] = {
    {"ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight"},
    {"ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight"},
    {"ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight"},
    {"ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight"},
};
// GPT-OSS (llama.cpp's "gpt-oss", as its converter writes GptOssForCausalLM): the post-attention
// norm under Gemma-2's name, o_proj's bias, the sinks (a .weight suffix in GGUF only), the router
// with its bias, and each matrix of the experts and its biases stacked (model/moe_names.h).
const BlockName kGptOssNames[] = {
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"attn_output.bias", "self_attn.o_proj.bias"},
    {"attn_sinks.weight", "self_attn.sinks"},
    {"ffn_gate_inp.weight", "mlp.router.weight"},
    {"ffn_gate_inp.bias", "mlp.router.bias"},
    {"ffn_gate_exps.weight", "mlp.experts.gate_proj.weight"},
    {"ffn_up_exps.weight", "mlp.experts.up_proj.weight"},
    {"ffn_down_exps.weight", "mlp.experts.down_proj.weight"},
    {"ffn_gate_exps.bias", "mlp.experts.gate_proj.bias"},
    {"ffn_up_exps.bias", "mlp.experts.up_proj.bias"},
    {"ffn_down_exps.bias", "mlp.experts.down_proj.bias"},
};
// Phi-3 (llama.cpp's "phi3", as its converter writes Phi3ForCausalLM): q/k/v in one attn_qkv, gate
// and up in one ffn_up (gate's rows first), under transformers' own fused names, which the loader
// splits (hf_fused_projections.h). Listed last: ffn_up is the fused pair here, not up_proj.
const BlockName kPhi3Fused[] = {
    {"attn_qkv.weight", "self_attn.qkv_proj.weight"},
    {"ffn_up.weight", "mlp.gate_up_proj.weight"},
};

template <typename F>
void for_block_names(const std::string& arch, F&& f) {
  for (const auto& b : kBlockNames) f(b);
  if (arch == "gemma2" || arch == "gemma3")
    for (const auto& b : kGemma2Norms) f(b);
  else if (arch == "olmo2" || arch == "exaone4")
    for (const auto& b : kOlmo2Norms) f(b);
  else if (arch == "gpt-oss")
    for (const auto& b : kGptOssNames) f(b);
  else
    for (const auto& b : kLlamaNorms) f(b);
  if (arch == "qwen3" || arch == "qwen3vl" || arch == "qwen3moe" || arch == "gemma3" || arch == "olmo2" || arch == "olmoe" ||
      arch == "exaone4")
    for (const auto& b : kHeadNorms) f(b);
  if (arch == "llama")
    for (const auto& b : kMixtralExperts) f(b);
  if (arch == "qwen2moe" || arch == "qwen3moe" || arch == "olmoe")
    for (const auto& b : kQwenExperts) f(b);
  if (arch == "qwen2moe")
    for (const auto& b : kQwen2SharedExpert) f(b);
  if (arch == "phi3")
    for (const auto& b : kPhi3Fused) f(b);
}

}  // namespace

bool split_layer_name(const std::string& s, const std::string& prefix, long* layer, std::string* rest) {
  if (s.compare(0, prefix.size(), prefix) != 0) return false;
  size_t i = prefix.size(), j = i;
  while (j < s.size() && j - i < 7 && s[j] >= '0' && s[j] <= '9') ++j;
  if (j == i || j >= s.size() || s[j] != '.' || (s[i] == '0' && j - i > 1)) return false;
  *layer = std::stol(s.substr(i, j - i));
  *rest = s.substr(j + 1);
  return true;
}

size_t gguf_scalar_size(GgufType t) {
  return t == GgufType::String || t == GgufType::Array ? 0 : size_t(min_encoded_size(t));
}

size_t GgufValue::size() const {
  if (elem == GgufType::String) return strings.size();
  if (elem == GgufType::Array) return arr.size();
  return packed.size() / gguf_scalar_size(elem);
}

GgufValue GgufValue::at(size_t k) const {
  if (elem == GgufType::String) return of_str(strings.at(k));
  if (elem == GgufType::Array) return arr.at(k);
  const size_t sz = gguf_scalar_size(elem);
  if ((k + 1) * sz > packed.size()) throw std::out_of_range("GgufValue::at");
  const uint8_t* p = packed.data() + k * sz;
  auto get = [p]<class T>(T) { T x; std::memcpy(&x, p, sizeof(T)); return x; };
  GgufValue x;
  x.type = elem;
  switch (elem) {
    case GgufType::U8: x.u = get(uint8_t{}); break;
    case GgufType::I8: x.i = get(int8_t{}); break;
    case GgufType::U16: x.u = get(uint16_t{}); break;
    case GgufType::I16: x.i = get(int16_t{}); break;
    case GgufType::U32: x.u = get(uint32_t{}); break;
    case GgufType::I32: x.i = get(int32_t{}); break;
    case GgufType::U64: x.u = get(uint64_t{}); break;
    case GgufType::I64: x.i = get(int64_t{}); break;
    case GgufType::F32: x.f = get(float{}); break;
    case GgufType::F64: x.f = get(double{}); break;
    case GgufType::Bool: x.u = get(uint8_t{}); break;
    default: break;
  }
  return x;
}

GgufValue GgufValue::of_array(GgufType elem, const std::vector<GgufValue>& items) {
  GgufValue x;
  x.type = GgufType::Array;
  x.elem = elem;
  for (const GgufValue& it : items) {
    if (it.type != elem)
      fail("GGUF array of {} given an element of type {}", gguf_type_name(elem), gguf_type_name(it.type));
    if (elem == GgufType::String) {
      x.strings.push_back(it.s);
    } else if (elem == GgufType::Array) {
      x.arr.push_back(it);
    } else {
      // Stored as the file stores it: little-endian, the value narrowed to the element type.
      auto put = [&x]<class T>(T v) {
        uint8_t b[sizeof(T)];
        std::memcpy(b, &v, sizeof(T));
        x.packed.insert(x.packed.end(), b, b + sizeof(T));
      };
      switch (elem) {
        case GgufType::U8: put(uint8_t(it.u)); break;
        case GgufType::I8: put(int8_t(it.i)); break;
        case GgufType::U16: put(uint16_t(it.u)); break;
        case GgufType::I16: put(int16_t(it.i)); break;
        case GgufType::U32: put(uint32_t(it.u)); break;
        case GgufType::I32: put(int32_t(it.i)); break;
        case GgufType::U64: put(uint64_t(it.u)); break;
        case GgufType::I64: put(int64_t(it.i)); break;
        case GgufType::F32: put(float(it.f)); break;
        case GgufType::F64: put(double(it.f)); break;
        case GgufType::Bool: put(uint8_t(it.u ? 1 : 0)); break;
        default: break;
      }
    }
  }
  return x;
}

GgufValue GgufValue::of_strings(std::vector<std::string> items) {
  GgufValue x;
  x.type = GgufType::Array;
  x.elem = GgufType::String;
  x.strings = std::move(items);
  return x;
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::U8: case GgufType::I8: case GgufType::U16: case GgufType::I16: case GgufType::U32:
    case GgufType::I32: case GgufType::U64: case GgufType::I64: return true;
    default: return false;
  }
}

std::string gguf_type_name(GgufType t) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  uint32_t i = uint32_t(t);
  return i < 13 ? names[i] : fmt::format("type {}", i);
}

std::string gguf_arch_for(const ModelConfig& c) {
  if (c.arch == Arch::Exaone4) return "exaone4";  // its global layers are its NoPE layers
  if (c.phi3_rope()) return "phi3";               // the writer checks the decoder is Phi-3's
  // Ministral 3: llama.cpp's mistral3, Llama's file with the query temperature's keys.
  if (c.query_temperature_beta > 0.0f) return "mistral3";
  if (!c.nope_layers.empty()) return "smollm3";  // the writer checks that the file can say its layers
  if (c.granite_multipliers()) return "granite";
  if (c.is_moe() && (c.arch == Arch::Qwen2 || c.arch == Arch::Qwen3)) return arch_name(c.arch) + "moe";
  if (c.arch == Arch::Olmoe) return "olmoe";
  return gguf_arch_for(c.arch);
}

std::vector<std::string> gguf_llama_cpp_gaps(const ModelConfig& c) {
  std::vector<std::string> gaps;
  const std::string arch = gguf_arch_for(c);
  if (arch == "qwen2moe" || arch == "qwen3moe") {
    std::vector<int> dense;
    for (int l = 0; l < c.n_layers; ++l)
      if (!c.moe_layer(l)) dense.push_back(l);
    if (!dense.empty())
      gaps.push_back(fmt::format("layer{} {} {} dense (mlp_only_layers / decoder_sparse_step): llama.cpp's {} loader "
                                 "wants experts in every layer",
                                 dense.size() > 1 ? "s" : "", fmt::join(dense, ", "), dense.size() > 1 ? "are" : "is",
                                 arch));
  }
  if (arch == "olmoe" && (c.n_kv_heads != c.n_heads || c.q_dim() != c.dim))
    gaps.push_back(fmt::format("{} query heads share {} KV heads of {}: llama.cpp's olmoe loader takes multi-head "
                               "attention with heads x head_dim = hidden size only (its q/k norms are {{n_embd}})",
                               c.n_heads, c.n_kv_heads, c.head_dim));
  if (arch == "exaone4")
    for (std::string& g : exaone4_llama_cpp_gaps(c)) gaps.push_back(std::move(g));
  for (std::string& g : phi3_llama_cpp_gaps(c)) gaps.push_back(std::move(g));  // read as llama or mistral
  return gaps;
}

std::string gguf_arch_for(Arch a) {
  switch (a) {
    case Arch::Llama: case Arch::Mistral: return "llama";
    case Arch::Qwen2: return "qwen2";
    case Arch::Qwen3: return "qwen3";
    case Arch::Gemma2: return "gemma2";
    case Arch::Gemma3: return "gemma3";
    case Arch::Olmo2: case Arch::Olmo3: return "olmo2";
    case Arch::Olmoe: return "olmoe";
    case Arch::Exaone4: return "exaone4";
    case Arch::GptOss: return "gpt-oss";
  }
  return "llama";
}

std::string gguf_to_hf_name(const std::string& g, const std::string& arch) {
  if (g == "token_embd.weight") return "model.embed_tokens.weight";
  if (g == "output_norm.weight") return "model.norm.weight";
  if (g == "output.weight") return "lm_head.weight";
  long layer;
  std::string rest, out;
  if (!split_layer_name(g, "blk.", &layer, &rest)) return "";
  for_block_names(arch, [&](const BlockName& b) {
    if (rest == b.gguf) out = fmt::format("model.layers.{}.{}", layer, b.hf);
  });
  return out;
}

std::string hf_to_gguf_name(const std::string& h, const std::string& arch) {
  if (h == "model.embed_tokens.weight") return "token_embd.weight";
  if (h == "model.norm.weight") return "output_norm.weight";
  if (h == "lm_head.weight") return "output.weight";
  long layer;
  std::string rest, out;
  if (!split_layer_name(h, "model.layers.", &layer, &rest)) return "";
  for_block_names(arch, [&](const BlockName& b) {
    if (rest == b.hf) out = fmt::format("blk.{}.{}", layer, b.gguf);
  });
  return out;
}

GgufFile parse_gguf(const uint8_t* data, size_t size, const std::string& name) {
  io::ByteReader r(data, size, name);
  if (size < 4 || std::memcmp(data, "GGUF", 4) != 0) fail("{}: not a GGUF file (bad magic)", name);
  r.take(4, "magic");
  GgufFile g;
  g.version = r.read<uint32_t>("version");
  if (g.version != 2 && g.version != 3) {
    if (g.version == 1) fail("{}: GGUF version 1 is not supported (versions 2 and 3 are)", name);
    fail("{}: unsupported GGUF version {} (versions 2 and 3 are; a big-endian file reads as a huge version)", name,
         g.version);
  }
  const uint64_t n_tensors = r.read<uint64_t>("tensor count");
  const uint64_t n_kv = r.read<uint64_t>("metadata count");
  // A kv pair takes at least 8 (key length) + 4 (type) + 1 bytes, a tensor info at least
  // 8 (name length) + 4 + 8 + 4 + 8: refuse counts the file cannot possibly hold before reserving.
  if (n_kv > r.remaining() / 13 || n_tensors > r.remaining() / 32 || n_kv * 13 + n_tensors * 32 > r.remaining())
    fail("{}: header claims {} tensors and {} metadata entries, more than the {}-byte file can hold", name, n_tensors,
         n_kv, size);

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = read_string(r, kMaxKeyLen, [&] { return fmt::format("metadata key #{}", i); });
    const uint32_t t = r.read<uint32_t>("value type");
    if (!valid_type(t)) fail("{}: key '{}': unknown value type {}", name, key, t);
    GgufValue v = read_value(r, GgufType(t), key, 0);
    if (!g.kv.emplace(key, std::move(v)).second) fail("{}: duplicate metadata key '{}'", name, key);
  }

  if (auto it = g.kv.find("general.alignment"); it != g.kv.end()) {
    const GgufValue& a = it->second;
    if (!a.is_integer()) fail("{}: key 'general.alignment' must be an integer", name);
    uint64_t al = (a.type == GgufType::U8 || a.type == GgufType::U16 || a.type == GgufType::U32 ||
                   a.type == GgufType::U64) ? a.u : uint64_t(a.i);
    if (al == 0 || (al & (al - 1)) != 0 || al > (uint64_t(1) << 20))
      fail("{}: key 'general.alignment' = {} is not a power of two up to 1 MiB", name, al);
    g.alignment = al;
  }

  std::set<std::string> seen;
  g.tensors.reserve(size_t(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo ti;
    ti.name = read_string(r, kMaxTensorNameLen, [&] { return fmt::format("name of tensor #{}", i); });
    const uint32_t nd = r.read<uint32_t>("tensor n_dims");
    if (nd == 0 || nd > 4) fail("{}: tensor '{}' has {} dimensions (1 to 4 allowed)", name, ti.name, nd);
    for (uint32_t d = 0; d < nd; ++d) ti.ne.push_back(r.read<uint64_t>("tensor dimension"));
    ti.type = r.read<uint32_t>("tensor type");
    ti.offset = r.read<uint64_t>("tensor offset");
    const std::optional<QuantType> quant = quant_from_ggml_type(ti.type);
    if (ti.type != uint32_t(GgmlType::F32) && ti.type != uint32_t(GgmlType::F16) &&
        ti.type != uint32_t(GgmlType::BF16) && !quant)
      fail("{}: tensor '{}' has ggml type {} ({}), which is not supported (F32, F16, BF16, {})", name, ti.name,
           ggml_type_name(ti.type), ti.type, fmt::join(quant_names(), ", "));
    if (quant && ti.ne[0] % block_elems(*quant) != 0)
      fail("{}: tensor '{}' ({}): its rows of {} values are not a whole number of {}-value blocks", name, ti.name,
           quant_name(*quant), ti.ne[0], block_elems(*quant));
    // Bounding each step by the file size keeps the element count from overflowing. Quantised
    // blocks hold up to 256 values in 84 bytes (Q2_K), so a tensor may count 4x the file's bytes.
    const uint64_t max_elems = uint64_t(size) * 4;
    uint64_t numel = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      const uint64_t ne = ti.ne[d];
      if (ne == 0 || ne > max_elems / numel)
        fail("{}: tensor '{}': dimension {} = {} is zero or larger than the file", name, ti.name, d, ne);
      numel *= ne;
    }
    if (!seen.insert(ti.name).second) fail("{}: duplicate tensor '{}'", name, ti.name);
    g.tensors.push_back(std::move(ti));
  }

  const uint64_t pos = r.pos();
  g.data_offset = (pos + g.alignment - 1) / g.alignment * g.alignment;
  if (g.data_offset > size && !g.tensors.empty())
    fail("{}: truncated file: the data section would start at {}, past the end ({} bytes)", name, g.data_offset, size);
  const uint64_t data_size = g.data_offset <= size ? size - g.data_offset : 0;
  for (const auto& ti : g.tensors) {
    uint64_t numel = 1;
    for (auto ne : ti.ne) numel *= ne;  // bounded by the file size above
    const std::optional<QuantType> quant = quant_from_ggml_type(ti.type);
    const uint64_t nbytes =
        quant ? numel / block_elems(*quant) * block_bytes(*quant) : numel * (ti.type == uint32_t(GgmlType::F32) ? 4 : 2);
    if (ti.offset % g.alignment != 0)
      fail("{}: tensor '{}': offset {} is not a multiple of the alignment {}", name, ti.name, ti.offset, g.alignment);
    if (ti.offset > data_size || nbytes > data_size - ti.offset)
      fail("{}: tensor '{}': data [{}, +{}) lies outside the data section ({} bytes from offset {})", name, ti.name,
           ti.offset, nbytes, data_size, g.data_offset);
    // Block decoders read their fields bytewise; only plain element arrays need aligned elements.
    if (!quant && (g.data_offset + ti.offset) % (ti.type == uint32_t(GgmlType::F32) ? 4 : 2) != 0)
      fail("{}: tensor '{}': data at file offset {} is not aligned to its elements", name, ti.name,
           g.data_offset + ti.offset);
  }
  return g;
}

}  // namespace kvp
