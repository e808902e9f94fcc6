// GGUF metadata and tensors into a Checkpoint (gguf.h): the <arch>.* hyper-parameters, tensors under
// their HF names, and the embedded vocabulary. Parsing the file's bytes is gguf.cpp's.
#include <algorithm>
#include <cstring>
#include <optional>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/quant.h"
#include "io/gguf.h"
#include "io/gguf_exaone4.h"
#include "io/gguf_gpt_oss.h"
#include "io/gguf_meta.h"
#include "io/gguf_mistral3.h"
#include "io/gguf_phi3.h"
#include "io/hf_fused_projections.h"
#include "model/moe_names.h"

namespace kvp {

namespace {

// OLMo-3's windowed layers from "olmo2" keys: attention.sliding_window_pattern, one bool a layer
// (llama.cpp's converter writes it from layer_types; absent: Olmo3Config's default, all but every
// 4th), which must be all but every P-th layer; the windowed layers rotate unscaled.
void read_olmo3_windows(const GgufMeta& m, const std::string& A, ModelConfig& c, const std::string& name) {
  c.arch = Arch::Olmo3;
  c.sliding_window_period = 4;
  const std::string key = A + "attention.sliding_window_pattern";
  if (const GgufValue* v = m.find(key); v != nullptr) {
    if (v->type != GgufType::Array || v->elem != GgufType::Bool || v->size() != size_t(c.n_layers))
      fail("{}: key '{}' must be an array of one bool per layer ({} layers)", name, key, c.n_layers);
    std::vector<bool> windowed;
    for (size_t l = 0; l < v->size(); ++l) windowed.push_back(v->at(l).u != 0);
    int bad = 0;
    const int period = window_period_of(windowed, &bad);
    if (period < 0)
      fail("{}: windowed layers that are not all but every n-th layer are not supported (key '{}', layer {})", name,
           key, bad);
    if (period == 0)
      c.sliding_window = 0;
    else
      c.sliding_window_period = period;
  }
  if (c.sliding_window > 0 && c.rope_scaling != ModelConfig::RopeScaling::None) c.rope_local_theta = c.rope_theta;
}

// GPT-OSS's ffn_*_exps.bias [experts, rows]: one [rows] view per expert; false if `t` is not one.
bool split_expert_biases(Checkpoint& ck, const ModelConfig& c, const TensorView& t, int layer,
                         const std::string& gguf_name) {
  for (ExpertMatrix x : {ExpertMatrix::Gate, ExpertMatrix::Up, ExpertMatrix::Down}) {
    if (t.name != stacked_expert_biases_name(c, layer, x)) continue;
    const int64_t rows = x == ExpertMatrix::Down ? c.dim : c.moe.expert_hidden_dim;
    if (t.shape != std::vector<int64_t>{c.moe.n_experts, rows} || t.quantized())
      fail("{}: tensor '{}' must hold {} experts' biases of {} values ([{}, {}], unquantised)", ck.path, gguf_name,
           c.moe.n_experts, rows, c.moe.n_experts, rows);
    for (int e = 0; e < c.moe.n_experts; ++e) {
      TensorView b = row_slice(t, e, 1, expert_bias_name(c, layer, e, x));
      b.shape = {rows};
      ck.tensors[b.name] = std::move(b);
    }
    return true;
  }
  return false;
}

}  // namespace

Checkpoint gguf_to_checkpoint(const GgufFile& g, const uint8_t* data, size_t size, const std::string& name) {
  GgufMeta m(g, name);
  const std::string arch = m.get_str("general.architecture", "", true);
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3" && arch != "gemma2" && arch != "gemma3" &&
      arch != "qwen2moe" && arch != "qwen3moe" && arch != "olmo2" && arch != "olmoe" && arch != "phi3" &&
      arch != "smollm3" && arch != "granite" && arch != "qwen2vl" && arch != "qwen3vl" && arch != "gpt-oss" &&
      arch != "exaone4" && arch != "mistral3")
    fail("unsupported architecture '{}' in {} (general.architecture)", arch, name);
  const std::string A = arch + ".";
  // llama.cpp's phi3 (Phi-3, Phi-4): Phi3ForCausalLM, which transformers runs as Mistral's decoder
  // with its window, or Llama's without one (phi3.attention.sliding_window 0: phi-4). llama.cpp
  // itself runs every phi3 file without the window since its PR 13676; kvparity keeps it, as
  // transformers does; its partial rotary factor and longrope: io/gguf_phi3.h.
  const bool phi3 = arch == "phi3";
  const bool gpt_oss = arch == "gpt-oss";  // YaRN and its experts' keys: io/gguf_gpt_oss.h
  const bool mistral3 = arch == "mistral3";  // YaRN and the query temperature: io/gguf_mistral3.h
  const bool own_yarn = gpt_oss || mistral3;

