#include "io/hf_text_model.h"

#include <array>
#include <string_view>

#include "core/error.h"
#include "io/hf_ministral3.h"

namespace kvp {

using nlohmann::json;

namespace {

struct Wrapper {
  const char* class_name;
  const char* model_type;
  const char* default_text_type;  // the text config's class when text_config names none
  bool gemma3_only;               // Gemma3Config always builds a Gemma3TextConfig
  // Qwen2-VL / Qwen2.5-VL: a Qwen2 text model whose fields sit at the top of config.json (newer
  // saves nest them in text_config too), rotated by M-RoPE: sections of the frequencies take the
  // temporal, height and width positions, which for text are one position, so for a prompt without
  // images it is Qwen2's RoPE exactly. Qwen3-VL: a Qwen3 text model (text_config), its M-RoPE's
  // sections interleaved (frequency i takes position i % 3 of t, h, w within the sections), which
  // for one position is the same plain RoPE (Qwen3VLTextRotaryEmbedding expands text's 2-D
  // position ids to three equal rows).
  bool qwen_vl;
};

constexpr std::array<Wrapper, 7> kWrappers{{
    {"Gemma3ForConditionalGeneration", "gemma3", "gemma3_text", true, false},
    {"Mistral3ForConditionalGeneration", "mistral3", "mistral", false, false},
    {"LlavaForConditionalGeneration", "llava", "llama", false, false},
    {"LlavaNextForConditionalGeneration", "llava_next", "llama", false, false},
    {"Qwen2VLForConditionalGeneration", "qwen2_vl", "qwen2", false, true},
    {"Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl", "qwen2", false, true},
    {"Qwen3VLForConditionalGeneration", "qwen3_vl", "qwen3", false, true},
}};

std::string wrapper_classes() {
  std::string s;
  for (const Wrapper& w : kWrappers) s += (s.empty() ? "" : ", ") + std::string(w.class_name);
  return s;
}

// M-RoPE's sections in a Qwen-VL rope dict (v4: rope_scaling {"type": "mrope", "mrope_section":
// [16, 24, 24]}; later {"rope_type": "default", "mrope_section": ...}; v5 rope_parameters alike):
// checked to cover the head's frequencies, then dropped, leaving the plain RoPE they amount to.
// `interleaved_ok`: Qwen3-VL's layout (for text the same plain RoPE as the chunked one).
void drop_mrope(json& text, const char* key, const std::string& source, bool interleaved_ok) {
  if (!text.contains(key) || !text[key].is_object()) return;
  json& r = text[key];
  if (r.contains("mrope_interleaved")) {
    if (!r["mrope_interleaved"].is_boolean())
      fail("{}: field '{}.mrope_interleaved' must be a bool, got {}", source, key, r["mrope_interleaved"].dump());
    if (r["mrope_interleaved"] == true && !interleaved_ok)
      fail("{}: interleaved M-RoPE is Qwen3-VL's, not this model's (config.json field {}.mrope_interleaved)", source,
           key);
    r.erase("mrope_interleaved");
  }
  if (r.contains("mrope_section")) {
    const json& sec = r["mrope_section"];
    int64_t sum = 0;
    if (!sec.is_array() || sec.size() != 3)
      fail("{}: field '{}.mrope_section' must be a list of 3 integers, got {}", source, key, sec.dump());
    for (const json& x : sec) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > int64_t(1) << 20)
        fail("{}: field '{}.mrope_section' must be a list of integers, got {}", source, key, sec.dump());
      sum += x.get<int64_t>();
    }
    // The fields' own checks come later; only well-formed ones are compared here.
    auto field = [&text](const char* k) {
      return text.contains(k) && text[k].is_number_integer() ? text[k].get<int64_t>() : int64_t(0);
    };
    const int64_t heads = field("num_attention_heads"), hidden = field("hidden_size");
    // Qwen3's head_dim is its own (Qwen3-VL-4B: 128, hidden / heads 80).
    const int64_t head = field("head_dim") > 0 ? field("head_dim") : heads > 0 && hidden % heads == 0 ? hidden / heads : 0;
    if (head > 0 && sum * 2 != head)
      fail("{}: field '{}.mrope_section' = {} covers {} of the head's {} frequencies", source, key, sec.dump(), sum,
           head / 2);
    r.erase("mrope_section");
  }
  for (const char* t : {"type", "rope_type"})
    if (r.contains(t) && r[t] == "mrope") r[t] = "default";
  // Nothing left but the type: no scaling at all.
  bool only_type = true;
  for (auto it = r.begin(); it != r.end(); ++it)
    if (it.key() != "type" && it.key() != "rope_type" && it.key() != "rope_theta") only_type = false;
  if (only_type && std::string(key) == "rope_scaling") text.erase(key);
}

