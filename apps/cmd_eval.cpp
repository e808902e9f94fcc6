// `kvparity eval gsm8k` (issue 7).
#include <unistd.h>

#include <chrono>
#include <iostream>

#include "cli_common.h"
#include "core/error.h"
#include "lab/gsm8k_eval.h"
#include "lab/report.h"

namespace kvp::cli {
namespace {

std::vector<std::string> split_list(const std::string& s) {
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

void register_eval(CLI::App& app) {
  struct Opts {
    std::string data, train, conditions = "greedy", dtypes = "fp16", kernels = "standard", shard, out;
    std::vector<std::string> models, tokenizers;
    int shots = 5, max_new_tokens = 256, limit = 0, threads = 1, batch_size = 1;
    uint64_t seed = 1;
    bool skip_long = false, no_report = false;
  };
  auto o = std::make_shared<Opts>();
  auto* eval = app.add_subcommand("eval", "dataset studies: accuracy with cache ON vs cache OFF");
  eval->require_subcommand(1);
  auto* cmd = eval->add_subcommand("gsm8k", "GSM8K k-shot (lm-eval format) on both cache paths, resumable, shardable");
  cmd->add_option("--data", o->data, "GSM8K test split (JSONL with question/answer)")->required();
  cmd->add_option("--train", o->train, "exemplar source (default: train.jsonl beside --data)");
  cmd->add_option("--model", o->models, "checkpoint; repeat for several models")->required()->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--tokenizer", o->tokenizers,
                  "tokenizer per --model in the same order ('auto': found beside the model); default auto")
      ->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--conditions", o->conditions, "greedy, temperature:T, top-p:P, top-k:K, min-p:P (comma-separated)");
  cmd->add_option("--dtypes", o->dtypes, "compute (and KV) dtypes, comma-separated: fp32, fp16, bf16");
  cmd->add_option("--kernels", o->kernels, "kernel policies, comma-separated: standard, invariant, reference");
  cmd->add_option("--shots", o->shots, "few-shot exemplars (the first k of the train split); tiny 512-context "
                                       "models need 0 or 1")->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-new-tokens", o->max_new_tokens, "generation budget per answer")->check(CLI::PositiveNumber);
  cmd->add_option("--limit", o->limit, "first N problems of --data (0: all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", o->seed, "seed of the counter-based RNG");
  cmd->add_option("--batch-size", o->batch_size,
                  "decode B items at a time as one batch on each cache path (fixed groups of consecutive problems "
                  "of the shard; same per-item draws as B = 1)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--threads", o->threads, "worker threads")->check(CLI::Range(1, 256));
  cmd->add_option("--shard", o->shard, "i/n: run the problems with index mod n == i (0 <= i < n)");
  cmd->add_flag("--skip-long", o->skip_long, "record prompts longer than the context as skipped instead of failing");
  cmd->add_flag("--no-report", o->no_report, "skip writing summary.json / summary.md / report.html");
  cmd->add_option("--out", o->out, "results directory (gsm8k.jsonl is resumed if present)")->required();
  cmd->callback([o] {
    Gsm8kOptions g;
    g.data = o->data;
    g.train = o->train;
    if (!o->tokenizers.empty() && o->tokenizers.size() != o->models.size())
      fail_usage("--tokenizer: give one per --model ({} models, {} tokenizers), 'auto' for ones found beside the model",
                 o->models.size(), o->tokenizers.size());
    for (size_t i = 0; i < o->models.size(); ++i) {
      std::string t = o->tokenizers.empty() ? "" : o->tokenizers[i];
      g.models.push_back({o->models[i], t == "auto" ? "" : t});
    }
    g.conditions = parse_gsm8k_conditions(o->conditions);
    for (const auto& d : split_list(o->dtypes)) g.dtypes.push_back(parse_dtype(d));
    for (const auto& k : split_list(o->kernels)) g.kernels.push_back(parse_policy(k));
    g.shots = o->shots;
    g.max_new_tokens = o->max_new_tokens;
    g.limit = o->limit;
    g.seed = o->seed;
    g.threads = o->threads;
    g.batch_size = o->batch_size;
    if (!o->shard.empty()) g.shard = parse_shard(o->shard);
    g.skip_long = o->skip_long;
    g.out_dir = o->out;
    g.progress = isatty(STDERR_FILENO);
    const auto t0 = std::chrono::steady_clock::now();
    const int written = run_gsm8k(g);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << fmt::format("{} new records in {:.1f} s -> {}/{}\n", written, secs, o->out, kGsm8kResultsFile);
    if (!o->no_report) {
      write_reports(o->out);
      std::cout << "wrote " << o->out << "/{summary.json,summary.md,report.html}\n";
    }
  });
}

}  // namespace kvp::cli