  std::string rope_scaling = m.get_str(A + "rope.scaling.type", "none");
  // llama.cpp's YaRN keys (rope.scaling.attn_factor, yarn_*) feed its own formula, whose attention
  // factor each architecture's loader treats its own way: not read as transformers' attention_factor.
  if (rope_scaling == "yarn" && !own_yarn)
    fail("{}: YaRN RoPE scaling in a GGUF file is not supported (key {}rope.scaling.type); load the model's Hugging "
         "Face checkpoint, whose rope_scaling kvparity reads",
         name, A);
  if (rope_scaling != "none" && rope_scaling != "linear" && !rope_scaling.empty() && !own_yarn)
    fail(
        "{}: rope scaling type '{}' is not supported (key {}rope.scaling.type; linear, or llama3 as the "
        "rope_freqs.weight tensor)",
        name, rope_scaling, A);
  const bool qwen_moe = arch == "qwen2moe" || arch == "qwen3moe" || arch == "olmoe";  // always experts
  if (!qwen_moe && arch != "llama" && !gpt_oss)
    for (const char* k : {"expert_count", "expert_used_count"})
      if (m.get_int(A + k, 0) > 0)
        fail("{}: mixture-of-experts models are not supported for {} (key {}{})", name, arch, A, k);

  ModelConfig c;
  c.source = name;
  c.arch = arch == "qwen2" || arch == "qwen2moe" || arch == "qwen2vl"   ? Arch::Qwen2
           : arch == "qwen3" || arch == "qwen3moe" || arch == "qwen3vl" ? Arch::Qwen3
           : arch == "gemma2" ? Arch::Gemma2
           : arch == "gemma3" ? Arch::Gemma3
           : arch == "olmo2"  ? Arch::Olmo2
           : arch == "olmoe"  ? Arch::Olmoe
                              : Arch::Llama;  // llama, phi3, smollm3, granite
  c.dim = m.get_int(A + "embedding_length");
  c.hidden_dim = m.get_int(A + "feed_forward_length");
  c.n_layers = m.get_int(A + "block_count");
  // Checked here, not only in validate(): the per-layer loops below run before it.
  if (c.n_layers < 1 || c.n_layers > 1024)
    fail("{}: key '{}block_count' = {} is out of range [1, 1024]", name, A, c.n_layers);
  c.n_heads = m.get_int(A + "attention.head_count");
  c.n_kv_heads = m.get_int(A + "attention.head_count_kv", c.n_heads);
  if (c.n_heads <= 0) fail("{}: key '{}attention.head_count' = 0", name, A);
  c.head_dim = m.get_int(A + "attention.key_length", c.dim / c.n_heads);
  if (int vl = m.get_int(A + "attention.value_length", c.head_dim); vl != c.head_dim)
    fail("{}: value_length {} differs from key_length {}, which is not supported (key {}attention.value_length)", name,
         vl, c.head_dim, A);
  if (int rd = m.get_int(A + "rope.dimension_count", c.head_dim); rd != c.head_dim && !phi3)
    fail("{}: partial rotary embeddings ({} of {} dims) are not supported (key {}rope.dimension_count)", name, rd,
         c.head_dim, A);
  c.max_seq_len = m.get_int(A + "context_length");
  if (phi3) read_phi3_gguf_rotary(m, g, data, c, name);
  c.rope_theta = float(m.get_num(A + "rope.freq_base", 10000.0));
  if (rope_scaling == "linear") {
    c.rope_scaling = ModelConfig::RopeScaling::Linear;
    c.rope_factor = float(m.get_num(A + "rope.scaling.factor", 0.0, true));
  }
  c.norm_eps = float(m.get_num(A + "attention.layer_norm_rms_epsilon", 0.0, true));
  c.sliding_window = m.get_int(A + "attention.sliding_window", 0);
  // llama.cpp stores Mistral as "llama"; a window marks it (kvparity's writer records it).
  if (c.arch == Arch::Llama && c.sliding_window > 0) c.arch = Arch::Mistral;
  // llama.cpp's converter writes OLMo-3 (Olmo3ForCausalLM) as "olmo2" with a window and its
  // per-layer pattern; OLMo-2 has no window.
  if (c.arch == Arch::Olmo2 && c.sliding_window > 0) read_olmo3_windows(m, A, c, name);
  if (gpt_oss) read_gpt_oss_gguf_keys(m, A, c, name);
  if (arch == "exaone4") read_exaone4_gguf_keys(m, A, c, name);
  if (mistral3) read_mistral3_gguf_keys(m, A, c, name);
  // Mixtures of experts: llama.cpp's Mixtral ("llama" with experts) and Qwen-MoE renormalise as
  // their graphs do (Mixtral and qwen3moe yes, qwen2moe no) unless expert_weights_norm says.
  if (!gpt_oss && (qwen_moe || m.get_int(A + "expert_count", 0) > 0)) {
    c.moe.n_experts = m.get_int(A + "expert_count");
    if (c.moe.n_experts == 0) fail("{}: key '{}expert_count' = 0 (a mixture of experts with no experts)", name, A);
    c.moe.n_used = m.get_int(A + "expert_used_count");
    c.moe.expert_hidden_dim = m.get_int(A + "expert_feed_forward_length", c.hidden_dim);
    if (arch == "qwen2moe") c.moe.shared_hidden_dim = m.get_int(A + "expert_shared_feed_forward_length");
    // llama.cpp's olmoe graph never renormalises.
    c.moe.norm_topk_prob = m.get_bool(A + "expert_weights_norm", arch != "qwen2moe" && arch != "olmoe");
  }

