#pragma once
// The text model inside a vision-language checkpoint (Gemma3ForConditionalGeneration,
// Mistral3ForConditionalGeneration, LlavaForConditionalGeneration, LlavaNextForConditionalGeneration,
// Qwen2VLForConditionalGeneration, Qwen2_5_VLForConditionalGeneration,
// Qwen3VLForConditionalGeneration). For a prompt without images each of these classes runs its
// language model unchanged (the token embedding, the decoder, the head; Qwen-VL's M-RoPE, chunked
// or interleaved, is then plain RoPE; Qwen3-VL's deepstack adds visual features at image positions
// only), so kvparity runs that model and leaves the vision tower unread. Other wrappers change the
// text path (PaliGemma's prefix attends both ways) or are not read (Qwen3-VL-MoE's experts) and
// stay refused.
#include <optional>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

namespace kvp {

struct WrappedTextModel {
  std::string wrapper_class;    // e.g. "Gemma3ForConditionalGeneration"
  nlohmann::json text_config;   // text_config, its class's defaults filled in where it omits them
  std::vector<int> top_eos_ids; // the wrapper's own eos_token_id (generation stops there too)
};

// The text model of config.json `j` when it is one of the wrappers above; nullopt when `j` has no
// text_config (a plain causal LM). Any other wrapper, or a text model kvparity does not run, is an
// error naming `source` and the field.
std::optional<WrappedTextModel> unwrap_text_model(const nlohmann::json& j, const std::string& source);

// The config.json keys that belong to a multimodal model's other parts (a plain causal LM's config
// with one is refused; a Qwen-VL's flat config has them beside its text fields).
const std::vector<const char*>& hf_multimodal_keys();

// A wrapper's tensor name as the text model's canonical one: "language_model.model.X" (the layout
// these checkpoints were published in) and "model.language_model.X" (transformers >= 4.52) become
// "model.X", "language_model.lm_head.weight" becomes "lm_head.weight"; any other name (the vision
// tower, the projector) is returned unchanged.
std::string text_model_tensor_name(const std::string& name);

// Whether a canonical name belongs to the text model (embedding, layers, final norm, head).
bool is_text_model_tensor(const std::string& name);

}  // namespace kvp
