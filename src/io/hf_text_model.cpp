#include "io/hf_text_model.h"

#include <array>
#include <string_view>

#include "core/error.h"

namespace kvp {

using nlohmann::json;

namespace {

struct Wrapper {
  const char* class_name;
  const char* model_type;
  const char* default_text_type;  // the text config's class when text_config names none
  bool gemma3_only;               // Gemma3Config always builds a Gemma3TextConfig
};

constexpr std::array<Wrapper, 4> kWrappers{{
    {"Gemma3ForConditionalGeneration", "gemma3", "gemma3_text", true},
    {"Mistral3ForConditionalGeneration", "mistral3", "mistral", false},
    {"LlavaForConditionalGeneration", "llava", "llama", false},
    {"LlavaNextForConditionalGeneration", "llava_next", "llama", false},
}};

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
    if (typed && j["model_type"] == w.model_type && j.contains("text_config")) return &w;
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
           "text model of Gemma3ForConditionalGeneration, Mistral3ForConditionalGeneration, "
           "LlavaForConditionalGeneration and LlavaNextForConditionalGeneration only",
           source, wrapper_name(j));
    return std::nullopt;
  }
  json text = j.contains("text_config") && !j["text_config"].is_null() ? j["text_config"] : json::object();
  if (!text.is_object()) fail("{}: field 'text_config' must be a JSON object, got {}", source, text.dump());
  std::string type = w->default_text_type;
  if (text.contains("model_type") && !text["model_type"].is_null()) {
    if (!text["model_type"].is_string())
      fail("{}: field 'text_config.model_type' must be a string, got {}", source, text["model_type"].dump());
    type = text["model_type"].get<std::string>();
  }
  const json defaults = class_defaults(type);
  if (defaults.is_null() || (w->gemma3_only && type != "gemma3_text"))
    fail("{}: the text model '{}' of {} is not supported (config.json field text_config.model_type)", source, type,
         w->class_name);
  for (auto it = defaults.begin(); it != defaults.end(); ++it)
    if (!text.contains(it.key())) text[it.key()] = it.value();
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
