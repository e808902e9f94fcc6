#pragma once
// Chat formats: how an instruction-tuned model's conversation is laid out as tokens. kvparity
// does not run Jinja; it renders the templates of the families it serves, each exactly as
// transformers' apply_chat_template(messages, add_generation_prompt=True) renders the template
// that family's instruct checkpoints ship, then tokenises the text as that call does (no BOS added
// beyond the template's own; special tokens spelled in the text are single tokens):
//   llama2   Llama-2-chat: <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s>...
//   llama3   Llama-3-Instruct: <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{text}<|eot_id|>...
//   llama3.1 Llama-3.1/3.2/3.3-Instruct: llama3 with a system turn always first, dated:
//            ...system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date:
//            {date}\n\n{system}<|eot_id|>
//   mistral  Mistral-Instruct v0.2: <s>[INST] {user} [/INST]{assistant}</s>... (v0.1's template adds a
//            space after each </s>: the same prompt for one user turn)
//   gemma    Gemma / Gemma-2 -it: <bos><start_of_turn>user\n{text}<end_of_turn>\n<start_of_turn>model\n
//   gemma3   Gemma-3-it: gemma, a system message folded into the first user turn:
//            <bos><start_of_turn>user\n{system}\n\n{text}<end_of_turn>\n<start_of_turn>model\n
//   chatml   Qwen2-Instruct: <|im_start|>{role}\n{text}<|im_end|>\n..., a default system message first;
//            Qwen3's template the same, with an empty think block opening the answer when thinking is off
//   harmony  gpt-oss: <|start|>system<|message|>{identity, knowledge cutoff, date, "Reasoning: medium",
//            the channels}<|end|>, a system message as the developer's "# Instructions\n\n{system}\n\n",
//            <|start|>user<|message|>{text}<|end|>, earlier answers on the final channel,
//            <|start|>assistant; the model answers on its analysis, then final channel and ends at <|return|>
//   phi3     Phi-3-mini/-medium, Phi-3.5-mini -instruct: <|system|>\n{system}<|end|>\n<|user|>\n{text}<|end|>\n
//            ...<|assistant|>\n
//   phi4-mini Phi-4-mini-instruct: <|system|>{system}<|end|><|user|>{text}<|end|>...<|assistant|>
//   phi4     phi-4: <|im_start|>{role}<|im_sep|>{text}<|im_end|>...<|im_start|>assistant<|im_sep|>
// A model's own template (tokenizer_config.json's chat_template, a GGUF's tokenizer.chat_template)
// picks the format by the markers only one of them has (chat_template_of).
#include <optional>
#include <string>
#include <vector>

namespace kvp {

class Tokenizer;

// In the order of the formats' table in chat_template.cpp (its index).
enum class ChatFormat { Llama2, Llama3, Llama31, Mistral, Gemma, ChatML, Gemma3, Harmony, Phi3, Phi4Mini, Phi4 };

struct ChatTemplate {
  ChatFormat format = ChatFormat::ChatML;
  // The system message a conversation that has none starts with: chatml's template default
  // (Qwen2's "You are a helpful assistant."; empty for a template without one), or the one a run
  // gives (--system, with_system). Empty: no system message.
  std::string system;
  bool system_given = false;  // `system` is the run's, not the template's
  // llama3.1 and harmony: the date of its system turn. The templates fall back to "26 Jul 2024";
  // Llama-3.2's and gpt-oss's write today's date where transformers defines strftime_now, which
  // kvparity does not follow, so that a run renders the same prompt every day (dated_today says the
  // template would; harmony's fixed date is gpt-oss's release, 2025-08-05).
  std::string date;
  bool dated_today = false;
  // gemma3 only: what follows the system message before the first user turn's text (the
  // template's literal: "\n\n" in Google's checkpoints, "\n" in some GGUF conversions').
  std::string system_separator = "\n\n";
  // chatml from a template with Qwen3's enable_thinking switch: thinking_off renders what the
  // template gives with enable_thinking=False (an empty <think>\n\n</think>\n\n block after the
  // assistant header); left on, what it gives by default.
  bool thinking_switch = false;
  bool thinking_off = false;
  std::string name() const;      // "chatml", ...
  std::string describe() const;  // the name, and whatever differs from the format's defaults
};

// The option values: "none", "auto" and the formats' names.
inline constexpr const char* kChatTemplateNames[] = {"none",    "auto",   "llama2", "llama3",  "llama3.1", "mistral",
                                                     "gemma",   "chatml", "gemma3", "harmony", "phi3",     "phi4-mini",
                                                     "phi4"};

// The formats' names, comma-separated, for messages: "llama2, llama3, ..., chatml".
std::string chat_format_names();

// A format by name ("llama2", ...); `option` names the option in the error. "none" and "auto" are
// the caller's to handle.
ChatTemplate parse_chat_template(const std::string& name, const std::string& option);

// Which format a model's own Jinja template is written in; nullopt when it is none of them.
std::optional<ChatTemplate> chat_template_of(const std::string& jinja);

// `t` with the run's system message (--system; "" keeps the template's). A format whose template
// refuses a system message (mistral, gemma) is a usage error naming `option`.
ChatTemplate with_system(ChatTemplate t, const std::string& system, const std::string& option);
// t with its thinking switched off (off), as enable_thinking=False; a template without the switch
// refuses, naming `option`.
ChatTemplate with_thinking_off(ChatTemplate t, bool off, const std::string& option);

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// The conversation as text, ending with the assistant's turn opened (the generation prompt).
// Roles must alternate user/assistant (after an optional system message, which mistral and gemma
// refuse, as their templates do); errors name the message. A conversation without a system message
// gets t.system, if any.
std::string render_chat(const ChatTemplate& t, const std::vector<ChatMessage>& messages, const std::string& bos_piece,
                        const std::string& eos_piece);

// A chat format bound to a tokenizer. Refuses, naming `where` and the piece, a tokenizer in which a
// special token the format spells is not one token (a base model's vocabulary, a llama2.c
// tokenizer.bin): the text would be tokenised as ordinary words.
class ChatEncoder {
 public:
  ChatEncoder(const ChatTemplate& t, const Tokenizer& tok, const std::string& where);
  // The encoder of `t`, or none when there is no template (--chat-template none).
  static std::optional<ChatEncoder> of(const std::optional<ChatTemplate>& t, const Tokenizer& tok,
                                       const std::string& where);
  std::vector<int> encode(const std::vector<ChatMessage>& messages) const;
  std::string render(const std::vector<ChatMessage>& messages) const;  // the text encode() tokenises
  // The tokens that end the assistant's turn other than EOS (llama3 <|eot_id|>, gemma
  // <end_of_turn>, chatml <|im_end|>): generation stops at them as at EOS.
  const std::vector<int>& turn_end_ids() const { return turn_end_; }
  const ChatTemplate& chat_template() const { return t_; }

 private:
  ChatTemplate t_;
  const Tokenizer& tok_;
  std::string bos_piece_, eos_piece_;
  std::vector<int> turn_end_;
};

}  // namespace kvp
