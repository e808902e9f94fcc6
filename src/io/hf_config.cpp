#include "io/hf_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <vector>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "io/hf_config_reader.h"
#include "io/hf_exaone4.h"
#include "io/hf_gpt_oss.h"
#include "io/hf_ministral3.h"
#include "io/hf_moe_config.h"
#include "io/hf_phi3.h"
#include "io/hf_rope_parameters.h"
#include "io/hf_rope_scaling.h"
#include "io/hf_llama_variants.h"
#include "io/hf_text_model.h"
#include "io/io_util.h"

namespace kvp {

using nlohmann::json;

namespace {

// transformers' class defaults (v4.44) for fields that save_pretrained() may omit because they
// equal the default: they differ per family, so a missing field must not get Llama's value.
struct FamilyDefaults {
  bool tie;
  int bos, eos;
};
FamilyDefaults family_defaults(Arch a) {
  switch (a) {
    case Arch::Llama: return {false, 1, 2};
    case Arch::Mistral: return {false, 1, 2};
    case Arch::Gemma2: return {true, 2, 1};
    case Arch::Qwen2: return {false, -1, -1};  // Qwen2Config sets no bos/eos; real checkpoints do
    case Arch::Qwen3: return {false, -1, -1};  // Qwen3Config (v4.51) as Qwen2Config
    case Arch::Gemma3: return {true, 2, 1};    // Gemma3TextConfig (v4.51)
    case Arch::Olmo2: return {false, -1, 50279};  // Olmo2Config (v4.51): no BOS, GPT-NeoX's EOS
    case Arch::Olmoe: return {false, -1, 50279};  // OlmoeConfig (v4.51), as Olmo2Config
    case Arch::Olmo3: return {false, -1, 50279};  // Olmo3Config (v4.57), as Olmo2Config
    case Arch::Exaone4: return {false, 0, 2};     // Exaone4Config
    case Arch::GptOss: return {false, -1, -1};    // GptOssConfig sets none; its checkpoints do
  }
  return {false, 1, 2};
}

const char* hf_class_name(Arch a) {
  switch (a) {
    case Arch::Llama: return "LlamaForCausalLM";
    case Arch::Mistral: return "MistralForCausalLM";
    case Arch::Gemma2: return "Gemma2ForCausalLM";
    case Arch::Qwen2: return "Qwen2ForCausalLM";
    case Arch::Qwen3: return "Qwen3ForCausalLM";
    case Arch::Gemma3: return "Gemma3ForCausalLM";
    case Arch::Olmo2: return "Olmo2ForCausalLM";
    case Arch::Olmoe: return "OlmoeForCausalLM";
    case Arch::Olmo3: return "Olmo3ForCausalLM";
    case Arch::Exaone4: return "Exaone4ForCausalLM";
    case Arch::GptOss: return "GptOssForCausalLM";
  }
  return "?";
}

// config.json's model_type: the family's name, but Gemma-3's text model is "gemma3_text" ("gemma3"
// is the multimodal Gemma3ForConditionalGeneration, refused by its vision_config).
std::string hf_model_type(Arch a) { return a == Arch::Gemma3 ? "gemma3_text" : arch_name(a); }

Arch arch_from_json(const json& j, const std::string& source) {
  if (const auto moe = hf_moe_family(j)) return *moe;
  std::string name;
  const char* field = "model_type";
  if (j.contains("model_type") && j["model_type"].is_string()) {
    name = j["model_type"].get<std::string>();
  } else if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
             j["architectures"][0].is_string()) {
    field = "architectures";
    std::string cls = j["architectures"][0].get<std::string>();
    for (Arch a : {Arch::Llama, Arch::Mistral, Arch::Gemma2, Arch::Qwen2, Arch::Qwen3, Arch::Gemma3, Arch::Olmo2,
                   Arch::Olmo3, Arch::Exaone4})
      if (cls == hf_class_name(a)) return a;
    name = cls;
  } else {
    fail("{}: missing field 'model_type' (and no 'architectures' list)", source);
  }
  if (name == "llama") return Arch::Llama;
  if (name == "mistral") return Arch::Mistral;
  if (name == "gemma2") return Arch::Gemma2;
  if (name == "qwen2") return Arch::Qwen2;
  if (name == "qwen3") return Arch::Qwen3;
  if (name == "gemma3_text" || name == "gemma3") return Arch::Gemma3;
  if (name == "olmo2") return Arch::Olmo2;
  if (name == "olmo3") return Arch::Olmo3;
  if (name == "exaone4") return Arch::Exaone4;
  fail("unsupported architecture '{}' in {} ({})", name, source, field);
}

// Rejects configs whose features kvparity does not implement, naming the field, rather than
// silently running a different model.
// `rope_field`: where the file gave the scaling (read_rope_parameters), named in its errors.
void reject_unsupported(const json& j, const ConfigReader& r, Arch arch, const std::string& src,
                        const std::string& rope_field) {
  if (r.has("rope_scaling")) {
    const json& rs = j["rope_scaling"];
    std::string type = "?";
    if (rs.is_object()) {
      for (const char* k : {"rope_type", "type"})
        if (rs.contains(k) && rs[k].is_string()) { type = rs[k].get<std::string>(); break; }
    }
    // "linear", "llama3" and "yarn" are implemented (hf_rope_scaling.h), for the families that take
    // them; everything else is refused.
    const bool known = type == "linear" || type == "llama3" || type == "yarn" || type == "default";
    if (!known || !hf_rope_scaling_supported(arch, type))
      fail("{}: rope_scaling type '{}' is not supported{} (config.json field {})", src, type,
           known ? fmt::format(" for {}", arch_name(arch)) : std::string(), rope_field);
  }
  for (const char* k : hf_multimodal_keys())
    if (r.has(k)) fail("{}: multimodal models are not supported (config.json field {})", src, k);
  for (const char* k : {"num_local_experts", "num_experts", "num_experts_per_tok", "n_routed_experts",
                        "moe_intermediate_size", "shared_expert_intermediate_size"}) {
    if (!r.has(k) || hf_moe_family(j)) continue;
    const json& v = j[k];
    if (v.is_number() && v.get<double>() == 0.0) continue;
    fail("{}: mixture-of-experts models are not supported (config.json field {} = {})", src, k, v.dump());
  }
  if (r.has("quantization_config")) {
    // GPT-OSS's published checkpoints: MXFP4 experts (unpacked by io/hf_gpt_oss_experts.h), the
    // rest in bf16. Any other method would be weights kvparity cannot read.
    const json& q = j["quantization_config"];
    const std::string method = q.is_object() && q.contains("quant_method") && q["quant_method"].is_string()
                                   ? q["quant_method"].get<std::string>()
                                   : std::string("?");
    if (arch != Arch::GptOss || method != "mxfp4")
      fail("{}: quantized checkpoints are not supported{} (config.json field quantization_config, quant_method '{}')",
           src, arch == Arch::GptOss ? " but GPT-OSS's MXFP4 experts" : "", method);
  }
  if (r.has("partial_rotary_factor") && r.get_num("partial_rotary_factor", 1.0) != 1.0)
    fail("{}: partial rotary embeddings are not supported (config.json field partial_rotary_factor)", src);
  if (r.get_bool("mlp_bias", false)) fail("{}: MLP biases are not supported (config.json field mlp_bias)", src);
  // EmbeddingGemma's Gemma-3 attends both ways: not a decoder, no KV cache to compare.
  if (r.get_bool("use_bidirectional_attention", false))
    fail("{}: bidirectional attention is not supported (config.json field use_bidirectional_attention)", src);
  if (arch != Arch::Qwen2 && arch != Arch::GptOss && r.get_bool("attention_bias", false))
    fail("{}: attention biases (incl. o_proj) are not supported (config.json field attention_bias)", src);
  if (arch == Arch::Gemma2 || arch == Arch::Gemma3) {
    // Gemma-2/3 read hidden_activation; older configs only carry hidden_act.
    std::string act = r.get_str("hidden_activation", r.get_str("hidden_act", "gelu_pytorch_tanh"));
    if (act != "gelu_pytorch_tanh")
      fail("{}: activation '{}' is not supported for {} (config.json field hidden_activation)", src, act,
           arch_name(arch));
  } else if (arch != Arch::GptOss) {  // GPT-OSS's experts hard-wire their activation
    std::string act = r.get_str("hidden_act", "silu");
    if (act != "silu") fail("{}: activation '{}' is not supported (config.json field hidden_act)", src, act);
  }
}

// A float field as the shortest decimal that reads back to the same float (1e-05, not
// 9.999999747378752e-06), which is how transformers writes them.
double float_for_json(float f) { return std::stod(fmt::format("{}", f)); }

// Gemma's, OLMo-3's and GPT-OSS's local/global layers from layer_types, where given: the window
// (c.sliding_window, read before) on all but every P-th layer, P read off the first global layer,
// or on none (then true: no layer is local); any other pattern is refused.
bool window_pattern_of_layer_types(const json& j, ModelConfig& c, const std::string& source) {
  const auto kinds = hf_layer_types(j, c.n_layers, source);
  if (!kinds) return false;
  int bad = 0;
  const int period = window_period_of(*kinds, &bad);
  // Windowed layers with no window to give them are a pattern kvparity cannot say either.
  if (period > 0 && c.sliding_window <= 0) bad = int(std::find(kinds->begin(), kinds->end(), true) - kinds->begin());
  if (period < 0 || (period > 0 && c.sliding_window <= 0))
    fail("{}: layer kinds that are not a window on all but every n-th layer are not supported (config.json field "
         "layer_types, layer {})",
         source, bad);
  if (period == 0) {
    c.sliding_window = 0;
    return true;
  }
  c.sliding_window_period = period;
  return false;
}

}  // namespace

