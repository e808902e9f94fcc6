#pragma once
// Which chat template a run lays its prompts out in (--chat-template): none, a format by name, or
// "auto", the one the model ships: the template beside an explicit --tokenizer, a GGUF's
// tokenizer.chat_template, or the template beside the model (chat_template.jinja, else
// tokenizer_config.json's chat_template, else a processor's chat_template.json).
#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "model/model.h"
#include "runtime/chat_choice.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kvp {

// A model's own template: its Jinja text and the file (and key) it came from; both empty when the
// model ships none. A tokenizer_config.json that cannot be read is an error naming it.
struct ShippedChatTemplate {
  std::string jinja, source;
};
ShippedChatTemplate shipped_chat_template(const std::string& model_path, const std::string& gguf_template,
                                          const std::string& explicit_tokenizer);

// The choice resolved for one model: nullopt for "none" (or ""); "auto" refuses a model without a
// template, or with one that is none of the formats, naming where it looked. A system message with
// none, or for a format that takes none, is a usage error.
std::optional<ChatTemplate> chat_template_for(const Checkpoint& ckpt, const std::string& explicit_tokenizer,
                                              const ChatChoice& choice);
std::optional<ChatTemplate> chat_template_for(const Model& model, const std::string& explicit_tokenizer,
                                              const ChatChoice& choice);
// For a tokenizer file alone (kvparity tokenize --tokenizer): "auto" reads the tokenizer_config.json
// beside it.
std::optional<ChatTemplate> chat_template_for_tokenizer(const std::string& tokenizer_path, const ChatChoice& choice);

// What a results folder pins for the choice: the resolved template's describe(), "" for none.
std::string chat_template_setting(const std::string& model_path, const std::string& explicit_tokenizer,
                                  const ChatChoice& choice);

// One prompt's ids: a user turn of the template the choice resolves to, or, for none, the text with
// the tokenizer's BOS rule. For the commands that study one prompt without stopping (profile, patch).
std::vector<int> encode_prompt_as(const Model& model, const Tokenizer& tok, const std::string& explicit_tokenizer,
                                  const ChatChoice& choice, const std::string& text);

}  // namespace kvp
