#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/error.h"
#include "runtime/chat_for_model.h"
#include "runtime/tokenizer_for_model.h"

namespace kvp::cli {
namespace {

// The tokenizer of --tokenizer or of --model, and the chat template `chat` resolves to for it.
struct TokenizerSource {
  std::unique_ptr<Tokenizer> tok;
  std::optional<ChatTemplate> chat;
};

TokenizerSource open_tokenizer(const std::string& tokenizer, const std::string& model, const ChatChoice& chat = {}) {
  TokenizerSource s;
  if (!tokenizer.empty()) {
    s.tok = load_tokenizer(tokenizer);
    s.chat = chat_template_for_tokenizer(tokenizer, chat);
    return s;
  }
  if (model.empty()) fail_usage("pass --tokenizer or --model");
  auto m = Model::load(model, DType::F32);
  s.tok = tokenizer_for_model(*m, "");
  s.chat = chat_template_for(*m, "", chat);
  return s;
}

}  // namespace

void register_tokenize(CLI::App& app) {
  struct Opts {
    std::string tokenizer, model, text, ids;
    ChatChoice chat;
    bool bos = false, rendered = false;
  };
  auto o = std::make_shared<Opts>();
  // The tokenizer comes from exactly one place: a file, or the model it belongs to.
  auto add_source = [&](CLI::App* cmd) {
    auto* t = cmd->add_option("--tokenizer", o->tokenizer,
                              "tokenizer.json, SentencePiece tokenizer.model or llama2.c tokenizer.bin");
    auto* m = cmd->add_option("--model", o->model, "take the tokenizer that belongs to this model");
    t->excludes(m);
    m->excludes(t);
  };
  auto* tok = app.add_subcommand("tokenize", "print the token ids of a text as a JSON array");
  add_source(tok);
  tok->add_option("--text", o->text, "text to encode")->required();
  auto* bos = tok->add_flag("--bos", o->bos, "prepend BOS");
  chat_options(tok, o->chat);
  tok->add_flag("--rendered", o->rendered,
                "with --chat-template: print the chat text the ids encode (special tokens spelled out) instead");
  tok->callback([o, tok, bos] {
    check_chat(tok, o->chat);
    const bool chat = o->chat.chat_template != "none";
    refuse_unless(tok, "--rendered", chat, "--chat-template auto or a format", "without one the text is --text");
    if (chat && bos->count() > 0) fail_usage("--bos: a chat template spells BOS itself where its format has one");
    TokenizerSource src = open_tokenizer(o->tokenizer, o->model, o->chat);
    const Tokenizer& t = *src.tok;
    if (o->bos && t.bos_id() < 0) fail_usage("--bos needs a tokenizer with a BOS token; this one has none");
    const std::optional<ChatEncoder> enc = ChatEncoder::of(src.chat, t, o->tokenizer.empty() ? o->model : o->tokenizer);
    if (!enc) return print_json(nlohmann::json(t.encode(o->text, o->bos)).dump());
    if (o->rendered) {
      std::cout << enc->render({{"user", o->text}});
      std::cout.flush();
      return;
    }
    print_json(nlohmann::json(enc->encode({{"user", o->text}})).dump());
  });

  auto* det = app.add_subcommand("detokenize", "print the text of token ids");
  add_source(det);
  det->add_option("--ids", o->ids, "token ids: 1,2,3, \"1 2 3\" or a JSON array [1, 2, 3]")->required();
  det->callback([o] {
    // Parsed before the tokenizer is opened: a malformed list is a usage error, found at once.
    const std::vector<int> ids = parse_token_list(o->ids, "--ids");
    auto t = std::move(open_tokenizer(o->tokenizer, o->model).tok);
    for (int id : ids)
      if (id >= t->vocab_size()) fail("--ids: token id {} is outside the vocabulary (size {})", id, t->vocab_size());
    std::cout << t->decode(ids) << std::endl;
  });
}

}  // namespace kvp::cli
