#include "io/model_writer.h"

#include <algorithm>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/atomic_file.h"
#include "io/gguf.h"
#include "io/gguf_exaone4.h"
#include "io/gguf_gpt_oss.h"
#include "io/gguf_mistral3.h"
#include "io/io_util.h"
#include "kernels/elementwise.h"
#include "tokenizer/vocab_spec.h"

namespace kvp {

using nlohmann::json;

namespace {

const char* st_dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
  }
  return "?";
}

void check_view(const std::string& path, const TensorView& t, bool streamed) {
  if (t.name.empty()) fail("{}: cannot write a tensor without a name", path);
  if (!streamed && t.data == nullptr && t.numel() != 0) fail("{}: tensor '{}' has no data", path, t.name);
  for (auto d : t.shape)
    if (d < 0) fail("{}: tensor '{}' has a negative dimension", path, t.name);
}

}  // namespace

void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                       const std::map<std::string, std::string>& metadata, const Progress& progress,
                       const TensorBytes& bytes, const std::vector<bool>& u8) {
  json h = json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  if (!u8.empty() && u8.size() != tensors.size())
    fail("{}: {} U8 flags for {} tensors", path, u8.size(), tensors.size());
  const auto raw = [&u8](size_t i) { return !u8.empty() && u8[i]; };
  const auto size_of = [&](size_t i) { return raw(i) ? uint64_t(tensors[i].numel()) : uint64_t(tensors[i].nbytes()); };
  uint64_t off = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorView& t = tensors[i];
    check_view(path, t, bool(bytes));
    if (t.name == "__metadata__") fail("{}: '__metadata__' is reserved and cannot name a tensor", path);
    if (h.contains(t.name)) fail("{}: duplicate tensor '{}'", path, t.name);
    if (t.quantized() && !raw(i))
      fail("{}: tensor '{}' is {}-quantised; safetensors has no such dtype (dequantise it first)", path, t.name,
           quant_name(t.quant));
    const uint64_t n = size_of(i);
    h[t.name] = {{"dtype", raw(i) ? std::string("U8") : st_dtype_name(t.dtype)}, {"shape", t.shape},
                 {"data_offsets", {off, off + n}}};
    off += n;
  }
  std::string hs = h.dump();
  // Readers map the data section directly, so it starts 8-aligned (as the safetensors library does).
  hs.append((8 - hs.size() % 8) % 8, ' ');
  AtomicFile f(path);
  f.write_pod<uint64_t>(hs.size());
  f.write_str(hs);
  uint64_t done = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorView& t = tensors[i];
    f.write(bytes ? bytes(i, t) : t.data, size_t(size_of(i)));
    done += size_of(i);
    if (progress) progress(size_t(done), size_t(off));
  }
  f.commit();
}

void write_safetensors_index(const std::string& path, const std::map<std::string, std::string>& weight_map,
                             uint64_t total_size) {
  json j = {{"metadata", {{"total_size", total_size}}}, {"weight_map", weight_map}};
  AtomicFile f(path);
  f.write_str(j.dump(2) + "\n");
  f.commit();
}