  // llama.cpp's smollm3: Llama's file (q/k rows permuted into adjacent pairs, as its converter
  // does for LlamaModel) whose every 4th layer skips RoPE: a step its loader fixes at 4, no key.
  if (arch == "smollm3") {
    if (c.sliding_window > 0)
      fail("{}: a sliding window is not supported for SmolLM3 (key {}attention.sliding_window)", name, A);
    for (int l = 3; l < c.n_layers; l += 4) c.nope_layers.push_back(l);
  }

  // llama.cpp's granite: Llama's file (q/k permuted) with Granite's multipliers under its own
  // names, each written only when non-zero; an absent score scale is llama.cpp's 1/sqrt(head_dim).
  if (arch == "granite") {
    if (c.sliding_window > 0)
      fail("{}: a sliding window is not supported for Granite (key {}attention.sliding_window)", name, A);
    c.arch = Arch::Llama;
    auto scale = [&](const char* k, double dflt) {
      const double v = m.get_num(A + k, dflt);
      return float(v == 0.0 ? dflt : v);
    };
    c.embedding_multiplier = scale("embedding_scale", 1.0);
    c.residual_multiplier = scale("residual_scale", 1.0);
    c.logits_scaling = scale("logit_scale", 1.0);
    c.attention_multiplier = float(m.get_num(A + "attention.scale", 0.0));
  }

  // llama.cpp's qwen2vl / qwen3vl: the text models of Qwen2-VL / Qwen2.5-VL and Qwen3-VL, Qwen2's and
  // Qwen3's files whose M-RoPE sections (chunked or interleaved) take one position for text: plain
  // RoPE (hf_text_model.h). The sections must cover the head's frequencies.
  if (arch == "qwen2vl" || arch == "qwen3vl") {
    const GgufValue* sec = m.find(A + "rope.dimension_sections");
    if (sec == nullptr) fail("{}: missing required key '{}rope.dimension_sections'", name, A);
    if (sec->type != GgufType::Array || !(sec->elem == GgufType::I32 || sec->elem == GgufType::U32) || sec->size() != 4)
      fail("{}: key '{}rope.dimension_sections' must be an array of 4 integers", name, A);
    int64_t sum = 0;
    for (size_t i = 0; i < 4; ++i) {
      const GgufValue x = sec->at(i);
      const int64_t v = x.type == GgufType::I32 ? x.i : int64_t(x.u);
      if (v < 0 || v > 4096) fail("{}: key '{}rope.dimension_sections' holds {}", name, A, v);
      sum += v;
    }
    if (sum * 2 != c.head_dim)
      fail("{}: key '{}rope.dimension_sections' covers {} of the head's {} frequencies", name, A, sum, c.head_dim / 2);
  }

