#include "runtime/chat_for_model.h"

#include <filesystem>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "io/io_util.h"

namespace kvp {

namespace {

namespace fs = std::filesystem;

// tokenizer_config.json's chat_template: a string, or a list of named templates ("default" is the
// one apply_chat_template takes). "" when the file or the key is absent.
std::string template_in_config(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return "";
  const nlohmann::json j = nlohmann::json::parse(io::read_text_file(file.string()), nullptr, false);
  if (j.is_discarded() || !j.is_object()) fail("{}: not a JSON object", file.string());
  if (!j.contains("chat_template") || j["chat_template"].is_null()) return "";
  const nlohmann::json& t = j["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array())
    for (const auto& e : t)
      if (e.is_object() && e.contains("name") && e["name"] == "default" && e.contains("template") &&
          e["template"].is_string())
        return e["template"].get<std::string>();
  fail("{}: chat_template is neither a string nor a list holding a template named \"default\"", file.string());
}

fs::path dir_of(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  return fs::is_directory(p, ec) ? p : p.parent_path();
}

// The template a directory ships, in the order transformers takes it: chat_template.jinja (what
// save_pretrained writes since v4.5x; it clobbers the config's, as from_pretrained does), then
// tokenizer_config.json's chat_template, then a vision-language processor's chat_template.json.
ShippedChatTemplate template_in_dir(const fs::path& dir) {
  std::error_code ec;
  if (const fs::path j = dir / "chat_template.jinja"; fs::is_regular_file(j, ec)) {
    std::string t = io::read_text_file(j.string());
    if (!t.empty()) return {t, j.string()};
  }
  const fs::path config = dir / "tokenizer_config.json";
  if (std::string t = template_in_config(config); !t.empty()) return {t, config.string() + "'s chat_template"};
  if (const fs::path p = dir / "chat_template.json"; fs::is_regular_file(p, ec)) {
    const nlohmann::json j = nlohmann::json::parse(io::read_text_file(p.string()), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("chat_template") || !j["chat_template"].is_string())
      fail("{}: not a JSON object with a chat_template string", p.string());
    return {j["chat_template"].get<std::string>(), p.string() + "'s chat_template"};
  }
  return {};
}

}  // namespace

ShippedChatTemplate shipped_chat_template(const std::string& model_path, const std::string& gguf_template,
                                          const std::string& explicit_tokenizer) {
  if (!explicit_tokenizer.empty())
    if (ShippedChatTemplate t = template_in_dir(dir_of(explicit_tokenizer)); !t.jinja.empty()) return t;
  if (!gguf_template.empty()) return {gguf_template, model_path + "'s tokenizer.chat_template"};
  return template_in_dir(dir_of(model_path));
}

namespace {

std::optional<ChatTemplate> resolve(const std::string& path, const std::string& format,
                                    const std::string& gguf_template, const std::string& explicit_tokenizer,
                                    const ChatChoice& c) {
  const std::string& choice = c.chat_template;
  const std::string& option = c.option;
  // The run's own additions to a template: its system message, its thinking switch.
  auto with_run = [&](const ChatTemplate& t) {
    return with_thinking_off(with_system(t, c.system, c.system_option), c.no_thinking, c.thinking_option);
  };
  if (choice.empty() || choice == "none") {
    if (!c.system.empty())
      fail_usage("{} needs {} (a system message is a turn of a chat; it has no effect with {})", c.system_option,
                 option, spelled_option(option, "none"));
    if (c.no_thinking)
      fail_usage("{} needs {} (thinking is switched in a chat template; it has no effect with {})", c.thinking_option,
                 option, spelled_option(option, "none"));
    return std::nullopt;
  }
  if (choice != "auto") return with_run(parse_chat_template(choice, option));
  const ShippedChatTemplate shipped = shipped_chat_template(path, gguf_template, explicit_tokenizer);
  if (shipped.jinja.empty())
    fail(
        "{} auto: {} ships no chat template (no chat_template.jinja, nor a tokenizer_config.json with "
        "chat_template, beside it{}); name the "
        "format ({}) or use none",
        option, path, format == "gguf" ? ", no tokenizer.chat_template in the GGUF" : "", chat_format_names());
  std::optional<ChatTemplate> t = chat_template_of(shipped.jinja);
  if (!t)
    fail(
        "{} auto: the chat template of {} is none of the formats kvparity renders ({}); name the closest one or use "
        "none",
        option, shipped.source, chat_format_names());
  static std::mutex mu;
  static std::set<std::string> noted;  // once a source, though a run resolves it more than once
  std::lock_guard<std::mutex> lock(mu);
  if (noted.insert(shipped.source).second)
    std::cerr << fmt::format("note: {} auto: {} is laid out as {}\n", option, shipped.source, t->describe());
  return with_run(*t);
}

}  // namespace

std::optional<ChatTemplate> chat_template_for(const Checkpoint& ckpt, const std::string& explicit_tokenizer,
                                              const ChatChoice& choice) {
  return resolve(ckpt.path, ckpt.format, ckpt.chat_template, explicit_tokenizer, choice);
}

std::optional<ChatTemplate> chat_template_for(const Model& model, const std::string& explicit_tokenizer,
                                              const ChatChoice& choice) {
  return resolve(model.path, model.format, model.chat_template, explicit_tokenizer, choice);
}

std::optional<ChatTemplate> chat_template_for_tokenizer(const std::string& tokenizer_path, const ChatChoice& choice) {
  return resolve(tokenizer_path, "", "", tokenizer_path, choice);
}

std::string chat_template_setting(const std::string& model_path, const std::string& explicit_tokenizer,
                                  const ChatChoice& choice) {
  if (choice.chat_template.empty() || choice.chat_template == "none") return "";
  const std::optional<ChatTemplate> t = chat_template_for(open_checkpoint(model_path), explicit_tokenizer, choice);
  return t ? t->describe() : "";
}

std::vector<int> encode_prompt_as(const Model& model, const Tokenizer& tok, const std::string& explicit_tokenizer,
                                  const ChatChoice& choice, const std::string& text) {
  const std::optional<ChatEncoder> chat =
      ChatEncoder::of(chat_template_for(model, explicit_tokenizer, choice), tok, model.path);
  return chat ? chat->encode({{"user", text}}) : tok.encode(text, tok.default_add_bos());
}

}  // namespace kvp
