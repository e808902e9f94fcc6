#include "lab/model_inspection.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/error.h"
#include "core/quant.h"
#include "io/checkpoint.h"
#include "io/gguf.h"
#include "model/synthetic.h"
#include "model/weights.h"
#include "runtime/chat_for_model.h"
#include "runtime/kv_cache.h"
#include "runtime/tokenizer_for_model.h"
#include "tokenizer/tokenizer.h"

namespace kvp {
namespace {

using nlohmann::json;

std::string storage_type(const TensorView& t) {
  if (t.quantized()) return std::string(quant_name(t.quant));
  return t.dtype == DType::F32 ? "F32" : t.dtype == DType::F16 ? "F16" : "BF16";
}

json shape_of(const ModelConfig& c) {
  return {{"layers", c.n_layers},   {"hidden", c.dim},     {"heads", c.n_heads},    {"kv_heads", c.n_kv_heads},
          {"head_dim", c.head_dim}, {"mlp", c.hidden_dim}, {"vocab", c.vocab_size}, {"context", c.max_seq_len}};
}

json attention_of(const ModelConfig& c) {
  const float scalar = c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : float(c.head_dim);
  json a = {{"kind", c.n_kv_heads == c.n_heads ? "multi-head"
                     : c.n_kv_heads == 1       ? "multi-query"
                                               : "grouped-query"},
            {"queries_per_kv_head", c.n_heads / std::max(1, c.n_kv_heads)},
            {"score_scale", 1.0 / std::sqrt(double(scalar))},
            {"score_scale_of", c.query_pre_attn_scalar > 0 ? "query_pre_attn_scalar" : "head_dim"},
            {"score_scale_base", scalar},
            {"sliding_window", c.sliding_window},
            {"logit_softcap", c.attn_logit_softcapping},
            {"qkv_bias", c.qkv_bias},
            {"o_bias", c.o_bias},
            {"sinks", c.attention_sinks},
            {"qk_norm", c.qk_norm()},
            {"qk_norm_per_head", c.qk_norm_per_head()}};
  if (c.attention_multiplier > 0) {  // Granite's: scores x this number, no 1/sqrt
    a["score_scale"] = c.attention_multiplier;
    a["score_scale_of"] = "attention_multiplier";
    a["score_scale_base"] = c.attention_multiplier;
  }
  if (c.sliding_window > 0) {
    // "periodic": every layer l with (l + 1) % window_period != 0 (Gemma-3's local layers).
    a["window_layers"] = c.sliding_window_period == 1 ? "every" : c.sliding_window_period == 2 ? "even" : "periodic";
    a["window_period"] = c.sliding_window_period;
  }
  if (c.query_temperature_beta > 0)  // Ministral 3's: queries x (1 + beta ln(1 + floor(pos / context)))
    a["query_temperature"] = {{"beta", c.query_temperature_beta}, {"context", c.query_temperature_context}};
  return a;
}

json rope_of(const Checkpoint& ck) {
  const ModelConfig& c = ck.config;
  using RS = ModelConfig::RopeScaling;
  json r = {{"theta", c.rope_theta}, {"qk_rows", ck.qk_layout == RopeLayout::Interleaved ? "interleaved" : "halves"}};
  if (c.rope_local_theta > 0) r["local_theta"] = c.rope_local_theta;  // the windowed layers', unscaled
  if (!c.nope_layers.empty()) r["nope_layers"] = c.nope_layers;  // SmolLM3's layers without RoPE
  if (c.rotary_dim > 0) r["rotary_dims"] = c.rotary_dim;          // Phi-4-mini's partial rotary factor
  switch (c.rope_scaling) {
    case RS::None:
      r["scaling"] = "none";
      break;
    case RS::Linear:
      r["scaling"] = "linear";
      r["factor"] = c.rope_factor;
      break;
    case RS::Llama3:
      r["scaling"] = "llama3";
      r["factor"] = c.rope_factor;
      r["low_freq_factor"] = c.rope_low_freq_factor;
      r["high_freq_factor"] = c.rope_high_freq_factor;
      r["original_context"] = c.rope_original_max_pos;
      break;
    case RS::FreqFactors:
      r["scaling"] = "frequency factors";
      r["frequency_factors"] = c.rope_freq_factors.size();
      break;
    case RS::Yarn:
      r["scaling"] = "yarn";
      r["factor"] = c.rope_factor;
      r["original_context"] = c.rope_original_max_pos;
      r["attention_factor"] = c.rope_attention_factor;
      r["beta_fast"] = c.rope_yarn_beta_fast;
      r["beta_slow"] = c.rope_yarn_beta_slow;
      r["truncate"] = c.rope_yarn_truncate;
      break;
    case RS::LongRope:
      // Where transformers switches frequencies (a call reaching original_context): cache ON
      // keeps the keys it rotated with the short factors, cache OFF rotates every key again.
      r["scaling"] = "longrope";
      r["factor"] = c.rope_factor;
      r["original_context"] = c.rope_original_max_pos;
      r["attention_factor"] = c.rope_attention_factor;
      r["long_factors_from_position"] = c.rope_original_max_pos;
      break;
  }
  r["rounding"] = c.rope_rounds_once() ? "once in fp32" : "each term in the compute dtype";
  return r;
}

json file_of(const Checkpoint& ck, const WeightsFootprint& f) {
  struct Totals {
    int64_t tensors = 0, parameters = 0;
    size_t bytes = 0;
  };
  std::map<std::string, Totals> types;
  size_t bytes = 0;
  for (const auto& [name, t] : ck.tensors) {
    Totals& e = types[storage_type(t)];
    ++e.tensors;
    e.parameters += t.numel();
    e.bytes += t.nbytes();
    bytes += t.nbytes();
  }
  json list = json::array();
  for (const auto& [type, e] : types)
    list.push_back({{"type", type}, {"tensors", e.tensors}, {"parameters", e.parameters}, {"bytes", e.bytes}});
  // Most bytes first: the type that decides the file's size and a decode step's reads leads.
  std::stable_sort(list.begin(), list.end(),
                   [](const json& a, const json& b) { return a["bytes"].get<size_t>() > b["bytes"].get<size_t>(); });
  const std::set<std::string> used(f.used.begin(), f.used.end());
  json unused = json::array();
  for (const auto& [name, t] : ck.tensors)
    if (!used.count(name)) unused.push_back(name);
  return {{"tensors", ck.tensors.size()}, {"bytes", bytes}, {"types", list}, {"unused", unused}};
}

json tokenizer_of(const Checkpoint& ck, const InspectOptions& o) {
  std::string source = o.tokenizer;
  if (source.empty()) source = ck.vocab ? "embedded" : tokenizer_file_beside(ck.path, ck.format, ck.tokenizer_path);
  if (!o.synth.empty() && o.tokenizer.empty()) source = "the synthetic vocabulary synth writes";
  if (source.empty()) return {{"source", nullptr}};
  // A tokenizer that is there but cannot be read is an error, as it is for a run.
  const auto tok = tokenizer_for_checkpoint(ck, o.tokenizer);
  json t = {{"source", source},
            {"vocab_size", tok->vocab_size()},
            {"bos", tok->bos_id()},
            {"eos", tok->eos_id()},
            {"adds_bos", tok->default_add_bos()}};
  if (tok->bos_id() >= 0) t["bos_piece"] = tok->piece(tok->bos_id());
  if (tok->eos_id() >= 0) t["eos_piece"] = tok->piece(tok->eos_id());
  return t;
}

// The chat template the model ships and how --chat-template auto reads it.
json chat_of(const Checkpoint& ck, const InspectOptions& o) {
  const ShippedChatTemplate shipped = shipped_chat_template(ck.path, ck.chat_template, o.tokenizer);
  if (shipped.jinja.empty()) return {{"source", nullptr}};
  const std::optional<ChatTemplate> t = chat_template_of(shipped.jinja);
  return {{"source", shipped.source}, {"format", t ? json(t->describe()) : json(nullptr)}};
}

json memory_of(const Checkpoint& ck, const InspectOptions& o) {
  const ModelConfig& c = ck.config;
  const int capacity = o.cache_capacity > 0 ? std::min(o.cache_capacity, c.max_seq_len) : c.max_seq_len;
  json rows = json::array();
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    const KvType kv = o.kv ? *o.kv : KvType::of(dt);
    const size_t per_position = 2 * size_t(c.n_layers) * KVCache::position_bytes(c, kv);  // K and V, every layer
    const WeightsFootprint f = weights_footprint(ck, dt);
    rows.push_back({{"dtype", std::string(dtype_name(dt))},
                    {"kv_dtype", kv.name()},
                    {"weights_in_place_bytes", f.in_place_bytes},
                    {"weights_converted_bytes", f.converted_bytes},
                    {"gains_bytes", f.vector_bytes},
                    {"decode_read_bytes", f.decode_bytes},
                    {"kv_bytes_per_position", per_position},
                    {"kv_cache_bytes", per_position * size_t(capacity) * size_t(o.batch_size)}});
  }
  return {{"cache_capacity", capacity}, {"batch_size", o.batch_size}, {"rows", rows}};
}

// 3 significant digits with k/M/B (parameters) or KB/MB/GB (bytes, decimal as the bench's).
std::string scaled(double v, const char* const units[4]) {
  int u = 0;
  while (u < 3 && std::fabs(v) >= 999.5) {
    v /= 1000;
    ++u;
  }
  if (u == 0) return fmt::format("{:.0f}{}", v, units[0]);
  return fmt::format("{:.{}f} {}", v, v >= 99.95 ? 0 : v >= 9.995 ? 1 : 2, units[u]);
}
std::string count_text(double n) {
  static const char* const u[4] = {"", "k", "M", "B"};
  return scaled(n, u);
}
std::string bytes_text(double n) {
  static const char* const u[4] = {" B", "KB", "MB", "GB"};
  return scaled(n, u);
}

std::string number_text(double v) { return fmt::format("{:g}", v); }
std::string id_text(int id) { return id < 0 ? "none" : std::to_string(id); }

}  // namespace