// The published configs' text_config lists only what differs from its class's defaults (Google's
// gemma-3-4b-it holds six fields, llava-1.5's five; their conversion scripts wrote them so): the
// values below, transformers' class defaults (v4.51, unchanged in v5) for every field
// hf_config.cpp reads without a family-independent default, are what the omitted fields mean.
json class_defaults(const std::string& text_type) {
  if (text_type == "llama")
    return {{"vocab_size", 32000}, {"hidden_size", 4096}, {"intermediate_size", 11008}, {"num_hidden_layers", 32},
            {"num_attention_heads", 32}, {"max_position_embeddings", 2048}, {"rms_norm_eps", 1e-6},
            {"rope_theta", 10000.0}, {"tie_word_embeddings", false}, {"bos_token_id", 1}, {"eos_token_id", 2}};
  if (text_type == "mistral")
    return {{"vocab_size", 32000}, {"hidden_size", 4096}, {"intermediate_size", 14336}, {"num_hidden_layers", 32},
            {"num_attention_heads", 32}, {"num_key_value_heads", 8}, {"max_position_embeddings", 131072},
            {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0}, {"sliding_window", 4096},
            {"tie_word_embeddings", false}, {"bos_token_id", 1}, {"eos_token_id", 2}};
  if (text_type == "qwen2" || text_type == "qwen3") {
    json d = {{"vocab_size", 151936}, {"hidden_size", 4096}, {"intermediate_size", 22016}, {"num_hidden_layers", 32},
              {"num_attention_heads", 32}, {"num_key_value_heads", 32}, {"max_position_embeddings", 32768},
              {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0}, {"use_sliding_window", false},
              {"sliding_window", 4096}, {"max_window_layers", 28}, {"tie_word_embeddings", false}};
    if (text_type == "qwen3") d["head_dim"] = 128;
    return d;
  }
  if (text_type == "ministral3") return ministral3_defaults();  // the 2512 series' Mistral3 checkpoints
  if (text_type == "gemma3_text")
    return {{"vocab_size", 262208}, {"hidden_size", 2304}, {"intermediate_size", 9216}, {"num_hidden_layers", 26},
            {"num_attention_heads", 8}, {"num_key_value_heads", 4}, {"head_dim", 256},
            {"max_position_embeddings", 131072}, {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000.0},
            {"rope_local_base_freq", 10000.0}, {"query_pre_attn_scalar", 256}, {"sliding_window", 4096},
            {"sliding_window_pattern", 6}, {"tie_word_embeddings", true}, {"bos_token_id", 2},
            {"eos_token_id", 1}};
  return nullptr;
}

const Wrapper* wrapper_of(const json& j) {
  const bool typed = j.contains("model_type") && j["model_type"].is_string();
  const bool classed = j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
                       j["architectures"][0].is_string();
  for (const Wrapper& w : kWrappers) {
    if (classed && j["architectures"][0] == w.class_name) return &w;
    if (typed && j["model_type"] == w.model_type && (j.contains("text_config") || w.qwen_vl)) return &w;
  }
  return nullptr;
}

std::string wrapper_name(const json& j) {
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    return j["architectures"][0].get<std::string>();
  if (j.contains("model_type") && j["model_type"].is_string()) return j["model_type"].get<std::string>();
  return "?";
}

}  // namespace