ModelConfig parse_hf_config(const std::string& json_text, const std::string& file,
                            std::map<std::string, double>* extras, std::string* text_model_of, std::string* read_from) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    fail("{}: invalid JSON: {}", file, e.what());
  }
  if (!j.is_object()) fail("{}: config.json must hold a JSON object", file);
  // A vision-language checkpoint: its text model's config is read from here on, and errors say so.
  const std::optional<WrappedTextModel> wrapped = unwrap_text_model(j, file);
  if (wrapped) j = wrapped->text_config;
  // Phi-3 and Phi-4 (Phi3ForCausalLM): in transformers Mistral's decoder (Phi3DecoderLayer derives
  // from MistralDecoderLayer, one window over every layer when sliding_window is set, Llama's
  // without) with fused q/k/v and gate/up projections, which the loader splits
  // (hf_fused_projections.h). Read as that family, with Phi-3's own rotary embedding (hf_phi3.h:
  // Phi-4-mini's partial rotary factor, longrope).
  const bool phi3 = (j.contains("model_type") && j["model_type"] == "phi3") ||
                    (!j.contains("model_type") && j.contains("architectures") && j["architectures"].is_array() &&
                     !j["architectures"].empty() && j["architectures"][0] == "Phi3ForCausalLM");
  if (phi3) {
    const bool windowed = j.contains("sliding_window") && !j["sliding_window"].is_null() && j["sliding_window"] != 0;
    j["model_type"] = windowed ? "mistral" : "llama";
    j.erase("architectures");
  }
  // SmolLM3 (NoPE layers) and Granite (multipliers): Llama's decoder (hf_llama_variants.h).
  const bool smollm3 = !phi3 && is_smollm3_config(j);
  const std::vector<int> nope = smollm3 ? read_smollm3_config(j, file + " (SmolLM3ForCausalLM)") : std::vector<int>{};
  const bool granite = !phi3 && !smollm3 && is_granite_config(j);
  const GraniteMultipliers gm = granite ? read_granite_config(j, file + " (GraniteForCausalLM)") : GraniteMultipliers{};
  // Ministral 3: Mistral's decoder with a query temperature (hf_ministral3.h), whose beta sits in
  // the RoPE dict, kept as the file gave it.
  const bool ministral3 = !phi3 && !smollm3 && !granite && is_ministral3_config(j);
  if (ministral3) read_ministral3_config(j);
  const bool v5_rope = j.contains("rope_parameters") && !j["rope_parameters"].is_null();
  const json temperature_rope = !ministral3 ? json() : v5_rope ? j["rope_parameters"] : j.value("rope_scaling", json());
  const std::string source = wrapped ? fmt::format("{} (text_config of {})", file, wrapped->wrapper_class)
                             : phi3  ? fmt::format("{} (Phi3ForCausalLM, read as {})", file,
                                                   j["model_type"].get<std::string>())
                             : smollm3 ? file + " (SmolLM3ForCausalLM)"
                             : granite ? file + " (GraniteForCausalLM)"
                             : ministral3 && !wrapped ? file + " (Ministral3ForCausalLM)"
                                       : file;
  if (text_model_of != nullptr) *text_model_of = wrapped ? wrapped->wrapper_class : std::string();
  if (read_from != nullptr)
    *read_from = phi3 ? "Phi3ForCausalLM" : smollm3 ? "SmolLM3ForCausalLM" : granite ? "GraniteForCausalLM"
                 : ministral3 ? "Ministral3ForCausalLM" : "";
  ConfigReader r(j, source);
  ModelConfig c;
  c.source = file;
  c.arch = arch_from_json(j, source);
  c.nope_layers = nope;
  if (granite) {
    c.embedding_multiplier = gm.embedding;
    c.attention_multiplier = gm.attention;
    c.residual_multiplier = gm.residual;
    c.logits_scaling = gm.logits;
  }
  if (c.arch == Arch::GptOss) fill_gpt_oss_defaults(j);
  const std::string rope_field = read_rope_parameters(j, c.arch == Arch::Gemma3, source);
  const Phi3Rotary phi3_rotary = phi3 ? take_phi3_rotary(j, source) : Phi3Rotary{};
  reject_unsupported(j, r, c.arch, source, rope_field);
  const FamilyDefaults fd = family_defaults(c.arch);

  c.dim = r.get_int("hidden_size");
  c.hidden_dim = r.get_int("intermediate_size");
  c.n_layers = r.get_int("num_hidden_layers");
  c.n_heads = r.get_int("num_attention_heads");
  c.n_kv_heads = r.get_int("num_key_value_heads", c.n_heads);
  if (c.n_heads <= 0) fail("{}: invalid config: num_attention_heads = {}", source, c.n_heads);
  // Gemma2Config's and Qwen3Config's head_dim defaults are their own, not hidden / heads.
  c.head_dim = r.get_int("head_dim", c.arch == Arch::Gemma2 || c.arch == Arch::Gemma3 ? 256
                                     : c.arch == Arch::Qwen3                          ? 128
                                     : c.arch == Arch::GptOss                         ? 64
                                                                                      : c.dim / c.n_heads);
  c.vocab_size = r.get_int("vocab_size");
  c.max_seq_len = r.get_int("max_position_embeddings");
  // The classes' own defaults: Gemma3TextConfig's and MixtralConfig's base is 1e6, the others' 1e4.
  // GptOssConfig's is 150000.
  c.rope_theta = float(r.get_num("rope_theta", c.arch == Arch::Gemma3 || hf_moe_family(j) == Arch::Mistral ? 1e6
                                               : c.arch == Arch::GptOss                                   ? 150000.0
                                                                                                           : 1e4));
  c.norm_eps = float(r.get_num(
      "rms_norm_eps", c.post_norms_only() || c.arch == Arch::Olmoe || c.arch == Arch::GptOss ? 1e-5 : 1e-6));
  c.tied_embeddings = r.get_bool("tie_word_embeddings", fd.tie);
  c.bos_id = r.get_token_id("bos_token_id", fd.bos);
  c.eos_id = r.get_token_id("eos_token_id", fd.eos);
  for (int id : r.get_token_ids("eos_token_id"))
    if (!c.ends_generation(id)) c.more_eos_ids.push_back(id);
  c.qkv_bias = c.arch == Arch::Qwen2;  // hard-wired in Qwen2's modeling code, no config field
  if (r.has("rope_scaling")) {
    const json& rs = j["rope_scaling"];
    std::string type;  // reject_unsupported() checked that one of these is a known string
    for (const char* k : {"rope_type", "type"})
      if (rs.contains(k) && rs[k].is_string()) { type = rs[k].get<std::string>(); break; }
    read_hf_rope_scaling(rs, type, c, source, rope_field);
  }
  if (ministral3)
    read_ministral3_temperature(temperature_rope, c, source, v5_rope ? "rope_parameters" : "rope_scaling");
  if (phi3) apply_phi3_rotary(phi3_rotary, c, source, rope_field);

  switch (c.arch) {
    case Arch::Llama:
      break;
    case Arch::Mistral:
      c.sliding_window = r.get_int("sliding_window", 0);
      break;
    case Arch::Qwen2:
    case Arch::Qwen3:
      if (r.get_bool("use_sliding_window", false)) {
        // transformers windows only layers with index >= max_window_layers; kvparity has one
        // window for all layers, so only the all-or-nothing cases are representable.
        int mwl = r.get_int("max_window_layers", 28);
        if (mwl == 0)
          c.sliding_window = r.get_int("sliding_window");
        else if (mwl < c.n_layers)
          fail("{}: a sliding window on only some layers is not supported (config.json fields use_sliding_window, "
               "max_window_layers = {})",
               source, mwl);
      }
      if (const auto kinds = hf_layer_types(j, c.n_layers, source)) {
        const long n = std::count(kinds->begin(), kinds->end(), true);
        if (n > 0 && n < c.n_layers)
          fail("{}: a sliding window on only some layers is not supported (config.json field layer_types)", source);
        c.sliding_window = n == 0 ? 0 : r.get_int("sliding_window");
      }
      break;
    case Arch::Gemma2:
      // Gemma2 applies the window on even layers only (sliding_window_period); its activation is
      // checked above with the other families'.
      c.sliding_window = r.get_int("sliding_window", 4096);
      c.sliding_window_period = 2;  // Gemma2DecoderLayer: is_sliding = not bool(layer_idx % 2)
      window_pattern_of_layer_types(j, c, source);
      c.query_pre_attn_scalar = float(r.get_num("query_pre_attn_scalar", 224.0));
      // null disables a cap; 0 stands for that.
      c.attn_logit_softcapping = (j.contains("attn_logit_softcapping") && j["attn_logit_softcapping"].is_null())
                                     ? 0.0f
                                     : float(r.get_num("attn_logit_softcapping", 50.0));
      c.final_logit_softcapping = (j.contains("final_logit_softcapping") && j["final_logit_softcapping"].is_null())
                                      ? 0.0f
                                      : float(r.get_num("final_logit_softcapping", 30.0));
      // Kept in Checkpoint::extras too (the writers and older callers read them there).
      if (extras != nullptr) {
        (*extras)["query_pre_attn_scalar"] = r.get_num("query_pre_attn_scalar", 224.0);
        // null disables the cap; 0 stands for that.
        for (auto [k, d] : {std::pair{"attn_logit_softcapping", 50.0}, std::pair{"final_logit_softcapping", 30.0}})
          (*extras)[k] = (j.contains(k) && j[k].is_null()) ? 0.0 : r.get_num(k, d);
      }
      break;
    case Arch::Gemma3:
      // Gemma3TextConfig (v4.51): layer l is local where (l + 1) % sliding_window_pattern != 0
      // (Gemma3DecoderLayer.is_sliding) and rotates with rope_local_base_freq, unscaled; no caps.
      c.sliding_window = r.get_int("sliding_window", 4096);
      // transformers v5 writes the pattern as "_sliding_window_pattern" (beside layer_types).
      c.sliding_window_period = r.get_int("sliding_window_pattern", r.get_int("_sliding_window_pattern", 6));
      if (c.sliding_window_period < 1)
        fail("{}: sliding_window_pattern = {} must be at least 1 (config.json field sliding_window_pattern)", source,
             c.sliding_window_period);
      c.rope_local_theta = float(r.get_num("rope_local_base_freq", 10000.0));
      // No local layer: layer kinds all global, or pattern 1 ((l + 1) % 1 == 0 for every layer).
      if (r.has("layer_types") ? window_pattern_of_layer_types(j, c, source) : c.sliding_window_period == 1) {
        c.sliding_window = 0;
        c.rope_local_theta = 0.0f;
      }
      c.query_pre_attn_scalar = float(r.get_num("query_pre_attn_scalar", 256.0));
      // v4.51's Gemma3Attention never passes attn_logit_softcapping on: the scores are not capped
      // whatever it says (read only for its type). The final cap is applied.
      r.get_num("attn_logit_softcapping", 0.0);
      c.final_logit_softcapping = float(r.get_num("final_logit_softcapping", 0.0));
      break;
    case Arch::Olmo2:
    case Arch::Olmoe:
      // Olmo2Config and OlmoeConfig (v4.51) have no window; OLMoE's experts are read below.
      break;
    case Arch::Olmo3:
      // Olmo3Config (v4.57): sliding_window 4096 on the sliding_attention layers, by default all but
      // every 4th; those rotate unscaled (Olmo3Model's rotary_embs["sliding_attention"] is the
      // default RoPE at rope_theta), the others with rope_scaling.
      c.sliding_window = r.get_int("sliding_window", 4096);
      c.sliding_window_period = 4;
      window_pattern_of_layer_types(j, c, source);
      if (c.sliding_window > 0 && c.rope_scaling != ModelConfig::RopeScaling::None) c.rope_local_theta = c.rope_theta;
      break;
    case Arch::Exaone4:
      read_exaone4_fields(j, c, source);
      break;
    case Arch::GptOss:
      read_gpt_oss_fields(j, c, source);
      window_pattern_of_layer_types(j, c, source);
      break;
  }
  if (hf_moe_family(j)) read_hf_moe_fields(j, c, source);
  if (wrapped)
    for (int id : wrapped->top_eos_ids)
      if (!c.ends_generation(id)) c.more_eos_ids.push_back(id);
  c.validate();
  return c;
}