json inspect_model(const InspectOptions& o) {
  if (o.batch_size < 1) fail_usage("--batch-size must be at least 1 (got {})", o.batch_size);
  if (o.cache_capacity < 0) fail_usage("--cache-capacity must be positive (got {})", o.cache_capacity);
  if (o.synth.empty() == o.model.empty())
    fail_usage("inspect: give --model or --synth, not both (a model, or a synth preset's shapes)");
  if (o.synth.empty() && !o.synth_arch.empty()) fail_usage("inspect: --arch names a synth preset's family: give --synth");
  Checkpoint ck;
  if (o.synth.empty()) {
    ck = open_checkpoint(o.model);
  } else {
    ck = synthetic_shapes(synthetic_config(o.synth_arch, o.synth), DType::BF16);
    ck.path = "synth --preset " + o.synth;
    ck.format = "shapes only, bf16, nothing generated";
    ck.vocab = make_synthetic_vocab(ck.config.vocab_size);  // the one synth writes beside the weights
  }
  const ModelConfig& c = ck.config;
  const WeightsFootprint f = weights_footprint(ck, DType::F32);  // validates the config and every tensor
  json d = {{"model", ck.path}, {"format", ck.format}, {"family", family_name(c)}};
  d["text_model_of"] = ck.text_model_of.empty() ? json(nullptr) : json(ck.text_model_of);
  d["read_from"] = ck.read_from.empty() ? json(nullptr) : json(ck.read_from);
  d["shape"] = shape_of(c);
  if (c.is_moe()) {
    std::vector<int> sparse;
    for (int l = 0; l < c.n_layers; ++l)
      if (c.moe_layer(l)) sparse.push_back(l);
    d["experts"] = {{"experts", c.moe.n_experts},
                    {"per_token", c.moe.n_used},
                    {"expert_intermediate_size", c.moe.expert_hidden_dim},
                    {"shared_expert_intermediate_size", c.moe.shared_hidden_dim},
                    {"renormalised", c.moe.norm_topk_prob},
                    {"routing", c.moe.routing == MoeConfig::Routing::TopKThenSoftmax ? "top-k then softmax"
                                                                                      : "softmax then top-k"},
                    {"swiglu_limit", c.moe.swiglu_limit},  // GPT-OSS's clamp; 0 = none
                    {"sparse_layers", sparse}};
  }
  d["attention"] = attention_of(c);
  d["rope"] = rope_of(ck);
  // Where llama.cpp runs this GGUF otherwise than kvparity (which runs it as transformers would).
  if (ck.format == "gguf")
    if (const std::vector<std::string> gaps = gguf_llama_cpp_gaps(c); !gaps.empty()) d["llama_cpp_differs"] = gaps;
  d["norm"] = {{"eps", c.norm_eps},
               {"gain", c.gemma_family() ? "1 + w" : "w"},
               {"gain_in_fp32", c.norm_gain_in_fp32()},
               {"placement", !c.pre_norms() ? "post" : c.post_norms() ? "pre and post" : "pre"}};
  d["head"] = {{"tied", c.tied_embeddings}, {"final_logit_softcap", c.final_logit_softcapping}};
  if (c.granite_multipliers())  // Granite's other three (the score's is under attention)
    d["multipliers"] = {{"embedding", c.embedding_multiplier},
                        {"residual", c.residual_multiplier},
                        {"logits_scaling", c.logits_scaling}};
  d["special_tokens"] = {{"bos", c.bos_id},
                         {"eos", c.eos_id},
                         {"more_eos", c.more_eos_ids},
                         {"bos_ends_generation", c.bos_ends_generation}};
  d["parameters"] = {{"total", f.parameters},
                     {"embedding", f.embedding_parameters},
                     {"layers", f.layer_parameters},
                     {"per_layer", c.n_layers > 0 ? f.layer_parameters / c.n_layers : 0},
                     {"final_norm", f.final_norm_parameters},
                     {"head", f.head_parameters}};
  d["file"] = file_of(ck, f);
  d["tokenizer"] = tokenizer_of(ck, o);
  d["chat_template"] = chat_of(ck, o);
  d["memory"] = memory_of(ck, o);
  return d;
}

