#include "tokenizer/chat_template.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace kvp {

namespace {

constexpr const char* kQwen2System = "You are a helpful assistant.";
constexpr const char* kLlama31Date = "26 Jul 2024";  // the Llama-3.1 templates' date_string fallback
constexpr const char* kHarmonyDate = "2025-08-05";    // gpt-oss's release: its template has no fallback
// gpt-oss's system message without tools, as its template's build_system_message writes it around the date.
constexpr const char* kHarmonyIdentity =
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: "
    "2024-06\nCurrent date: ";
constexpr const char* kHarmonyChannels =
    "\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every "
    "message.<|end|>";

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
      {ChatFormat::Llama31,
       "llama3.1",
       {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
       "<|eot_id|>",
       true,
       false,
       true},
      {ChatFormat::Mistral, "mistral", {}, nullptr, true, true, false},
      {ChatFormat::Gemma, "gemma", {"<start_of_turn>", "<end_of_turn>"}, "<end_of_turn>", true, false, false},
      {ChatFormat::ChatML, "chatml", {"<|im_start|>", "<|im_end|>"}, "<|im_end|>", false, false, true},
      {ChatFormat::Gemma3, "gemma3", {"<start_of_turn>", "<end_of_turn>"}, "<end_of_turn>", true, false, true},
      {ChatFormat::Harmony,
       "harmony",
       {"<|start|>", "<|message|>", "<|end|>", "<|channel|>"},
       "<|return|>",
       false,
       false,
       true},
      {ChatFormat::Phi3, "phi3", {"<|system|>", "<|user|>", "<|assistant|>", "<|end|>"}, "<|end|>", false, false, true},
      {ChatFormat::Phi4Mini,
       "phi4-mini",
       {"<|system|>", "<|user|>", "<|assistant|>", "<|end|>"},
       "<|end|>",
       false,
       false,
       true},
      {ChatFormat::Phi4, "phi4", {"<|im_start|>", "<|im_sep|>", "<|im_end|>"}, "<|im_end|>", false, false, true},
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

// s as a JSON string literal; bytes that are not UTF-8 (a --system given in Latin-1, a vocabulary
// piece) show as U+FFFD rather than making the message itself fail.
std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The literal a template's `set date_string = "..."` gives ("" when it has none).
std::string fallback_date(const std::string& jinja) {
  const std::string key = "set date_string = \"";
  const size_t b = jinja.find(key);
  if (b == std::string::npos) return "";
  const size_t e = jinja.find('"', b + key.size());
  return e == std::string::npos ? "" : jinja.substr(b + key.size(), e - b - key.size());
}

// The literal a Gemma-3 template puts after the system message: `set first_user_prefix =
// messages[0]['content'] + '...'`, Jinja's escapes \n read; nullopt for a prefix built otherwise.
std::optional<std::string> gemma3_separator(const std::string& jinja) {
  const std::string key = "set first_user_prefix = messages[0]['content'] + '";
  const size_t b = jinja.find(key);
  if (b == std::string::npos) return std::nullopt;
  std::string out;
  for (size_t i = b + key.size(); i < jinja.size(); ++i) {
    if (jinja[i] == '\'') return out;
    if (jinja[i] == '\\' && i + 1 < jinja.size() && jinja[i + 1] == 'n') {
      out += '\n';
      ++i;
    } else if (jinja[i] == '\\') {
      return std::nullopt;  // another escape: not a layout this renders
    } else {
      out += jinja[i];
    }
  }
  return std::nullopt;
}

}  // namespace

std::string ChatTemplate::name() const { return facts(format).name; }

std::string ChatTemplate::describe() const {
  std::vector<std::string> notes;
  if (system_given)
    notes.push_back("system message " + quoted(system));
  else if (format == ChatFormat::ChatML && system.empty())
    notes.push_back("no default system message");
  else if (format == ChatFormat::ChatML && system != kQwen2System)
    notes.push_back("default system message " + quoted(system));
  if (format == ChatFormat::Llama31 && date != kLlama31Date) notes.push_back("dated " + date);
  if (thinking_off) notes.push_back("thinking off");
  if (format == ChatFormat::Gemma3 && system_separator != "\n\n")
    notes.push_back("system message followed by " + quoted(system_separator));
  if (dated_today) notes.push_back(fmt::format("dated {}, not today as the template would", date));
  return notes.empty() ? name() : fmt::format("{} ({})", name(), fmt::join(notes, "; "));
}

std::string chat_format_names() {
  std::vector<std::string_view> names;
  for (const FormatFacts& f : formats()) names.emplace_back(f.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

ChatTemplate parse_chat_template(const std::string& name, const std::string& option) {
  for (const FormatFacts& f : formats()) {
    if (name != f.name) continue;
    ChatTemplate t;
    t.format = f.format;
    if (f.format == ChatFormat::ChatML) t.system = kQwen2System;
    if (f.format == ChatFormat::Llama31) t.date = kLlama31Date;
    if (f.format == ChatFormat::Harmony) {
      t.date = kHarmonyDate;
      t.dated_today = true;
    }
    return t;
  }
  fail_usage("{} {}: expected none, auto or a format ({})", option, name, chat_format_names());
}

ChatTemplate with_system(ChatTemplate t, const std::string& system, const std::string& option) {
  if (system.empty()) return t;
  if (!facts(t.format).system)
    fail_usage("{}: chat template {} has no system message (the family's template refuses one)", option, t.name());
  t.system = system;
  t.system_given = true;
  return t;
}

ChatTemplate with_thinking_off(ChatTemplate t, bool off, const std::string& option) {
  if (!off) return t;
  if (!t.thinking_switch)
    fail_usage(
        "{}: chat template {} has no thinking switch (Qwen3's enable_thinking; --chat-template auto takes a model's "
        "own template)",
        option, t.name());
  t.thinking_off = true;
  return t;
}

std::optional<ChatTemplate> chat_template_of(const std::string& jinja) {
  auto has = [&](const char* s) { return jinja.find(s) != std::string::npos; };
  ChatTemplate t;
  if (has("<|start_header_id|>") && has("<|eot_id|>")) {
    t.format = ChatFormat::Llama3;
    if (has("Cutting Knowledge Date")) {
      // Llama-3.1 and later: the dated system turn. Another knowledge date is another layout.
      if (!has("Cutting Knowledge Date: December 2023\\n") && !has("Cutting Knowledge Date: December 2023\n"))
        return std::nullopt;
      t.format = ChatFormat::Llama31;
      t.date = fallback_date(jinja);
      if (t.date.empty()) t.date = kLlama31Date;
      t.dated_today = has("strftime_now");
    }
  } else if (has("<start_of_turn>") && has("<end_of_turn>")) {
    // Gemma-3's template takes a system message, as a prefix of the first user turn.
    t.format = has("first_user_prefix") ? ChatFormat::Gemma3 : ChatFormat::Gemma;
    if (t.format == ChatFormat::Gemma3) {
      const auto sep = gemma3_separator(jinja);
      if (!sep) return std::nullopt;
      t.system_separator = *sep;
    }
  } else if (has("<|im_start|>") && has("<|im_sep|>") && has("<|im_end|>")) {
    // phi-4's: the role, then <|im_sep|>, no newlines (ChatML's layout would render another prompt).
    // A system message written into the template itself (Phi-4-reasoning's) is another layout.
    const std::string open = "<|im_start|>system<|im_sep|>";
    for (size_t at = jinja.find(open); at != std::string::npos; at = jinja.find(open, at + 1))
      if (jinja.compare(at + open.size(), 3, "' +") != 0) return std::nullopt;
    t.format = ChatFormat::Phi4;
  } else if (has("<|im_start|>") && has("<|im_end|>")) {
    t.format = ChatFormat::ChatML;
    t.system = chatml_default_system(jinja);
    t.thinking_switch = has("enable_thinking is defined and enable_thinking is false") && has("<think>");
  } else if (has("<|start|>") && has("<|channel|>") && has("<|message|>")) {
    // gpt-oss's harmony; its system message in another wording (or with tools) is another layout.
    if (!has("Knowledge cutoff: 2024-06") || !has("# Valid channels: analysis, commentary, final.") ||
        !has("You are ChatGPT, a large language model trained by OpenAI.") || !has("# Instructions"))
      return std::nullopt;
    t.format = ChatFormat::Harmony;
    t.date = kHarmonyDate;
    t.dated_today = has("strftime_now");
  } else if (has("<|assistant|>") && has("<|end|>")) {
    // Phi-4-mini's builds each turn as '<|' + role + '|>' + content, without newlines; Phi-3's spells
    // each role with a newline after it. Templates that prepend BOS or drop a system message (early
    // Phi-3-mini, Phi-3-medium) are other layouts.
    if (has("'<|' + message['role'] + '|>' + message['content'] + '<|end|>'") && !has("bos_token"))
      t.format = ChatFormat::Phi4Mini;
    else if ((has("'<|user|>\\n'") || has("'<|user|>\n'")) && has("<|system|>") && !has("bos_token"))
      t.format = ChatFormat::Phi3;
    else
      return std::nullopt;
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
  std::string system = t.system;
  if (!messages.empty() && messages[0].role == "system") {
    if (!facts(f).system) fail_usage("chat template {}: the format has no system message", t.name());
    system = messages[0].content;
    first = 1;
  }
  const bool has_system = first == 1 || !system.empty();
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
    case ChatFormat::Llama31:
      out += bos_piece;
      if (f == ChatFormat::Llama31)
        out += "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: " +
               t.date + "\n\n" + trimmed(system) + "<|eot_id|>";
      else if (has_system)
        out += "<|start_header_id|>system<|end_header_id|>\n\n" + trimmed(system) + "<|eot_id|>";
      for (size_t i = first; i < messages.size(); ++i)
        out += "<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n" + trimmed(messages[i].content) +
               "<|eot_id|>";
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
    case ChatFormat::Gemma3:
      // The system message's text as it is, then the separator, before the first turn's trimmed text.
      out += bos_piece;
      for (size_t i = first; i < messages.size(); ++i)
        out += "<start_of_turn>" + std::string(messages[i].role == "assistant" ? "model" : messages[i].role) + "\n" +
               (i == first && has_system ? system + t.system_separator : std::string()) + trimmed(messages[i].content) +
               "<end_of_turn>\n";
      out += "<start_of_turn>model\n";
      break;
    case ChatFormat::ChatML:
      if (has_system) out += "<|im_start|>system\n" + system + "<|im_end|>\n";
      for (size_t i = first; i < messages.size(); ++i)
        out += "<|im_start|>" + messages[i].role + "\n" + messages[i].content + "<|im_end|>\n";
      out += "<|im_start|>assistant\n";
      if (t.thinking_off) out += "<think>\n\n</think>\n\n";
      break;
    case ChatFormat::Harmony:
      // Earlier answers as their final channel (the template drops their analysis), nothing trimmed.
      out += kHarmonyIdentity + t.date + kHarmonyChannels;
      if (!system.empty()) out += "<|start|>developer<|message|># Instructions\n\n" + system + "\n\n<|end|>";
      for (size_t i = first; i < messages.size(); ++i)
        out += (messages[i].role == "user" ? "<|start|>user<|message|>" : "<|start|>assistant<|channel|>final<|message|>") +
               messages[i].content + "<|end|>";
      out += "<|start|>assistant";
      break;
    case ChatFormat::Phi3:
    case ChatFormat::Phi4Mini: {
      // Each message as it is, nothing trimmed; Phi-3's role markers end in a newline.
      const std::string nl = f == ChatFormat::Phi3 ? "\n" : "";
      if (has_system) out += "<|system|>" + nl + system + "<|end|>" + nl;
      for (size_t i = first; i < messages.size(); ++i)
        out += "<|" + messages[i].role + "|>" + nl + messages[i].content + "<|end|>" + nl;
      out += "<|assistant|>" + nl;
      break;
    }
    case ChatFormat::Phi4:
      if (has_system) out += "<|im_start|>system<|im_sep|>" + system + "<|im_end|>";
      for (size_t i = first; i < messages.size(); ++i)
        out += "<|im_start|>" + messages[i].role + "<|im_sep|>" + messages[i].content + "<|im_end|>";
      out += "<|im_start|>assistant<|im_sep|>";
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
          where, t.name(), what, quoted(piece), ids.size());
    return ids[0];
  };
  auto named = [&](int id, const char* what) {
    if (id < 0) fail("{}: chat template {} needs the tokenizer's {} token, and it has none", where, t.name(), what);
    const std::string piece = tok.piece(id);
    if (one_token(piece, what) != id)
      fail("{}: chat template {}: the tokenizer reads its {} piece {} as another token", where, t.name(), what,
           quoted(piece));
    return piece;
  };
  const FormatFacts& ff = facts(f);
  if (ff.bos) bos_piece_ = named(tok.bos_id(), "BOS");
  if (ff.eos) eos_piece_ = named(tok.eos_id(), "EOS");
  for (const std::string& piece : ff.specials) one_token(piece, "special token");
  if (ff.turn_end) turn_end_.push_back(one_token(ff.turn_end, "special token"));
  if (t.thinking_off)
    for (const char* piece : {"<think>", "</think>"}) one_token(piece, "thinking tag");
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
