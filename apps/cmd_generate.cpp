#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/error.h"
#include "runtime/tokenizer_for_model.h"

namespace kvp::cli {

void register_generate(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    SamplerOptions sampler;
    std::string prompt;
    int max_new_tokens = 64;
    std::string cache = "on";
    std::vector<std::string> stop;
    bool json = false;
    bool ignore_eos = false;
    std::string on_nonfinite = "error";
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("generate", "generate a continuation with the KV cache on or off");
  o->model.add(cmd);
  o->sampler.add(cmd);
  cmd->add_option("--prompt", o->prompt, "prompt text (empty: BOS only)");
  cmd->add_option("--max-new-tokens", o->max_new_tokens, "tokens to generate")->check(CLI::NonNegativeNumber);
  cmd->add_option("--cache", o->cache, "on: prefill + one row per step; off: recompute everything each step")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--stop", o->stop, "stop when the text contains this string (repeatable)");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "keep generating after EOS");
  cmd->add_option("--on-nonfinite", o->on_nonfinite, "error (default) or warn when NaN/Inf appears")
      ->check(CLI::IsMember({"error", "warn"}));
  cmd->add_flag("--json", o->json, "print one JSON object with prompt_ids, output_ids, text");
  cmd->callback([o] {
    auto model = Model::load(o->model.model, o->model.compute_dtype());
    auto tok = tokenizer_for_model(*model, o->model.tokenizer);
    const std::vector<int> prompt_ids = tok->encode(o->prompt, tok->default_add_bos());
    GenerationConfig g;
    g.max_new_tokens = o->max_new_tokens;
    g.cache = parse_cache_mode(o->cache);
    g.sampler = o->sampler.config();
    g.seed = o->sampler.seed;
    g.stop_strings = o->stop;
    g.stop_at_eos = !o->ignore_eos;
    g.on_nonfinite = o->on_nonfinite == "warn" ? NonFinitePolicy::Warn : NonFinitePolicy::Error;
    Engine engine(model, o->model.engine());
    GenerationResult r = engine.generate(prompt_ids, g, tok.get());
    for (const auto& e : engine.activations().nonfinite) std::cerr << "warning: " << e.describe() << "\n";
    if (r.stop_reason == "context_full")
      std::cerr << "note: stopped at the end of the context (" << engine.cache().capacity() << " positions)\n";
    if (o->json) {
      nlohmann::json j;
      j["prompt_ids"] = r.prompt_ids;
      j["output_ids"] = r.output_ids;
      j["text"] = r.text;
      j["stop_reason"] = r.stop_reason;
      j["dtype"] = o->model.dtype;
      j["kv_dtype"] = std::string(dtype_name(engine.options().kv_dtype));
      j["kernels"] = o->model.kernels;
      j["cache"] = o->cache;
      j["sampler"] = g.sampler.describe();
      j["seed"] = g.seed;
      print_json(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    } else {
      std::cout << r.text << std::endl;
    }
  });
}

}  // namespace kvp::cli