std::optional<WrappedTextModel> unwrap_text_model(const json& j, const std::string& source) {
  const Wrapper* w = wrapper_of(j);
  if (w == nullptr) {
    if (j.contains("text_config") && !j["text_config"].is_null())
      fail("{}: the vision-language model '{}' is not supported (config.json field text_config): kvparity runs the "
           "text model of {} only",
           source, wrapper_name(j), wrapper_classes());
    return std::nullopt;
  }
  const bool nested = j.contains("text_config") && !j["text_config"].is_null();
  json text = nested ? j["text_config"] : w->qwen_vl ? j : json::object();
  if (!text.is_object()) fail("{}: field 'text_config' must be a JSON object, got {}", source, text.dump());
  if (!nested) {
    for (const char* k : hf_multimodal_keys()) text.erase(k);
    text.erase("architectures");
  }
  std::string type = w->default_text_type;
  if (text.contains("model_type") && !text["model_type"].is_null()) {
    if (!text["model_type"].is_string())
      fail("{}: field 'text_config.model_type' must be a string, got {}", source, text["model_type"].dump());
    type = text["model_type"].get<std::string>();
  }
  if (w->qwen_vl) {
    // Its own text classes (qwen2_vl_text, qwen2_5_vl_text; qwen3_vl_text) are Qwen2's decoder
    // (Qwen3's); their defaults are not filled in: the published configs give every field.
    const std::string own = std::string(w->model_type) + "_text";
    if (type != own && type != w->model_type && type != w->default_text_type)
      fail("{}: the text model '{}' of {} is not supported (config.json field text_config.model_type)", source, type,
           w->class_name);
    type = w->default_text_type;
    const bool interleaved_ok = type == "qwen3";
    drop_mrope(text, "rope_scaling", source, interleaved_ok);
    drop_mrope(text, "rope_parameters", source, interleaved_ok);
  } else {
    const json defaults = class_defaults(type);
    if (defaults.is_null() || (w->gemma3_only && type != "gemma3_text"))
      fail("{}: the text model '{}' of {} is not supported (config.json field text_config.model_type)", source, type,
           w->class_name);
    for (auto it = defaults.begin(); it != defaults.end(); ++it)
      if (!text.contains(it.key())) text[it.key()] = it.value();
  }
  // The text config decides the class; its own architectures list (the LM it was trained from,
  // e.g. llava-1.5's "LlamaForCausalLM") is only a label.
  text["model_type"] = type;
  text.erase("architectures");
  WrappedTextModel out{w->class_name, std::move(text), {}};
  if (j.contains("eos_token_id") && !j["eos_token_id"].is_null()) {
    const json& e = j["eos_token_id"];
    for (const json& id : e.is_array() ? e : json::array({e})) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > int64_t(1) << 30)
        fail("{}: field 'eos_token_id' must be a token id or a list of them, got {}", source, e.dump());
      out.top_eos_ids.push_back(id.get<int>());
    }
  }
  return out;
}

const std::vector<const char*>& hf_multimodal_keys() {
  static const std::vector<const char*> keys = {"vision_config", "audio_config",      "text_config",
                                                "vision_tower",  "mm_projector_type", "image_token_index"};
  return keys;
}

std::string text_model_tensor_name(const std::string& name) {
  struct Prefix {
    std::string_view from, to;
  };
  static constexpr Prefix kPrefixes[] = {
      {"language_model.model.", "model."},
      {"model.language_model.", "model."},
      {"language_model.lm_head.", "lm_head."},
  };
  for (const Prefix& p : kPrefixes)
    if (name.compare(0, p.from.size(), p.from) == 0) return std::string(p.to) + name.substr(p.from.size());
  return name;
}

bool is_text_model_tensor(const std::string& name) {
  for (std::string_view p : {"model.embed_tokens.", "model.layers.", "model.norm.", "lm_head."})
    if (name.compare(0, p.size(), p) == 0) return true;
  return false;
}

}  // namespace kvp
