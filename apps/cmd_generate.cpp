#include <algorithm>
#include <climits>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/error.h"
#include "core/json_u64.h"
#include "core/sha256.h"
#include "lab/prompt_set.h"
#include "runtime/chat_for_model.h"
#include "runtime/tokenizer_for_model.h"

namespace kvp::cli {

void register_generate(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    SamplerOptions sampler;
    std::vector<std::string> prompts;
    int max_new_tokens = 64;
    int prefill_chunk = 0;
    int batch_size = 0;
    std::string cache = "on";
    std::vector<std::string> stop;
    bool json = false;
    bool ignore_eos = false;
    std::string on_nonfinite = "error";
    ChatChoice chat;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("generate", "generate a continuation with the KV cache on or off");
  o->model.add(cmd);
  o->sampler.add(cmd);
  cmd->add_option("--prompt", o->prompts,
                  "prompt text (empty: BOS only); repeat it to give several prompts, which are then decoded as "
                  "one batch")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  int_at_least(cmd->add_option("--prefill-chunk", o->prefill_chunk,
                               "cache on: prefill at most N prompt tokens per forward pass (0: the whole prompt at "
                               "once)"),
               0);
  int_at_least(cmd->add_option("--batch-size", o->batch_size,
                               "decode B sequences together, one forward pass per step for all of them (each with its "
                               "own KV cache). Sequence i uses prompt i mod (number of --prompt) and draws its random "
                               "numbers with sequence id i, so with several prompts the sequences have different "
                               "lengths and with one prompt and a sampler they still differ. Output: one '[i] text' "
                               "line per sequence, or with --json one object per line with its 'sequence' index. "
                               "With --kernels invariant or portable each sequence is bitwise what it would be alone"),
               1)
      ->default_str("one sequence per --prompt");
  int_at_least(cmd->add_option("--max-new-tokens", o->max_new_tokens, "tokens to generate"), 0);
  one_of(cmd->add_option("--cache", o->cache, "on: prefill + one row per step; off: recompute everything each step"),
         {"on", "off"});
  chat_options(cmd, o->chat);
  cmd->add_option("--stop", o->stop,
                  "stop when the text contains this string (repeatable); text and output_ids end before it");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "keep generating after EOS (and BOS for llama2.c models)");
  one_of(cmd->add_option("--on-nonfinite", o->on_nonfinite, "what to do when NaN/Inf appears"), {"error", "warn"});
  cmd->add_flag("--json", o->json, "print one JSON object with prompt_ids, output_ids, text");
  cmd->callback([o, cmd] {
    o->model.check(cmd);
    o->sampler.check(cmd);
    check_chat(cmd, o->chat);
    for (const auto& s : o->stop)
      if (s.empty()) fail_usage("--stop: an empty string would match before the first token; give non-empty strings");
    refuse_unless(cmd, "--prefill-chunk", o->cache == "on", "--cache on",
                  "with --cache off every step recomputes the whole sequence; there is no prefill");
    const size_t n_prompts = std::max<size_t>(1, o->prompts.size());
    if (o->batch_size > 0 && size_t(o->batch_size) < n_prompts)
      fail_usage(
          "--batch-size {} leaves prompts out: sequence i takes prompt i mod B, so {} --prompt need "
          "--batch-size >= {} (or leave --batch-size out)",
          o->batch_size, n_prompts, n_prompts);
    auto model = Model::load(o->model.model, o->model.compute_dtype());
    auto tok = tokenizer_for_model(*model, o->model.tokenizer);
    const std::optional<ChatEncoder> chat =
        ChatEncoder::of(chat_template_for(*model, o->model.tokenizer, o->chat), *tok, o->model.model);
    std::vector<std::string> texts = o->prompts;
    if (texts.empty()) texts.push_back("");
    const int n_seq = o->batch_size > 0 ? o->batch_size : int(texts.size());
    std::vector<std::vector<int>> prompt_ids;
    for (int i = 0; i < n_seq; ++i) {
      const std::string& text = texts[size_t(i) % texts.size()];
      prompt_ids.push_back(chat ? chat->encode({{"user", text}}) : tok->encode(text, tok->default_add_bos()));
      // Another model's tokenizer gives ids past the embedding: say so before any work.
      require_embedding_rows(prompt_ids.back(), model->config.vocab_size,
                             texts.size() > 1 ? fmt::format("prompt {}", i % int(texts.size())) : "the prompt",
                             o->model.model);
    }
    GenerationConfig g;
    g.max_new_tokens = o->max_new_tokens;
    g.cache = parse_cache_mode(o->cache);
    g.sampler = o->sampler.config();
    g.seed = o->sampler.seed();
    g.stop_strings = o->stop;
    g.stop_at_eos = !o->ignore_eos;
    if (chat) g.turn_end_ids = chat->turn_end_ids();
    g.on_nonfinite = o->on_nonfinite == "warn" ? NonFinitePolicy::Warn : NonFinitePolicy::Error;
    EngineOptions eo = o->model.engine();
    eo.prefill_chunk = o->prefill_chunk;
    Engine engine(model, eo);
    // One sequence keeps the solo loop (and its output format); several go through one batch.
    const bool batched = n_seq > 1;
    std::vector<GenerationResult> results;
    // With --json, each sequence's logits (every step's fp32 values, in order) as a SHA-256 digest:
    // what two machines compare to check that they computed the same bits (--kernels portable).
    std::vector<Sha256> digests(o->json ? size_t(n_seq) : 0);
    auto digest = [&](int b, const StepInfo& s) {
      if (o->json) digests[size_t(b)].update(s.logits, size_t(s.vocab) * sizeof(float));
    };
    if (batched)
      results = engine.generate_batch(prompt_ids, g, tok.get(), digest);
    else
      results.push_back(engine.generate(prompt_ids[0], g, tok.get(), [&](const StepInfo& s) { digest(0, s); }));
    for (const auto& e : engine.activations().nonfinite) std::cerr << "warning: " << e.describe() << "\n";
    for (size_t i = 0; i < results.size(); ++i) {
      const GenerationResult& r = results[i];
      if (r.stop_reason == "context_full")
        std::cerr << "note: " << (batched ? "sequence " + std::to_string(i) + " " : std::string())
                  << "stopped at the end of the context (" << engine.cache().capacity() << " positions)\n";
      if (o->json) {
        // One object per line (JSON Lines) when batched; each names its sequence.
        nlohmann::json j;
        if (batched) {
          j["sequence"] = i;
          j["batch_size"] = n_seq;
        }
        j["prompt_ids"] = r.prompt_ids;
        j["output_ids"] = r.output_ids;
        j["text"] = r.text;
        j["stop_reason"] = r.stop_reason;
        if (r.stop_reason == "stop_string") j["stop_string"] = r.stop_string;
        j["dtype"] = o->model.dtype;
        j["kv_dtype"] = engine.options().kv_dtype.name();
        j["kernels"] = o->model.kernels;
        j["cache"] = o->cache;
        j["sampler"] = g.sampler.describe();
        j["seed"] = json_u64(g.seed);
        if (o->prefill_chunk > 0) j["prefill_chunk"] = o->prefill_chunk;
        j["logits_sha256"] = digests[i].hex();
        print_json(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      } else if (batched) {
        std::cout << "[" << i << "] " << r.text << std::endl;
      } else {
        std::cout << r.text << std::endl;
      }
    }
  });
}

}  // namespace kvp::cli