  Checkpoint ck;
  ck.path = name;
  ck.format = "gguf";
  ck.qk_layout =
      arch == "llama" || arch == "smollm3" || arch == "granite" || mistral3 ? RopeLayout::Interleaved : RopeLayout::Halves;
  if (arch == "granite") ck.read_from = "GraniteForCausalLM";
  if (mistral3) ck.read_from = "Ministral3ForCausalLM";
  if (arch == "smollm3") ck.read_from = "SmolLM3ForCausalLM";
  if (c.arch == Arch::Gemma2) {
    ck.norm_weights_include_one = true;
    // Softcaps are llama.cpp keys; query_pre_attn_scalar is kvparity's own (llama.cpp derives it
    // from the model size), present only in files kvparity wrote.
    for (auto [key, ex] : {std::pair{"attn_logit_softcapping", "attn_logit_softcapping"},
                           std::pair{"final_logit_softcapping", "final_logit_softcapping"},
                           std::pair{"attention.query_pre_attn_scalar", "query_pre_attn_scalar"}})
      if (m.find(A + key) != nullptr) ck.extras[ex] = m.get_num(A + key, 0.0);
    // Defaults when a key is absent: llama.cpp's (softcaps 50/30; query_pre_attn_scalar = head_dim,
    // which is what Gemma-2 2B and 9B use).
    auto ex = [&](const char* k, double d) {
      auto it = ck.extras.find(k);
      return it == ck.extras.end() ? d : it->second;
    };
    c.query_pre_attn_scalar = float(ex("query_pre_attn_scalar", double(c.head_dim)));
    c.attn_logit_softcapping = float(ex("attn_logit_softcapping", 50.0));
    c.final_logit_softcapping = float(ex("final_logit_softcapping", 30.0));
    c.sliding_window_period = 2;
  }
  if (c.arch == Arch::Gemma3) {
    // llama.cpp's gemma3: norms stored as 1 + w (q/k norms too), the window on all but every 6th
    // layer, local layers at base 10000 unscaled, scores x 1/sqrt(head_dim) but for the 27B
    // (62 layers: 1/sqrt(hidden / heads)), no caps. kvparity's own keys, where present, say
    // otherwise (sliding_window_pattern, freq_base_swa, query_pre_attn_scalar).
    ck.norm_weights_include_one = true;
    c.sliding_window_period = m.get_int(A + "attention.sliding_window_pattern", 6);
    if (c.sliding_window_period < 1)
      fail("{}: key '{}attention.sliding_window_pattern' = {} must be at least 1", name, A, c.sliding_window_period);
    c.rope_local_theta = float(m.get_num(A + "rope.freq_base_swa", 10000.0));
    if (c.sliding_window_period == 1) {  // llama.cpp's rule, il % P < P - 1: no local layer
      c.sliding_window = 0;
      c.rope_local_theta = 0.0f;
    }
    const double qpas = c.n_layers == 62 ? double(c.dim) / c.n_heads : double(c.head_dim);
    c.query_pre_attn_scalar = float(m.get_num(A + "attention.query_pre_attn_scalar", qpas));
    c.final_logit_softcapping = float(m.get_num(A + "final_logit_softcapping", 0.0));
  }

