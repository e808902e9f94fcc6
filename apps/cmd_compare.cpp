#include <unistd.h>

#include <algorithm>
#include <climits>
#include <iostream>

#include "cli_common.h"
#include "core/error.h"
#include "lab/compare.h"
#include "lab/report.h"

namespace kvp::cli {

void register_compare(CLI::App& app) {
  struct Opts {
    std::string model, tokenizer, prompts = "builtin:stories", prompt, dtypes = "fp16", kv_dtype, kernels = "standard",
                                  control, out, baseline, candidate, shard;
    ChatChoice chat;
    SamplerOptions sampler;
    std::string device = "cpu", simd = "auto";
    int max_new_tokens = 128, threads = 1, batch_size = 1, limit = 0;
    bool stop_at_eos = false, no_report = false;
  };
  auto o = std::make_shared<Opts>();
  o->sampler.seed_text = "1";
  auto* cmd = app.add_subcommand(
      "compare", "two ways of running the model (default: cache OFF vs ON) over prompts: divergence, flips, logit "
                 "metrics, report");
  cmd->add_option("--model", o->model, "checkpoint")->required();
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer (default: the one the model carries or sits beside)");
  auto* prompts = cmd->add_option(
      "--prompts", o->prompts, "prompts: .jsonl ({\"id\",\"prompt\"}), text lines, or builtin:stories|builtin:facts");
  auto* prompt = cmd->add_option("--prompt", o->prompt, "a single prompt");
  prompts->excludes(prompt);
  prompt->excludes(prompts);
  chat_options(cmd, o->chat);
  list_of(cmd->add_option("--dtype", o->dtypes, "compute dtypes, comma-separated, each run"), kDtypeNames);
  one_of(cmd->add_option("--kv-dtype", o->kv_dtype, "KV-cache type of every condition (default: each --dtype)"),
         kKvTypeNames);
  list_of(cmd->add_option("--kernels", o->kernels, "kernel policies, comma-separated, each run"), kPolicyNames);
  o->sampler.add(cmd, /*list=*/true);
  int_at_least(cmd->add_option("--max-new-tokens", o->max_new_tokens, "tokens per generation"), 1);
  int_at_least(
      cmd->add_option("--limit", o->limit,
                      "the first N prompts (0: all); a larger limit (or none) later runs on in the same --out"),
      0);
  threads_option(cmd, o->threads);
  device_option(cmd, o->device);
  simd_option(cmd, o->simd);
  auto* baseline = cmd->add_option(
      "--baseline", o->baseline,
      "SPEC of the baseline side: key=value,... over cache, dtype, kv-dtype, kernels, threads, batch-size, "
      "prefill-chunk, device, simd (keys not given take the other options; default: cache=off)");
  auto* candidate = cmd->add_option("--candidate", o->candidate,
                                    "SPEC of the candidate side, as --baseline (default: cache=on); the baseline is "
                                    "teacher-forced along the candidate's tokens");
  auto* batch = int_at_least(cmd->add_option("--batch-size", o->batch_size,
                                             "B > 1: shorthand for --baseline cache=on --candidate batch-size=B "
                                             "(prompts decoded in fixed groups of B by index, one batch each, against "
                                             "their solo runs)"),
                             1);
  batch->excludes(baseline);
  batch->excludes(candidate);
  one_of(cmd->add_option("--control", o->control,
                         "fp32: rerun every half-precision condition in fp32 and report the ratios"),
         {"fp32"});
  cmd->add_option("--shard", o->shard,
                  "run a slice of the study: in every condition, the prompts (with batches: the groups of prompts) "
                  "whose index mod n == i; `kvparity merge` joins the slices' --out folders")
      ->type_name("i/n");
  cmd->add_flag("--stop-at-eos", o->stop_at_eos, "end generations at EOS, and at BOS for llama2.c models (default: always max-new-tokens)");
  cmd->add_flag("--no-report", o->no_report, "skip writing summary.json / summary.md / report.html");
  cmd->add_option("--out", o->out, "results directory (results.jsonl is resumed if present)")->required();
  cmd->callback([o, cmd] {
    o->sampler.check(cmd);
    check_chat(cmd, o->chat);
    const std::vector<std::string> dtypes = split_list(o->dtypes), kernels = split_list(o->kernels);
    check_threads_policies(cmd, o->threads, kernels);
    require_device(parse_device(o->device));
    require_simd(parse_simd(o->simd));
    CompareOptions c;
    c.model = o->model;
    c.tokenizer = o->tokenizer;
    c.chat = o->chat;
    c.prompts = given(cmd, "--prompt") ? std::vector<Prompt>{Prompt{"prompt-0", o->prompt}} : load_prompts(o->prompts);
    // A group of one is the solo run itself: batching needs two prompts to compare anything.
    const size_t n_prompts = o->limit > 0 ? std::min(c.prompts.size(), size_t(o->limit)) : c.prompts.size();
    refuse_unless(cmd, "--batch-size", o->batch_size == 1 || n_prompts > 1,
                  "at least two prompts (--prompts, and --limit 2 or more)", "a batch of one prompt is its solo run");
    if (o->batch_size > 1) {
      c.baseline = RunSpec::parse("cache=on", "--batch-size");
      c.candidate = RunSpec::parse(fmt::format("batch-size={}", o->batch_size), "--batch-size");
    }
    if (given(cmd, "--baseline")) c.baseline = RunSpec::parse(o->baseline, "--baseline");
    if (given(cmd, "--candidate")) c.candidate = RunSpec::parse(o->candidate, "--candidate");
    for (const auto& d : dtypes)
      for (const auto& k : kernels)
        for (const auto& s : split_list(o->sampler.sampler)) {
          RunDefaults point;
          point.dtype = parse_dtype(d);
          if (!o->kv_dtype.empty()) point.kv_dtype = *parse_kv_type(o->kv_dtype);
          point.kernels = parse_policy(k);
          point.threads = o->threads;
          point.device = parse_device(o->device);
          point.simd = parse_simd(o->simd);
          add_condition(c, point, o->sampler.config(s));
        }
    if (o->control == "fp32")
      refuse_unless(cmd, "--control", add_fp32_controls(c) > 0, "a half-precision --dtype or --kv-dtype",
                    "every condition already runs in fp32, so there is nothing to control");
    c.max_new_tokens = o->max_new_tokens;
    c.seed = o->sampler.seed();
    c.stop_at_eos = o->stop_at_eos;
    c.limit = o->limit;
    if (given(cmd, "--shard")) c.shard = parse_shard(o->shard);
    c.out_dir = clean_dir(o->out);
    c.progress = isatty(STDERR_FILENO);
    run_compare(c);
    if (!o->no_report) {
      write_reports(c.out_dir);
      std::cout << "wrote " << path_in(c.out_dir, "{results.jsonl,summary.json,summary.md,report.html}") << "\n";
    }
  });
}

void register_report(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("report", "write summary.json, summary.md and report.html for a results directory");
  cmd->add_option("dir", *dir, "results directory")->required();
  cmd->callback([dir] {
    write_reports(*dir);
    std::cout << "wrote " << path_in(*dir, "{summary.json,summary.md,report.html}") << "\n";
  });
}

}  // namespace kvp::cli