namespace {

void put_string(AtomicFile& f, const std::string& s) {
  f.write_pod<uint64_t>(s.size());
  f.write_str(s);
}

void put_value(AtomicFile& f, const GgufValue& v, bool with_type, const std::string& path) {
  if (with_type) f.write_pod<uint32_t>(uint32_t(v.type));
  switch (v.type) {
    case GgufType::U8: f.write_pod<uint8_t>(uint8_t(v.u)); break;
    case GgufType::I8: f.write_pod<int8_t>(int8_t(v.i)); break;
    case GgufType::U16: f.write_pod<uint16_t>(uint16_t(v.u)); break;
    case GgufType::I16: f.write_pod<int16_t>(int16_t(v.i)); break;
    case GgufType::U32: f.write_pod<uint32_t>(uint32_t(v.u)); break;
    case GgufType::I32: f.write_pod<int32_t>(int32_t(v.i)); break;
    case GgufType::U64: f.write_pod<uint64_t>(v.u); break;
    case GgufType::I64: f.write_pod<int64_t>(v.i); break;
    case GgufType::F32: f.write_pod<float>(float(v.f)); break;
    case GgufType::F64: f.write_pod<double>(v.f); break;
    case GgufType::Bool: f.write_pod<uint8_t>(v.u ? 1 : 0); break;
    case GgufType::String: put_string(f, v.s); break;
    case GgufType::Array:
      f.write_pod<uint32_t>(uint32_t(v.elem));
      f.write_pod<uint64_t>(v.size());
      if (v.elem == GgufType::String) {
        for (const auto& x : v.strings) put_string(f, x);
      } else if (v.elem == GgufType::Array) {
        for (const auto& x : v.arr) {
          if (x.type != GgufType::Array) fail("{}: element of type {} in an array of arrays", path, gguf_type_name(x.type));
          put_value(f, x, false, path);
        }
      } else {
        if (v.packed.size() % gguf_scalar_size(v.elem) != 0)
          fail("{}: packed array of {} holds {} bytes", path, gguf_type_name(v.elem), v.packed.size());
        f.write(v.packed.data(), v.packed.size());
      }
      break;
  }
}

uint32_t ggml_type_of(DType t) {
  switch (t) {
    case DType::F32: return uint32_t(GgmlType::F32);
    case DType::F16: return uint32_t(GgmlType::F16);
    case DType::BF16: return uint32_t(GgmlType::BF16);
  }
  return 0;
}

// Ordered key list so files come out in the order llama.cpp's own writer uses (general.* first).
class KvList {
 public:
  void set(const std::string& k, GgufValue v) {
    for (auto& [key, val] : items_)
      if (key == k) { val = std::move(v); return; }
    items_.emplace_back(k, std::move(v));
  }
  const std::vector<std::pair<std::string, GgufValue>>& items() const { return items_; }

 private:
  std::vector<std::pair<std::string, GgufValue>> items_;
};

// The vocabulary a GGUF of this model carries: one token per embedding row, as llama.cpp reads
// the token count as the vocabulary size and checks the embedding's shape against it. Models whose
// embedding has rows past the tokenizer (Qwen2.5: 151936 rows, 151665 tokens) get llama.cpp's own
// padding, unused "[PAD<id>]" tokens; a tokenizer with more tokens than rows is not this model's.
VocabSpec vocab_for_file(const std::string& path, const VocabSpec& v, const ModelConfig& cfg) {
  const size_t n = v.tokens.size(), rows = size_t(cfg.vocab_size);
  if (!v.scores.empty() && v.scores.size() != n)
    fail("{}: vocabulary has {} scores for {} tokens", path, v.scores.size(), n);
  if (!v.token_types.empty() && v.token_types.size() != n)
    fail("{}: vocabulary has {} token types for {} tokens", path, v.token_types.size(), n);
  if (n > rows)
    fail("{}: the tokenizer has {} tokens, more than the model's {} embedding rows (not this model's tokenizer?)",
         path, n, rows);
  VocabSpec p = v;
  if (n == rows) return p;
  if (p.token_types.empty()) p.token_types.assign(n, int32_t(TokenType::Normal));
  for (size_t id = n; id < rows; ++id) {
    p.tokens.push_back(fmt::format("[PAD{}]", id));
    if (!p.scores.empty()) p.scores.push_back(-1000.0f);
    p.token_types.push_back(int32_t(TokenType::Unused));
  }
  return p;
}

}  // namespace