  for (const auto& ti : g.tensors) {
    if (phi3 && is_phi3_rope_factors(ti)) continue;  // read_phi3_gguf_rotary's
    if (ti.name == kRopeFreqsTensor) {
      const uint64_t n = ti.ne.empty() ? 0 : ti.ne[0];
      if (ti.type != uint32_t(GgmlType::F32) || ti.ne.size() != 1 || n != uint64_t(c.head_dim / 2))
        fail("{}: tensor '{}' must be F32 with head_dim/2 = {} entries", name, ti.name, c.head_dim / 2);
      if (c.rope_scaling != ModelConfig::RopeScaling::None)
        fail("{}: both {}rope.scaling.type and tensor '{}' scale RoPE; expected one", name, A, ti.name);
      const uint8_t* p = data + g.data_offset + ti.offset;
      c.rope_freq_factors.resize(size_t(n));
      std::memcpy(c.rope_freq_factors.data(), p, size_t(n) * sizeof(float));
      c.rope_scaling = ModelConfig::RopeScaling::FreqFactors;
      continue;
    }
    std::string hf = gguf_to_hf_name(ti.name, arch);
    if (hf.empty()) fail("{}: tensor '{}' is not part of a {} model as kvparity reads it", name, ti.name, arch);
    long layer = -1;
    std::string rest;
    const bool in_layer = split_layer_name(ti.name, "blk.", &layer, &rest);
    if (in_layer && layer >= c.n_layers)
      fail("{}: tensor '{}' belongs to layer {} but {}block_count is {}", name, ti.name, layer, A, c.n_layers);
    if ((rest.find("_exps.") != std::string::npos || rest.find("ffn_gate_inp") == 0) && !c.is_moe())
      fail("{}: tensor '{}' belongs to a mixture of experts but {}expert_count is not set", name, ti.name, A);
    TensorView t;
    t.name = hf;
    t.dtype = ti.type == uint32_t(GgmlType::F16)    ? DType::F16
              : ti.type == uint32_t(GgmlType::BF16) ? DType::BF16
                                                    : DType::F32;
    t.quant = quant_from_ggml_type(ti.type).value_or(QuantType::None);
    for (auto it = ti.ne.rbegin(); it != ti.ne.rend(); ++it) t.shape.push_back(int64_t(*it));
    t.data = data + g.data_offset + ti.offset;
    if (rest == "attn_q.bias") c.qkv_bias = true;
    if (rest == "ffn_gate_inp_shexp.weight" && t.shape.size() == 1) t.shape = {1, t.shape[0]};  // llama.cpp's [n_embd]
    std::optional<ExpertMatrix> stacked;
    for (ExpertMatrix x : {ExpertMatrix::Gate, ExpertMatrix::Up, ExpertMatrix::Down})
      if (in_layer && c.is_moe() && hf == stacked_experts_name(c, int(layer), x)) stacked = x;
    if (in_layer && gpt_oss && split_expert_biases(ck, c, t, int(layer), ti.name)) continue;
    if (stacked) {
      // All experts' matrices in one [experts, rows, cols] tensor: a view of each expert's.
      if (t.shape.size() != 3 || t.shape[0] != c.moe.n_experts)
        fail("{}: tensor '{}' must hold {} experts' matrices ([{}, rows, cols]), has {} dimensions{}", name, ti.name,
             c.moe.n_experts, c.moe.n_experts, t.shape.size(),
             t.shape.size() == 3 ? fmt::format(" and {} experts", t.shape[0]) : std::string());
      for (int x = 0; x < c.moe.n_experts; ++x) {
        const std::string e = expert_matrix_name(c, int(layer), x, *stacked);
        ck.tensors[e] = row_slice(t, x * t.shape[1], t.shape[1], e);
      }
      continue;
    }
    ck.tensors[hf] = std::move(t);
  }
  // A Qwen-MoE layer without a router has the dense MLP (Qwen's mlp_only_layers); gpt-oss has none.
  if (gpt_oss)
    for (int l = 0; l < c.n_layers; ++l)
      if (!ck.tensors.count(moe_router_name(c, l)))
        fail("{}: missing tensor 'blk.{}.ffn_gate_inp.weight' (every gpt-oss layer routes to experts)", name, l);
  if (c.is_moe())
    for (int l = 0; l < c.n_layers; ++l)
      if (!ck.tensors.count(moe_router_name(c, l))) c.moe.dense_layers.push_back(l);
  c.tied_embeddings = ck.tensors.count("lm_head.weight") == 0;