ModelConfig read_hf_config(const std::string& path, std::map<std::string, double>* extras, std::string* text_model_of,
                           std::string* read_from) {
  ModelConfig c = parse_hf_config(io::read_text_file(path), path, extras, text_model_of, read_from);
  // generation_config.json beside it: the ids transformers' generate stops at.
  const std::filesystem::path gen = std::filesystem::path(path).parent_path() / "generation_config.json";
  std::error_code ec;
  if (std::filesystem::is_regular_file(gen, ec)) {
    const json g = json::parse(io::read_text_file(gen.string()), nullptr, false);
    if (g.is_discarded() || !g.is_object()) fail("{}: not a JSON object", gen.string());
    for (int id : ConfigReader(g, gen.string()).get_token_ids("eos_token_id"))
      if (!c.ends_generation(id)) c.more_eos_ids.push_back(id);
    c.validate();
  }
  return c;
}

void write_hf_config(const std::string& path, const ModelConfig& c, const std::string& torch_dtype,
                     const std::map<std::string, double>& extras) {
  const std::string text = hf_config_text(path, c, torch_dtype, extras);
  AtomicFile f(path);
  f.write_str(text);
  f.commit();
}

std::string hf_config_text(const std::string& path, const ModelConfig& c, const std::string& torch_dtype,
                           const std::map<std::string, double>& extras) {
  if (torch_dtype != "float32" && torch_dtype != "float16" && torch_dtype != "bfloat16")
    fail_usage("{}: torch_dtype '{}' must be float32, float16 or bfloat16", path, torch_dtype);
  if (c.arch == Arch::Qwen2 && c.qkv_bias == false)
    fail("{}: qwen2 always has q/k/v biases; the config says it has none", path);
  if (c.arch != Arch::Qwen2 && c.arch != Arch::GptOss && c.qkv_bias)
    fail("{}: {} has no q/k/v biases in transformers; cannot write a config with them", path, arch_name(c.arch));
  auto tok = [](int id) { return id < 0 ? json(nullptr) : json(id); };
  json j;
  j["architectures"] = json::array({hf_class_name(c.arch)});
  j["model_type"] = hf_model_type(c.arch);
  j["hidden_size"] = c.dim;
  j["intermediate_size"] = c.hidden_dim;
  j["num_hidden_layers"] = c.n_layers;
  j["num_attention_heads"] = c.n_heads;
  j["num_key_value_heads"] = c.n_kv_heads;
  j["head_dim"] = c.head_dim;
  j["vocab_size"] = c.vocab_size;
  j["max_position_embeddings"] = c.max_seq_len;
  j["rope_theta"] = float_for_json(c.rope_theta);
  j["rms_norm_eps"] = float_for_json(c.norm_eps);
  j["tie_word_embeddings"] = c.tied_embeddings;
  j["bos_token_id"] = tok(c.bos_id);
  j["eos_token_id"] = tok(c.eos_id);
  if (!c.more_eos_ids.empty() && c.eos_id >= 0) {
    j["eos_token_id"] = json::array({c.eos_id});
    for (int id : c.more_eos_ids) j["eos_token_id"].push_back(id);
  }
  j["torch_dtype"] = torch_dtype;
  j["attention_dropout"] = 0.0;
  j["initializer_range"] = 0.02;
  j["use_cache"] = true;
  auto window = [&]() { return c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr); };
  switch (c.arch) {
    case Arch::Llama:
      if (c.sliding_window > 0) fail("{}: llama has no sliding window in transformers (use mistral)", path);
      j["hidden_act"] = "silu";
      j["attention_bias"] = false;
      j["mlp_bias"] = false;
      j["pretraining_tp"] = 1;
      break;
    case Arch::Mistral:
      j["hidden_act"] = "silu";
      j["sliding_window"] = window();
      break;
    case Arch::Qwen2:
    case Arch::Qwen3:
      j["hidden_act"] = "silu";
      if (c.arch == Arch::Qwen3) j["attention_bias"] = false;
      j["use_sliding_window"] = c.sliding_window > 0;
      j["sliding_window"] = window();
      // 0 = every layer windowed, matching kvparity's single window.
      j["max_window_layers"] = c.sliding_window > 0 ? 0 : c.n_layers;
      break;
    case Arch::Gemma2: {
      j["hidden_activation"] = "gelu_pytorch_tanh";
      j["hidden_act"] = "gelu_pytorch_tanh";
      j["attention_bias"] = false;
      j["sliding_window"] = c.sliding_window > 0 ? c.sliding_window : 4096;
      j["cache_implementation"] = "hybrid";
      auto extra = [&](const char* k, double d) {
        auto it = extras.find(k);
        return it == extras.end() ? d : it->second;
      };
      // transformers writes it as an int; keep that form when the value is integral.
      double qpas = extra("query_pre_attn_scalar", 224.0);
      j["query_pre_attn_scalar"] = qpas == std::floor(qpas) && std::fabs(qpas) < 1e9 ? json(int64_t(qpas)) : json(qpas);
      for (auto [k, d] : {std::pair{"attn_logit_softcapping", 50.0}, std::pair{"final_logit_softcapping", 30.0}}) {
        double v = extra(k, d);
        j[k] = v == 0.0 ? json(nullptr) : json(v);
      }
      break;
    }
    case Arch::Gemma3: {
      j["hidden_activation"] = "gelu_pytorch_tanh";
      j["attention_bias"] = false;
      // transformers ties a layer's window and its local RoPE (unscaled) to the layer's kind, which
      // two configurations here cannot say.
      const bool windowed = c.sliding_window > 0;
      if (!windowed && c.rope_local_theta > 0)
        fail("{}: gemma3 with local layers but no window has no config.json form", path);
      if (windowed && c.rope_local_theta <= 0 && c.rope_scaling != ModelConfig::RopeScaling::None)
        fail("{}: gemma3 with a window but scaled RoPE on its local layers has no config.json form", path);
      j["sliding_window"] = windowed ? c.sliding_window : 4096;
      j["sliding_window_pattern"] = c.local_layer_pattern();
      j["rope_local_base_freq"] = float_for_json(c.rope_local_theta > 0.0f ? c.rope_local_theta : c.rope_theta);
      const float qpas = c.query_pre_attn_scalar;
      j["query_pre_attn_scalar"] = qpas == std::floor(qpas) ? json(int64_t(qpas)) : json(float_for_json(qpas));
      j["attn_logit_softcapping"] = c.attn_logit_softcapping > 0 ? json(float_for_json(c.attn_logit_softcapping)) : json(nullptr);
      j["final_logit_softcapping"] =
          c.final_logit_softcapping > 0 ? json(float_for_json(c.final_logit_softcapping)) : json(nullptr);
      if (c.rope_scaling == ModelConfig::RopeScaling::Linear)
        j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", float_for_json(c.rope_factor)}};
      else if (c.rope_scaling != ModelConfig::RopeScaling::None)
        fail("{}: gemma3 takes only linear RoPE scaling in transformers", path);
      else
        j["rope_scaling"] = nullptr;
      j["cache_implementation"] = "hybrid";
      break;
    }
    case Arch::Olmo2:
    case Arch::Olmoe:
      if (c.sliding_window > 0) fail("{}: {} has no sliding window in transformers", path, arch_name(c.arch));
      j["hidden_act"] = "silu";
      j["attention_bias"] = false;
      break;
    case Arch::Olmo3: {
      // Its window, the local layers' unscaled RoPE and the layer kinds go together in transformers.
      const bool scaled = c.rope_scaling != ModelConfig::RopeScaling::None;
      if (c.sliding_window > 0 && (scaled ? c.rope_local_theta != c.rope_theta : c.rope_local_theta > 0.0f))
        fail("{}: olmo3 whose windowed layers rotate otherwise than unscaled at rope_theta has no config.json form",
             path);
      j["hidden_act"] = "silu";
      j["attention_bias"] = false;
      j["sliding_window"] = c.sliding_window > 0 ? c.sliding_window : 4096;
      j["layer_types"] = json::array();
      for (int l = 0; l < c.n_layers; ++l)
        j["layer_types"].push_back(c.window_for_layer(l) > 0 ? "sliding_attention" : "full_attention");
      break;
    }
    case Arch::Exaone4:
      j["hidden_act"] = "silu";
      write_exaone4_fields(j, c, path);
      break;
    case Arch::GptOss:
      j["hidden_act"] = "silu";
      write_gpt_oss_fields(j, c, path);
      break;
  }
  if (c.phi3_rope())
    write_phi3_fields(j, c, path);  // the exporter fuses the projections as Phi3ForCausalLM's
  else if (c.arch != Arch::Gemma2 && c.arch != Arch::Gemma3)
    j["rope_scaling"] = hf_rope_scaling_entry(c, path);
  if (c.is_moe()) write_hf_moe_fields(j, c, path);
  if (!c.nope_layers.empty() && c.arch != Arch::Exaone4) write_smollm3_fields(j, c, path);
  if (c.granite_multipliers()) write_granite_fields(j, c, path);
  if (c.query_temperature_beta > 0.0f) write_ministral3_fields(j, c, path);
  return j.dump(2) + "\n";
}

}  // namespace kvp
