#include <unistd.h>

#include <iostream>

#include "cli_common.h"
#include "core/error.h"
#include "lab/compare.h"
#include "lab/report.h"

namespace kvp::cli {
namespace {

std::vector<std::string> split_csv(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

}  // namespace

void register_compare(CLI::App& app) {
  struct Opts {
    std::string model, tokenizer, prompts, prompt, dtypes = "fp16", kv_dtype, kernels = "standard", samplers = "greedy",
        control, out;
    SamplerOptions sampler;
    int max_new_tokens = 128, threads = 1, batch_size = 1;
    bool stop_at_eos = false, no_report = false;
  };
  auto o = std::make_shared<Opts>();
  o->sampler.seed = 1;
  auto* cmd = app.add_subcommand("compare", "cache ON vs OFF over prompts: divergence, flips, logit metrics, report");
  cmd->add_option("--model", o->model, "checkpoint")->required();
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer (optional when the model carries one)");
  cmd->add_option("--prompts", o->prompts, "prompts: .jsonl ({\"id\",\"prompt\"}), text lines, or builtin:stories|builtin:facts");
  cmd->add_option("--prompt", o->prompt, "a single prompt");
  cmd->add_option("--dtype", o->dtypes, "compute dtypes, comma-separated (fp32,fp16,bf16)");
  cmd->add_option("--kv-dtype", o->kv_dtype, "KV-cache dtype (default: each --dtype)");
  cmd->add_option("--kernels", o->kernels, "kernel policies, comma-separated (reference,standard,invariant)");
  cmd->add_option("--sampler", o->samplers, "samplers, comma-separated (greedy,temperature,top-k,top-p,min-p)");
  cmd->add_option("--temperature", o->sampler.temperature, "sampling temperature");
  cmd->add_option("--top-k", o->sampler.top_k, "top-k cutoff");
  cmd->add_option("--top-p", o->sampler.top_p, "nucleus cutoff");
  cmd->add_option("--min-p", o->sampler.min_p, "min-p cutoff");
  cmd->add_option("--seed", o->sampler.seed, "seed of the counter-based RNG");
  cmd->add_option("--max-new-tokens", o->max_new_tokens, "tokens per generation")->check(CLI::PositiveNumber);
  cmd->add_option("--threads", o->threads, "worker threads")->check(CLI::Range(1, 256));
  cmd->add_option("--batch-size", o->batch_size,
                  "B > 1: also decode prompts in fixed groups of B (by index) as one cache-ON batch and compare each "
                  "with its solo cache-ON run (records get a \"batch\" object)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--control", o->control, "fp32: rerun every condition in fp32 and report the ratios")
      ->check(CLI::IsMember({"fp32"}));
  cmd->add_flag("--stop-at-eos", o->stop_at_eos, "end generations at EOS (default: always max-new-tokens)");
  cmd->add_flag("--no-report", o->no_report, "skip writing summary.json / summary.md / report.html");
  cmd->add_option("--out", o->out, "results directory (results.jsonl is resumed if present)")->required();
  cmd->callback([o] {
    CompareOptions c;
    c.model = o->model;
    c.tokenizer = o->tokenizer;
    if (!o->prompt.empty() && !o->prompts.empty()) fail_usage("pass --prompt or --prompts, not both");
    if (!o->prompt.empty())
      c.prompts = {Prompt{"prompt-0", o->prompt}};
    else
      c.prompts = load_prompts(o->prompts.empty() ? "builtin:stories" : o->prompts);
    for (const auto& d : split_csv(o->dtypes))
      for (const auto& k : split_csv(o->kernels))
        for (const auto& s : split_csv(o->samplers)) {
          Condition cond;
          cond.dtype = parse_dtype(d);
          cond.kv_dtype = o->kv_dtype.empty() ? cond.dtype : parse_dtype(o->kv_dtype);
          cond.kernels = parse_policy(k);
          SamplerOptions so = o->sampler;
          so.sampler = s;
          cond.sampler = so.config();
          c.conditions.push_back(cond);
        }
    if (o->control == "fp32") add_fp32_controls(c.conditions);
    c.max_new_tokens = o->max_new_tokens;
    c.seed = o->sampler.seed;
    c.threads = o->threads;
    c.batch_size = o->batch_size;
    c.stop_at_eos = o->stop_at_eos;
    c.out_dir = o->out;
    c.progress = isatty(STDERR_FILENO);
    run_compare(c);
    if (!o->no_report) {
      write_reports(o->out);
      std::cout << "wrote " << o->out << "/{results.jsonl,summary.json,summary.md,report.html}\n";
    }
  });
}

void register_report(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("report", "write summary.json, summary.md and report.html for a results directory");
  cmd->add_option("dir", *dir, "results directory")->required();
  cmd->callback([dir] {
    write_reports(*dir);
    std::cout << "wrote " << *dir << "/{summary.json,summary.md,report.html}\n";
  });
}

}  // namespace kvp::cli
