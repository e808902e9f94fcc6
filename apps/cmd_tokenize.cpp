#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/error.h"
#include "runtime/tokenizer_for_model.h"

namespace kvp::cli {
namespace {

std::unique_ptr<Tokenizer> open_tokenizer(const std::string& tokenizer, const std::string& model) {
  if (!tokenizer.empty()) return load_tokenizer(tokenizer);
  if (model.empty()) fail_usage("pass --tokenizer or --model");
  auto m = Model::load(model, DType::F32);
  return tokenizer_for_model(*m, "");
}

}  // namespace

void register_tokenize(CLI::App& app) {
  struct Opts {
    std::string tokenizer, model, text, ids;
    bool bos = false;
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
  tok->add_flag("--bos", o->bos, "prepend BOS");
  tok->callback([o] {
    auto t = open_tokenizer(o->tokenizer, o->model);
    if (o->bos && t->bos_id() < 0) fail_usage("--bos needs a tokenizer with a BOS token; this one has none");
    print_json(nlohmann::json(t->encode(o->text, o->bos)).dump());
  });

  auto* det = app.add_subcommand("detokenize", "print the text of token ids");
  add_source(det);
  det->add_option("--ids", o->ids, "token ids: 1,2,3, \"1 2 3\" or a JSON array [1, 2, 3]")->required();
  det->callback([o] {
    // Parsed before the tokenizer is opened: a malformed list is a usage error, found at once.
    const std::vector<int> ids = parse_token_list(o->ids, "--ids");
    auto t = open_tokenizer(o->tokenizer, o->model);
    for (int id : ids)
      if (id >= t->vocab_size()) fail("--ids: token id {} is outside the vocabulary (size {})", id, t->vocab_size());
    std::cout << t->decode(ids) << std::endl;
  });
}

}  // namespace kvp::cli