  // Embedded vocabulary.
  const GgufValue* toks = m.get_array("tokenizer.ggml.tokens", GgufType::String);
  const bool no_vocab = toks == nullptr && m.get_str("tokenizer.ggml.model", "") == "none";
  if (!no_vocab && (m.find("tokenizer.ggml.model") != nullptr || toks != nullptr)) {
    VocabSpec v;
    v.model = m.get_str("tokenizer.ggml.model", "", true);
    if (v.model != "llama" && v.model != "gpt2")
      fail("{}: tokenizer model '{}' is not supported (key tokenizer.ggml.model; llama or gpt2)", name, v.model);
    v.pre = m.get_str("tokenizer.ggml.pre", "");
    if (toks == nullptr) fail("{}: missing required key 'tokenizer.ggml.tokens'", name);
    v.tokens = toks->strings;
    const size_t n = v.tokens.size();
    if (const GgufValue* sc = m.get_array("tokenizer.ggml.scores", GgufType::F32)) {
      if (sc->size() != n) fail("{}: tokenizer.ggml.scores has {} entries for {} tokens", name, sc->size(), n);
      v.scores.resize(n);
      std::memcpy(v.scores.data(), sc->packed.data(), n * sizeof(float));
    }
    if (const GgufValue* tt = m.find("tokenizer.ggml.token_type")) {
      if (tt->type != GgufType::Array || !(tt->elem == GgufType::I32 || tt->elem == GgufType::U32))
        fail("{}: key 'tokenizer.ggml.token_type' must be an array of i32", name);
      if (tt->size() != n) fail("{}: tokenizer.ggml.token_type has {} entries for {} tokens", name, tt->size(), n);
      v.token_types.resize(n);
      std::memcpy(v.token_types.data(), tt->packed.data(), n * sizeof(int32_t));  // u32 types: same bits
    }
    if (const GgufValue* mg = m.get_array("tokenizer.ggml.merges", GgufType::String)) v.merges = mg->strings;
    v.bos_id = m.get_id("tokenizer.ggml.bos_token_id");
    v.eos_id = m.get_id("tokenizer.ggml.eos_token_id");
    v.unk_id = m.get_id("tokenizer.ggml.unknown_token_id");
    v.pad_id = m.get_id("tokenizer.ggml.padding_token_id");
    for (int id : {v.bos_id, v.eos_id, v.unk_id, v.pad_id})
      if (id >= int(n)) fail("{}: special token id {} is outside the {}-token vocabulary", name, id, n);
    // Absent, llama.cpp's defaults: BOS for SentencePiece vocabularies and Llama-3's and Tekken's pre-tokenizers,
    // none for the other byte-level ones (gpt-oss's files, which say nothing, start without one).
    const bool bos_pre = v.pre == "llama-bpe" || v.pre == "llama3" || v.pre == "llama-v3" || v.pre == "falcon3" ||
                         v.pre == "tekken";
    v.add_bos = m.get_bool("tokenizer.ggml.add_bos_token", v.model == "llama" || bos_pre);
    // SentencePiece vocabularies add the dummy space prefix unless told not to; byte-level BPE never does.
    v.add_space_prefix = m.get_bool("tokenizer.ggml.add_space_prefix", v.model == "llama");
    ck.vocab = std::move(v);
  }
  if (const GgufValue* ct = m.find("tokenizer.chat_template")) {
    if (ct->type != GgufType::String) fail("{}: key 'tokenizer.chat_template' must be a string", name);
    ck.chat_template = ct->s;
  }
  c.bos_id = m.get_id("tokenizer.ggml.bos_token_id");
  c.eos_id = m.get_id("tokenizer.ggml.eos_token_id");
  // llama.cpp ends a generation at these too (its end-of-generation set).
  for (const char* k : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (const int id = m.get_id(k); id >= 0 && !c.ends_generation(id)) c.more_eos_ids.push_back(id);
  // gpt-oss's files name one EOS (<|return|>); its generation_config.json, and llama.cpp by the
  // tokens' text, end at the tool call and end of text too.
  if (gpt_oss && ck.vocab)
    for (const char* text : {"<|return|>", "<|call|>", "<|endoftext|>"}) {
      const auto& t = ck.vocab->tokens;
      const auto it = std::find(t.begin(), t.end(), text);
      if (const int id = int(it - t.begin()); it != t.end() && !c.ends_generation(id)) c.more_eos_ids.push_back(id);
    }

  if (auto it = ck.tensors.find("model.embed_tokens.weight"); it != ck.tensors.end() && !it->second.shape.empty())
    c.vocab_size = int(std::min<int64_t>(it->second.shape[0], INT32_MAX));
  else if (ck.vocab)
    c.vocab_size = int(ck.vocab->tokens.size());
  else
    fail("{}: cannot tell the vocabulary size (no token_embd.weight and no tokenizer.ggml.tokens)", name);
  c.validate();
  ck.config = c;
  if (phi3) {
    split_fused_projections(ck);
    ck.read_from = "Phi3ForCausalLM";
  }
  (void)size;
  return ck;
}

Checkpoint load_gguf(const std::string& path) {
  auto mf = MappedFile::open(path);
  GgufFile g = parse_gguf(mf->data(), mf->size(), path);
  Checkpoint ck = gguf_to_checkpoint(g, mf->data(), mf->size(), path);
  ck.keepalive.push_back(mf);
  ck.files = {path};
  return ck;
}

}  // namespace kvp