std::string inspect_text(const json& d) {
  std::string s;
  auto line = [&](const char* key, const std::string& value) { s += fmt::format("{:<12} {}\n", key, value); };
  const json& sh = d["shape"];
  const json& at = d["attention"];
  const json& rp = d["rope"];
  line("model", fmt::format("{} ({})", d["model"].get<std::string>(), d["format"].get<std::string>()));
  line("family", d["text_model_of"].is_string()
                     ? fmt::format("{}, the text model of {} (run without its vision tower)", d["family"].get<std::string>(),
                                   d["text_model_of"].get<std::string>())
                 : d["read_from"].is_string()
                     ? fmt::format("{}, read from {}{}", d["family"].get<std::string>(),
                                   d["read_from"].get<std::string>(),
                                   d["read_from"] == "Phi3ForCausalLM"      ? " (its fused projections split)"
                                   : d["read_from"] == "SmolLM3ForCausalLM" ? " (its layers without RoPE kept)"
                                   : d["read_from"] == "Ministral3ForCausalLM" ? " (its query temperature kept)"
                                                                            : " (its multipliers kept)")
                     : d["family"].get<std::string>());
  if (d.contains("experts")) {
    const json& e = d["experts"];
    const double limit = e.value("swiglu_limit", 0.0);
    line("experts", fmt::format("{} of {} a token, {} wide{}{}{}{}, {} of {} layers sparse", e["per_token"].get<int>(),
                                e["experts"].get<int>(), e["expert_intermediate_size"].get<int>(),
                                e["renormalised"].get<bool>() ? ", renormalised" : "",
                                e.value("routing", "") == "top-k then softmax" ? ", softmax over the top k" : "",
                                limit > 0 ? fmt::format(", biased, SwiGLU clamped at {}", number_text(limit))
                                          : std::string(),
                                e["shared_expert_intermediate_size"].get<int>() > 0
                                    ? fmt::format(", shared expert {} wide", e["shared_expert_intermediate_size"].get<int>())
                                    : std::string(),
                                e["sparse_layers"].size(), d["shape"]["layers"].get<int>()));
  }
  // A mixture of experts without a dense layer reads its config's MLP width nowhere (Qwen's
  // intermediate_size, beside moe_intermediate_size) unless its experts have that width (Mixtral, OLMoE).
  std::string mlp = std::to_string(sh["mlp"].get<int>());
  if (d.contains("experts") && d["experts"]["sparse_layers"].size() == sh["layers"].get<size_t>() &&
      d["experts"]["expert_intermediate_size"] != sh["mlp"])
    mlp += " (no dense layer reads it)";
  line("shape", fmt::format("{} layers, hidden {}, MLP {}, vocab {}, context {}", sh["layers"].get<int>(),
                            sh["hidden"].get<int>(), mlp, sh["vocab"].get<int>(), sh["context"].get<int>()));
  std::string heads =
      fmt::format("{} heads of {}, {} KV head{} ({}", sh["heads"].get<int>(), sh["head_dim"].get<int>(),
                  sh["kv_heads"].get<int>(), sh["kv_heads"].get<int>() == 1 ? "" : "s", at["kind"].get<std::string>());
  if (at["kind"] == "grouped-query")
    heads += fmt::format(", {} queries a KV head", at["queries_per_kv_head"].get<int>());
  heads += at["score_scale_of"] == "attention_multiplier"
               ? fmt::format("); scores x {:.6g} (attention_multiplier)", at["score_scale"].get<double>())
               : fmt::format("); scores x {:.6g} = 1/sqrt({} {})", at["score_scale"].get<double>(),
                             at["score_scale_of"].get<std::string>(), number_text(at["score_scale_base"].get<double>()));
  const int window = at["sliding_window"].get<int>();
  heads += window > 0
               ? fmt::format("; window {} in {} layers", window,
                             at["window_layers"] == "even"    ? std::string("the even")
                             : at["window_layers"] == "every" ? std::string("all")
                                                              : fmt::format("all but one of every {}", at["window_period"].get<int>()))
               : "; no window";
  const double cap = at["logit_softcap"].get<double>();
  heads += cap > 0 ? fmt::format("; scores soft-capped at {}", number_text(cap)) : "";
  heads += at["qkv_bias"].get<bool>() ? (at.value("o_bias", false) ? "; q/k/v/o biases" : "; q/k/v biases") : "";
  heads += at.value("sinks", false) ? "; a learned sink logit per head" : "";
  if (at.contains("query_temperature"))
    heads += fmt::format("; queries x (1 + {} ln(1 + floor(pos / {}))) (llama_4_scaling_beta)",
                         number_text(at["query_temperature"]["beta"].get<double>()),
                         at["query_temperature"]["context"].get<int>());
  if (at.value("qk_norm", false))
    heads += at.value("qk_norm_per_head", true) ? "; q/k normalised per head" : "; q/k normalised over the whole projection";
  line("attention", heads);
  std::string rope = "theta " + number_text(rp["theta"].get<double>());
  const std::string scaling = rp["scaling"].get<std::string>();
  if (scaling == "none") rope += ", no scaling";
  if (scaling == "linear") rope += ", linear scaling x" + number_text(rp["factor"].get<double>());
  if (scaling == "llama3")
    rope += fmt::format(", llama3 scaling x{} (low {}, high {}, original context {})",
                        number_text(rp["factor"].get<double>()), number_text(rp["low_freq_factor"].get<double>()),
                        number_text(rp["high_freq_factor"].get<double>()), rp["original_context"].get<int>());
  if (scaling == "yarn")
    rope += fmt::format(", yarn scaling x{} (original context {}, cos/sin x {}, beta {} / {}{})",
                        number_text(rp["factor"].get<double>()), rp["original_context"].get<int>(),
                        number_text(rp["attention_factor"].get<double>()), number_text(rp["beta_fast"].get<double>()),
                        number_text(rp["beta_slow"].get<double>()), rp["truncate"].get<bool>() ? "" : ", untruncated");
  if (scaling == "frequency factors")
    rope += fmt::format(", {} per-frequency divisors (GGUF rope_freqs)", rp["frequency_factors"].get<int>());
  if (scaling == "longrope")
    rope += fmt::format(", longrope x{} (cos/sin x {}; short factors, the long ones in a forward call that reaches "
                        "position {}: there cache ON keeps keys rotated the short way, cache OFF rotates all again)",
                        number_text(rp["factor"].get<double>()), number_text(rp["attention_factor"].get<double>()),
                        rp["original_context"].get<int>());
  if (rp.contains("rotary_dims"))
    rope += fmt::format("; {} of each head's {} dimensions rotate, the rest pass through",
                        rp["rotary_dims"].get<int>(), sh["head_dim"].get<int>());
  if (rp.contains("local_theta"))
    rope += fmt::format(" (global layers); windowed layers theta {}, unscaled", number_text(rp["local_theta"].get<double>()));
  if (rp.contains("nope_layers")) {
    std::string ls;
    for (const json& l : rp["nope_layers"]) ls += (ls.empty() ? "" : ", ") + std::to_string(l.get<int>());
    rope += fmt::format("; none in layers {} (NoPE)", ls);
  }
  rope += rp["qk_rows"] == "interleaved" ? "; q/k rows in adjacent pairs (llama.cpp, llama2.c)"
                                         : "; q/k rows in halves (Hugging Face)";
  if (rp.value("rounding", "") == "once in fp32") rope += "; cos/sin and the rotation in fp32, rounded once";
  line("rope", rope);
  line("norm", fmt::format("RMSNorm, eps {}, gain {}{}, {} the blocks", number_text(d["norm"]["eps"].get<double>()),
                           d["norm"]["gain"].get<std::string>(),
                           d["norm"].value("gain_in_fp32", false) ? " (in fp32, one rounding)" : "",
                           d["norm"].value("placement", "pre") == "pre"    ? "before"
                           : d["norm"].value("placement", "pre") == "post" ? "after"
                                                                           : "before and after"));
  const double fcap = d["head"]["final_logit_softcap"].get<double>();
  line("head", std::string(d["head"]["tied"].get<bool>() ? "tied to the embedding" : "its own matrix") +
                   (fcap > 0 ? "; logits soft-capped at " + number_text(fcap) : ""));
  if (d.contains("multipliers")) {
    const json& mu = d["multipliers"];
    line("multipliers", fmt::format("embedding x {}, each block's output x {} before its residual add, logits / {}",
                                    number_text(mu["embedding"].get<double>()), number_text(mu["residual"].get<double>()),
                                    number_text(mu["logits_scaling"].get<double>())));
  }
  const json& sp = d["special_tokens"];
  line("special ids",
       fmt::format("BOS {}, EOS {}{}{}", id_text(sp["bos"].get<int>()), id_text(sp["eos"].get<int>()),
                   sp["more_eos"].empty() ? ""
                                          : fmt::format(" (and {}: generation ends at each)",
                                                        fmt::join(sp["more_eos"].get<std::vector<int>>(), ", ")),
                   sp["bos_ends_generation"].get<bool>() ? "; sampling BOS ends a generation (llama2.c)" : ""));
  const json& p = d["parameters"];
  line("parameters", fmt::format("{}: embedding {}, layers {} ({} each), final norm {}, head {}",
                                 count_text(p["total"].get<double>()), count_text(p["embedding"].get<double>()),
                                 count_text(p["layers"].get<double>()), count_text(p["per_layer"].get<double>()),
                                 count_text(p["final_norm"].get<double>()),
                                 p["head"].get<int64_t>() == 0 ? "tied" : count_text(p["head"].get<double>())));
  const json& fl = d["file"];
  std::string types;
  for (const json& t : fl["types"])
    types += fmt::format("{}{} x{} ({})", types.empty() ? "" : ", ", t["type"].get<std::string>(),
                         t["tensors"].get<int>(), bytes_text(t["bytes"].get<double>()));
  line("tensors",
       fmt::format("{} in the checkpoint, {}: {}", fl["tensors"].get<int>(), bytes_text(fl["bytes"].get<double>()), types));
  if (!fl["unused"].empty()) {
    std::string names;
    for (size_t i = 0; i < fl["unused"].size() && i < 4; ++i)
      names += (i ? ", " : "") + fl["unused"][i].get<std::string>();
    line("", fmt::format("{} not read by the model: {}{}", fl["unused"].size(), names,
                         fl["unused"].size() > 4 ? ", ..." : ""));
  }
  const json& tk = d["tokenizer"];
  if (tk["source"].is_null()) {
    line("tokenizer", "none found beside the model (a run needs --tokenizer)");
  } else {
    std::string t = fmt::format("{}: {} tokens",
                                tk["source"] == "embedded" ? "embedded in the file" : tk["source"].get<std::string>(),
                                tk["vocab_size"].get<int>());
    if (tk.contains("bos_piece")) t += fmt::format(", BOS {} {}", tk["bos"].get<int>(), tk["bos_piece"].dump());
    if (tk.contains("eos_piece")) t += fmt::format(", EOS {} {}", tk["eos"].get<int>(), tk["eos_piece"].dump());
    t += tk["adds_bos"].get<bool>() ? "; prompts start with BOS" : "; prompts start without BOS";
    line("tokenizer", t);
    const int rows = sh["vocab"].get<int>(), n = tk["vocab_size"].get<int>();
    if (n > rows)
      line("", fmt::format("note: {} tokens but {} embedding rows: ids from {} have no row", n, rows, rows));
  }
  const json& ct = d["chat_template"];
  if (ct["source"].is_null())
    line("chat", "no chat template shipped (--chat-template auto refuses; a format by name still works)");
  else if (ct["format"].is_null())
    line("chat", fmt::format("{}: none of the formats kvparity renders (name the closest with --chat-template)",
                             ct["source"].get<std::string>()));
  else
    line("chat", fmt::format("{}, from {} (what --chat-template auto takes)", ct["format"].get<std::string>(),
                             ct["source"].get<std::string>()));
  const json& m = d["memory"];
  if (d.contains("llama_cpp_differs"))
    for (const json& g : d["llama_cpp_differs"]) line("llama.cpp", "runs this file otherwise: " + g.get<std::string>());
  line("memory", fmt::format("static KV cache of {} positions x {} sequence{}", m["cache_capacity"].get<int>(),
                             m["batch_size"].get<int>(), m["batch_size"].get<int>() == 1 ? "" : "s"));
  s += fmt::format("  {:<7} {:<8} {:>16} {:>10} {:>13} {:>14} {:>10}\n", "compute", "KV", "weights in place",
                   "converted", "read a token", "KV a position", "KV cache");
  for (const json& r : m["rows"])
    s += fmt::format(
        "  {:<7} {:<8} {:>16} {:>10} {:>13} {:>14} {:>10}\n", r["dtype"].get<std::string>(),
        r["kv_dtype"].get<std::string>(), bytes_text(r["weights_in_place_bytes"].get<double>()),
        bytes_text(r["weights_converted_bytes"].get<double>()), bytes_text(r["decode_read_bytes"].get<double>()),
        bytes_text(r["kv_bytes_per_position"].get<double>()), bytes_text(r["kv_cache_bytes"].get<double>()));
  s += "  (in place: the file's bytes, memory-mapped; converted: a copy in the compute dtype. A CUDA run\n"
       "   holds a device copy of the matrices, quantised ones and an fp32 run's fp16/bf16 ones widened\n"
       "   to fp32, and its KV cache in device memory)\n";
  return s;
}

}  // namespace kvp
