#include "tokenizer/chat_template.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace kvp {

namespace {

constexpr const char* kQwen2System = "You are a helpful assistant.";

// Jinja's trim and Python's str.strip() (ASCII whitespace: what the templates' texts hold).
std::string trimmed(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// What each format spells and allows, in ChatFormat's order.
struct FormatFacts {
  ChatFormat format;
  const char* name;
  std::vector<std::string> specials;  // special tokens it spells besides the tokenizer's BOS and EOS
  const char* turn_end;               // the piece that ends an assistant turn; nullptr: EOS does
  bool bos, eos, system;              // spells BOS, spells EOS, takes a system message
};

const std::vector<FormatFacts>& formats() {
  static const std::vector<FormatFacts> f = {
      {ChatFormat::Llama2, "llama2", {}, nullptr, true, true, true},
      {ChatFormat::Llama3,
       "llama3",
       {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
       "<|eot_id|>",
       true,
       false,
       true},
      {ChatFormat::Mistral, "mistral", {}, nullptr, true, true, false},
      {ChatFormat::Gemma, "gemma", {"<start_of_turn>", "<end_of_turn>"}, "<end_of_turn>", true, false, false},
      {ChatFormat::ChatML, "chatml", {"<|im_start|>", "<|im_end|>"}, "<|im_end|>", false, false, true},
  };
  return f;
}

const FormatFacts& facts(ChatFormat f) { return formats()[size_t(f)]; }

// The text of a ChatML template's default system message: the first literal
// "<|im_start|>system\n...<|im_end|>" with nothing computed inside it ("" when there is none).
std::string chatml_default_system(const std::string& jinja) {
  const std::string open = "<|im_start|>system";
  for (size_t at = jinja.find(open); at != std::string::npos; at = jinja.find(open, at + 1)) {
    size_t b = at + open.size();
    if (jinja.compare(b, 1, "\n") == 0)
      b += 1;
    else if (jinja.compare(b, 2, "\\n") == 0)
      b += 2;
    else
      continue;
    const size_t e = jinja.find("<|im_end|>", b);
    if (e == std::string::npos) break;
    const std::string text = jinja.substr(b, e - b);
    if (!text.empty() && text.find_first_of("'\"{}+") == std::string::npos) return text;
  }
  return "";
}

}  // namespace

std::string ChatTemplate::name() const { return facts(format).name; }

std::string ChatTemplate::describe() const {
  if (format != ChatFormat::ChatML || default_system == kQwen2System) return name();
  if (default_system.empty()) return "chatml (no default system message)";
  return fmt::format("chatml (default system message \"{}\")", default_system);
}

ChatTemplate parse_chat_template(const std::string& name, const std::string& option) {
  for (const FormatFacts& f : formats())
    if (name == f.name) return {f.format, f.format == ChatFormat::ChatML ? kQwen2System : ""};
  fail_usage("{} {}: expected none, auto, llama2, llama3, mistral, gemma or chatml", option, name);
}

std::optional<ChatTemplate> chat_template_of(const std::string& jinja) {
  auto has = [&](const char* s) { return jinja.find(s) != std::string::npos; };
  ChatTemplate t;
  if (has("<|start_header_id|>") && has("<|eot_id|>")) {
    t.format = ChatFormat::Llama3;
  } else if (has("<start_of_turn>") && has("<end_of_turn>")) {
    t.format = ChatFormat::Gemma;
  } else if (has("<|im_start|>") && has("<|im_end|>")) {
    t.format = ChatFormat::ChatML;
    t.default_system = chatml_default_system(jinja);
  } else if (has("[INST]") && has("<<SYS>>")) {
    t.format = ChatFormat::Llama2;
  } else if (has("[INST] ") && has(" [/INST]")) {
    // Mistral's later templates ("[/INST]" without the space, [AVAILABLE_TOOLS]) lay turns out
    // differently: they are not this format, and auto refuses them.
    t.format = ChatFormat::Mistral;
  } else {
    return std::nullopt;
  }
  return t;
}

std::string render_chat(const ChatTemplate& t, const std::vector<ChatMessage>& messages, const std::string& bos_piece,
                        const std::string& eos_piece) {
  const ChatFormat f = t.format;
  size_t first = 0;
  std::string system;
  bool has_system = false;
  if (!messages.empty() && messages[0].role == "system") {
    if (!facts(f).system) fail_usage("chat template {}: the format has no system message", t.name());
    system = messages[0].content;
    has_system = true;
    first = 1;
  }
  if (first == messages.size()) fail_usage("chat template {}: the conversation has no user message", t.name());
  for (size_t i = first; i < messages.size(); ++i) {
    const char* want = (i - first) % 2 == 0 ? "user" : "assistant";
    if (messages[i].role != want)
      fail_usage(
          "chat template {}: message {} is '{}' where the conversation needs '{}' (roles alternate user, "
          "assistant, ..., after an optional system message)",
          t.name(), i, messages[i].role, want);
  }
  if (messages.back().role != "user")
    fail_usage("chat template {}: the conversation must end with a user message", t.name());

  std::string out;
  switch (f) {
    case ChatFormat::Llama2:
      for (size_t i = first; i < messages.size(); ++i) {
        std::string content = messages[i].content;
        if (i == first && has_system) content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
        if (messages[i].role == "user")
          out += bos_piece + "[INST] " + trimmed(content) + " [/INST]";
        else
          out += " " + trimmed(content) + " " + eos_piece;
      }
      break;  // the template opens no assistant turn: the text ends at " [/INST]"
    case ChatFormat::Llama3:
      for (size_t i = 0; i < messages.size(); ++i) {
        if (i == 0) out += bos_piece;
        out += "<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n" + trimmed(messages[i].content) +
               "<|eot_id|>";
      }
      out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatFormat::Mistral:
      out += bos_piece;
      for (const ChatMessage& m : messages)
        out += m.role == "user" ? "[INST] " + m.content + " [/INST]" : m.content + eos_piece;
      break;
    case ChatFormat::Gemma:
      out += bos_piece;
      for (const ChatMessage& m : messages)
        out += "<start_of_turn>" + std::string(m.role == "assistant" ? "model" : m.role) + "\n" + trimmed(m.content) +
               "<end_of_turn>\n";
      out += "<start_of_turn>model\n";
      break;
    case ChatFormat::ChatML:
      if (!has_system && !t.default_system.empty()) out += "<|im_start|>system\n" + t.default_system + "<|im_end|>\n";
      for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      out += "<|im_start|>assistant\n";
      break;
  }
  return out;
}

ChatEncoder::ChatEncoder(const ChatTemplate& t, const Tokenizer& tok, const std::string& where) : t_(t), tok_(tok) {
  const ChatFormat f = t.format;
  auto one_token = [&](const std::string& piece, const char* what) {
    const std::vector<int> ids = tok.encode(piece, false);
    if (ids.size() != 1)
      fail(
          "{}: chat template {}: the tokenizer reads {} {} as {} tokens, not one: is it an instruction-tuned "
          "model's? (--chat-template none runs the prompts as they are)",
          where, t.name(), what, nlohmann::json(piece).dump(), ids.size());
    return ids[0];
  };
  auto named = [&](int id, const char* what) {
    if (id < 0) fail("{}: chat template {} needs the tokenizer's {} token, and it has none", where, t.name(), what);
    const std::string piece = tok.piece(id);
    if (one_token(piece, what) != id)
      fail("{}: chat template {}: the tokenizer reads its {} piece {} as another token", where, t.name(), what,
           nlohmann::json(piece).dump());
    return piece;
  };
  const FormatFacts& ff = facts(f);
  if (ff.bos) bos_piece_ = named(tok.bos_id(), "BOS");
  if (ff.eos) eos_piece_ = named(tok.eos_id(), "EOS");
  for (const std::string& piece : ff.specials) one_token(piece, "special token");
  if (ff.turn_end) turn_end_.push_back(one_token(ff.turn_end, "special token"));
}

std::optional<ChatEncoder> ChatEncoder::of(const std::optional<ChatTemplate>& t, const Tokenizer& tok,
                                           const std::string& where) {
  if (!t) return std::nullopt;
  return ChatEncoder(*t, tok, where);
}

std::string ChatEncoder::render(const std::vector<ChatMessage>& messages) const {
  return render_chat(t_, messages, bos_piece_, eos_piece_);
}

std::vector<int> ChatEncoder::encode(const std::vector<ChatMessage>& messages) const {
  return tok_.encode(render(messages), false);
}

}  // namespace kvp