void write_gguf(const std::string& path, const ModelConfig& cfg, const std::vector<TensorView>& tensors,
                const VocabSpec* vocab, const GgufWriteOptions& opts) {
  // Page-aligned tensors (general.alignment = 4096, which llama.cpp honours; its default is 32):
  // mapped weights are read in place, and a 4 KiB row that straddles two pages costs decode a
  // second TLB miss and a prefetcher restart per row. TinyLlama-1.1B fp16 decode on a Zen 5 host,
  // interleaved runs: 14.0-19.1 tok/s from a 32-aligned file, 19.4-20.1 at 64, 18.0-22.1 at 4096.
  // The padding costs at most 4 KiB per tensor.
  constexpr uint64_t kAlign = 4096;
  cfg.validate();
  const std::string arch = opts.arch.empty() ? gguf_arch_for(cfg) : opts.arch;
  const std::string A = arch + ".";
  if ((cfg.arch == Arch::Exaone4) != (arch == "exaone4"))
    fail("{}: GGUF architecture '{}' for a {} model: exaone4 models are llama.cpp's exaone4 and nothing else is", path,
         arch, arch_name(cfg.arch));
  if (cfg.phi3_rope() && (arch != "phi3" || (cfg.arch != Arch::Llama && cfg.arch != Arch::Mistral)))
    fail("{}: Phi-3's rotary embedding (partial factor, longrope) has a GGUF form only as llama.cpp's phi3 of "
         "Phi-3's decoder, not '{}'",
         path, arch);
  if ((cfg.query_temperature_beta > 0.0f) && arch != "mistral3")
    fail("{}: the query temperature (Ministral 3's) has a GGUF form only as llama.cpp's mistral3, not '{}'", path, arch);
  if (!cfg.nope_layers.empty() && cfg.arch != Arch::Exaone4) {
    // llama.cpp's smollm3 has no key for its layers without RoPE: its loader fixes every 4th.
    std::vector<int> every_4th;
    for (int l = 3; l < cfg.n_layers; l += 4) every_4th.push_back(l);
    if (cfg.arch != Arch::Llama || arch != "smollm3" || cfg.nope_layers != every_4th)
      fail("{}: GGUF (llama.cpp's smollm3) can say only layers 3, 7, 11, ... of a Llama without RoPE; this {} model "
           "has other layers without it",
           path, arch_name(cfg.arch));
  }

  // Work out names, types and offsets before creating the file, so bad input leaves nothing behind.
  struct Out {
    const TensorView* t;
    std::string name;
    uint64_t offset;
    size_t index;  // in `all`
  };
  std::vector<Out> outs;
  std::set<std::string> seen;
  uint64_t off = 0;
  size_t n_f16 = 0, n_bf16 = 0;
  // llama3 RoPE scaling travels as llama.cpp's per-frequency divisors, tensor rope_freqs.weight.
  std::vector<float> rope_freqs;
  if (cfg.rope_scaling == ModelConfig::RopeScaling::Llama3) {
    RopeScalingSpec l3;
    l3.type = RopeScalingSpec::Type::Llama3;
    l3.factor = cfg.rope_factor;
    l3.low_freq_factor = cfg.rope_low_freq_factor;
    l3.high_freq_factor = cfg.rope_high_freq_factor;
    l3.original_max_pos = cfg.rope_original_max_pos;
    rope_freqs = llama3_rope_freq_factors(cfg.head_dim, cfg.rope_theta, l3);
  } else if (cfg.rope_scaling == ModelConfig::RopeScaling::FreqFactors) {
    rope_freqs = cfg.rope_freq_factors;
  }
  std::vector<TensorView> all = tensors;
  // The writer's own F32 vectors, after the model's tensors: rope_freqs, or longrope's factors.
  auto own_vector = [&all](const char* name, const std::vector<float>& v) {
    TensorView rf;
    rf.name = name;
    rf.dtype = DType::F32;
    rf.shape = {int64_t(v.size())};
    rf.data = v.data();
    all.push_back(rf);
  };
  if (!rope_freqs.empty()) own_vector(kRopeFreqsTensor, rope_freqs);
  if (cfg.rope_scaling == ModelConfig::RopeScaling::LongRope) {
    own_vector(kPhi3RopeFactorsLong, cfg.rope_long_factors);
    own_vector(kPhi3RopeFactorsShort, cfg.rope_short_factors);
  }
  for (size_t i = 0; i < all.size(); ++i) {
    const TensorView& t = all[i];
    const bool own = i >= tensors.size();
    check_view(path, t, opts.bytes && !own);
    std::string g = own ? t.name : hf_to_gguf_name(t.name, arch);
    if (g.empty()) fail("{}: tensor '{}' has no llama.cpp name for GGUF architecture '{}'", path, t.name, arch);
    if (!seen.insert(g).second) fail("{}: duplicate tensor '{}'", path, t.name);
    if (t.shape.empty() || t.shape.size() > 4)
      fail("{}: tensor '{}' has {} dimensions; GGUF takes 1 to 4", path, t.name, t.shape.size());
    if (t.numel() == 0) fail("{}: tensor '{}' is empty; GGUF dimensions must be positive", path, t.name);
    if (t.shape.size() >= 2 && t.dtype == DType::F16) ++n_f16;
    if (t.shape.size() >= 2 && t.dtype == DType::BF16) ++n_bf16;
    outs.push_back({&t, g, off, i});
    off += (t.nbytes() + kAlign - 1) / kAlign * kAlign;
  }

  KvList kv;
  kv.set("general.architecture", GgufValue::of_str(arch));
  kv.set("general.name", GgufValue::of_str(opts.name));
  kv.set("general.alignment", GgufValue::of_u32(uint32_t(kAlign)));
  // llama_ftype: 0 all F32, 1 mostly F16, 32 mostly BF16, 38 MXFP4 experts (gpt-oss's published
  // form) beside unquantised tensors (informational for llama.cpp).
  const bool mxfp4_only = std::all_of(all.begin(), all.end(), [](const TensorView& t) {
    return !t.quantized() || t.quant == QuantType::MXFP4;
  }) && std::any_of(all.begin(), all.end(), [](const TensorView& t) { return t.quant == QuantType::MXFP4; });
  kv.set("general.file_type",
         GgufValue::of_u32(opts.file_type.value_or(mxfp4_only ? 38 : n_bf16 > 0 ? 32 : n_f16 > 0 ? 1 : 0)));
  // Required by the spec once any tensor is block-quantised: 2 is ggml's current block layout.
  if (std::any_of(all.begin(), all.end(), [](const TensorView& t) { return t.quantized(); }))
    kv.set("general.quantization_version", GgufValue::of_u32(2));
  kv.set(A + "context_length", GgufValue::of_u32(uint32_t(cfg.max_seq_len)));
  kv.set(A + "embedding_length", GgufValue::of_u32(uint32_t(cfg.dim)));
  kv.set(A + "block_count", GgufValue::of_u32(uint32_t(cfg.n_layers)));
  kv.set(A + "feed_forward_length", GgufValue::of_u32(uint32_t(cfg.hidden_dim)));
  kv.set(A + "attention.head_count", GgufValue::of_u32(uint32_t(cfg.n_heads)));
  kv.set(A + "attention.head_count_kv", GgufValue::of_u32(uint32_t(cfg.n_kv_heads)));
  kv.set(A + "rope.freq_base", GgufValue::of_f32(cfg.rope_theta));
  // llama.cpp's YaRN keys (rope.scaling.attn_factor and the ramp's) take its own formula, whose
  // attention factor is not transformers' (kvparity reads no YaRN GGUF either).
  if (cfg.rope_scaling == ModelConfig::RopeScaling::Yarn && arch != "gpt-oss" && arch != "mistral3")
    fail("{}: YaRN RoPE scaling has no GGUF form kvparity writes or reads (write --to hf)", path);
  if (cfg.rope_scaling == ModelConfig::RopeScaling::Linear) {
    kv.set(A + "rope.scaling.type", GgufValue::of_str("linear"));
    kv.set(A + "rope.scaling.factor", GgufValue::of_f32(cfg.rope_factor));
  }
  kv.set(A + "attention.layer_norm_rms_epsilon", GgufValue::of_f32(cfg.norm_eps));
  kv.set(A + "attention.key_length", GgufValue::of_u32(uint32_t(cfg.head_dim)));
  kv.set(A + "attention.value_length", GgufValue::of_u32(uint32_t(cfg.head_dim)));
  kv.set(A + "rope.dimension_count", GgufValue::of_u32(uint32_t(cfg.rotated_dims())));
  if (arch == "phi3") {  // as llama.cpp's converter (Phi3MiniModel): 0 says no window (phi-4)
    kv.set(A + "attention.sliding_window", GgufValue::of_u32(uint32_t(std::max(0, cfg.sliding_window))));
    if (cfg.rope_scaling == ModelConfig::RopeScaling::LongRope) {
      kv.set(A + "rope.scaling.original_context_length", GgufValue::of_u32(uint32_t(cfg.rope_original_max_pos)));
      kv.set(A + "rope.scaling.attn_factor", GgufValue::of_f32(float(cfg.rope_attention_factor)));
    }
  }
  // Under "llama" this key is kvparity's Mistral marker (llama.cpp ignores it); gemma2 reads it.
  if (cfg.sliding_window > 0) kv.set(A + "attention.sliding_window", GgufValue::of_u32(uint32_t(cfg.sliding_window)));
  if (cfg.granite_multipliers()) {
    if (arch != "granite" || cfg.arch != Arch::Llama)
      fail("{}: Granite's multipliers have a GGUF form only on Llama's decoder (llama.cpp's granite)", path);
    kv.set(A + "embedding_scale", GgufValue::of_f32(cfg.embedding_multiplier));
    kv.set(A + "residual_scale", GgufValue::of_f32(cfg.residual_multiplier));
    kv.set(A + "logit_scale", GgufValue::of_f32(cfg.logits_scaling));
    if (cfg.attention_multiplier > 0.0f) kv.set(A + "attention.scale", GgufValue::of_f32(cfg.attention_multiplier));
  }
  std::vector<std::pair<std::string, GgufValue>> family_keys;
  if (arch == "exaone4") exaone4_gguf_keys(cfg, A, path, family_keys);
  if (arch == "mistral3") mistral3_gguf_keys(cfg, A, path, family_keys);
  if (cfg.arch == Arch::GptOss) gpt_oss_gguf_keys(cfg, A, path, family_keys);
  for (auto& [k, v] : family_keys) kv.set(k, std::move(v));
  if (cfg.arch != Arch::GptOss && cfg.is_moe()) {
    // llama.cpp's keys; expert_weights_norm too, which its Mixtral and Qwen-MoE graphs fix by arch.
    kv.set(A + "expert_count", GgufValue::of_u32(uint32_t(cfg.moe.n_experts)));
    kv.set(A + "expert_used_count", GgufValue::of_u32(uint32_t(cfg.moe.n_used)));
    kv.set(A + "expert_feed_forward_length", GgufValue::of_u32(uint32_t(cfg.moe.expert_hidden_dim)));
    if (cfg.moe.shared_hidden_dim > 0)
      kv.set(A + "expert_shared_feed_forward_length", GgufValue::of_u32(uint32_t(cfg.moe.shared_hidden_dim)));
    kv.set(A + "expert_weights_norm", GgufValue::of_bool(cfg.moe.norm_topk_prob));
  }
  if (cfg.arch == Arch::Olmo3) {
    // llama.cpp's converter's form of Olmo3ForCausalLM: "olmo2", the window, a bool per layer (a
    // window over no layer, where none is windowed: the key is what marks OLMo-3).
    if (cfg.rope_local_theta > 0.0f && cfg.rope_local_theta != cfg.rope_theta)
      fail("{}: olmo3 whose windowed layers rotate at another base has no GGUF form", path);
    if (cfg.sliding_window == 0) kv.set(A + "attention.sliding_window", GgufValue::of_u32(4096));
    std::vector<GgufValue> pattern;
    for (int l = 0; l < cfg.n_layers; ++l) pattern.push_back(GgufValue::of_bool(cfg.window_for_layer(l) > 0));
    kv.set(A + "attention.sliding_window_pattern", GgufValue::of_array(GgufType::Bool, pattern));
  }
  if (cfg.arch == Arch::Gemma3) {
    // llama.cpp reads the window and the caps; the pattern, the local base and the score scalar
    // are keys of kvparity's (llama.cpp fixes them at 6, 10000 and head_dim for every Gemma-3).
    kv.set(A + "attention.sliding_window_pattern", GgufValue::of_u32(uint32_t(cfg.local_layer_pattern())));
    kv.set(A + "rope.freq_base_swa", GgufValue::of_f32(cfg.rope_local_theta > 0 ? cfg.rope_local_theta : cfg.rope_theta));
    kv.set(A + "attention.query_pre_attn_scalar", GgufValue::of_f32(cfg.query_pre_attn_scalar));
    if (cfg.final_logit_softcapping > 0)
      kv.set(A + "final_logit_softcapping", GgufValue::of_f32(cfg.final_logit_softcapping));
  }
  if (cfg.arch == Arch::Gemma2) {
    for (auto [ex, key] : {std::pair{"attn_logit_softcapping", "attn_logit_softcapping"},
                           std::pair{"final_logit_softcapping", "final_logit_softcapping"},
                           std::pair{"query_pre_attn_scalar", "attention.query_pre_attn_scalar"}})
      if (auto it = opts.extras.find(ex); it != opts.extras.end())
        kv.set(A + key, GgufValue::of_f32(float(it->second)));
  }
  if (vocab != nullptr) {
    const VocabSpec v = vocab_for_file(path, *vocab, cfg);
    const size_t n = v.tokens.size();
    kv.set("tokenizer.ggml.model", GgufValue::of_str(v.model));
    if (!v.pre.empty()) kv.set("tokenizer.ggml.pre", GgufValue::of_str(v.pre));
    kv.set("tokenizer.ggml.tokens", GgufValue::of_strings(v.tokens));
    if (!v.scores.empty()) {
      std::vector<GgufValue> sc;
      sc.reserve(n);
      for (float s : v.scores) sc.push_back(GgufValue::of_f32(s));
      kv.set("tokenizer.ggml.scores", GgufValue::of_array(GgufType::F32, sc));
    }
    if (!v.token_types.empty()) {
      std::vector<GgufValue> tt;
      tt.reserve(n);
      for (int32_t x : v.token_types) tt.push_back(GgufValue::of_i32(x));
      kv.set("tokenizer.ggml.token_type", GgufValue::of_array(GgufType::I32, tt));
    }
    if (!v.merges.empty()) {
      kv.set("tokenizer.ggml.merges", GgufValue::of_strings(v.merges));
    }
    auto id = [&](const char* k, int x) {
      if (x >= 0) kv.set(k, GgufValue::of_u32(uint32_t(x)));
    };
    id("tokenizer.ggml.bos_token_id", v.bos_id);
    id("tokenizer.ggml.eos_token_id", v.eos_id);
    id("tokenizer.ggml.unknown_token_id", v.unk_id);
    id("tokenizer.ggml.padding_token_id", v.pad_id);
    kv.set("tokenizer.ggml.add_bos_token", GgufValue::of_bool(v.add_bos));
    kv.set("tokenizer.ggml.add_space_prefix", GgufValue::of_bool(v.add_space_prefix));
  } else {
    // llama.cpp requires tokenizer.ggml.model; "none" plus <arch>.vocab_size is how it reads a
    // file that carries no vocabulary.
    kv.set("tokenizer.ggml.model", GgufValue::of_str("none"));
    kv.set(A + "vocab_size", GgufValue::of_u32(uint32_t(cfg.vocab_size)));
  }
  // Further end-of-generation ids (ModelConfig::more_eos_ids) as the two keys llama.cpp has for
  // them, its EOT and EOM tokens; a third would have no key and is not written.
  for (size_t i = 0; i < cfg.more_eos_ids.size() && i < 2; ++i)
    kv.set(i == 0 ? "tokenizer.ggml.eot_token_id" : "tokenizer.ggml.eom_token_id",
           GgufValue::of_u32(uint32_t(cfg.more_eos_ids[i])));
  for (const auto& [k, v] : opts.extra_kv) kv.set(k, v);

  AtomicFile f(path);
  f.write_str("GGUF");
  f.write_pod<uint32_t>(3);
  f.write_pod<uint64_t>(outs.size());
  f.write_pod<uint64_t>(kv.items().size());
  for (const auto& [k, v] : kv.items()) {
    put_string(f, k);
    put_value(f, v, true, path);
  }
  for (const auto& o : outs) {
    put_string(f, o.name);
    f.write_pod<uint32_t>(uint32_t(o.t->shape.size()));
    for (auto it = o.t->shape.rbegin(); it != o.t->shape.rend(); ++it) f.write_pod<uint64_t>(uint64_t(*it));
    f.write_pod<uint32_t>(o.t->quantized() ? quant_ggml_type(o.t->quant) : ggml_type_of(o.t->dtype));
    f.write_pod<uint64_t>(o.offset);
  }
  f.pad_zeros(size_t((kAlign - f.written() % kAlign) % kAlign));
  const uint64_t base = f.written();
  const uint64_t total = outs.empty() ? 0 : outs.back().offset + outs.back().t->nbytes();
  for (const auto& o : outs) {
    f.pad_zeros(size_t(base + o.offset - f.written()));
    f.write(opts.bytes && o.index < tensors.size() ? opts.bytes(o.index, *o.t) : o.t->data, o.t->nbytes());
    if (opts.progress) opts.progress(size_t(o.offset + o.t->nbytes()), size_t(total));
  }
  f.pad_zeros(size_t((kAlign - f.written() % kAlign) % kAlign));
  f.commit();
}

}  // namespace kvp
