// `kvparity eval gsm8k` (issue 7).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <iostream>

#include "cli_common.h"
#include "core/error.h"
#include "lab/gsm8k_eval.h"
#include "lab/report.h"

namespace kvp::cli {

void register_eval(CLI::App& app) {
  struct Opts {
    std::string data, train, conditions = "greedy", dtypes = "fp16", kv_dtypes, kernels = "standard", shard, out,
        seed = "1", baseline, candidate;
    std::vector<std::string> models, tokenizers;
    std::string device = "cpu", simd = "auto";
    ChatChoice chat;
    int shots = 5, max_new_tokens = 256, limit = 0, threads = 1, batch_size = 1;
    bool skip_long = false, no_report = false, no_flips = false;
  };
  auto o = std::make_shared<Opts>();
  auto* eval = app.add_subcommand("eval", "dataset studies: accuracy of two ways of running a model (default: cache "
                                          "ON vs cache OFF)");
  eval->require_subcommand(1);
  auto* cmd = eval->add_subcommand(
      "gsm8k", "GSM8K k-shot (lm-eval format) on both sides of a comparison (default: cache OFF vs ON), resumable, "
               "shardable");
  cmd->add_option("--data", o->data, "GSM8K test split (JSONL with question/answer)")->required();
  cmd->add_option("--train", o->train, "exemplar source (default: train.jsonl beside --data)");
  cmd->add_option("--model", o->models, "checkpoint; repeat for several models")
      ->required()
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--tokenizer", o->tokenizers,
                  "tokenizer per --model in the same order ('auto': found beside the model); default auto")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  chat_options(cmd, o->chat);
  cmd->add_option("--conditions", o->conditions, "sampling conditions, comma-separated, each run")
      ->type_name("{greedy|temperature:T|top-p:P|top-k:K|min-p:P},...");
  // --dtype as in compare and profile; --dtypes is the older name.
  list_of(cmd->add_option("--dtype,--dtypes", o->dtypes, "compute (and KV) dtypes, comma-separated, each run"),
          kDtypeNames);
  list_of(cmd->add_option("--kv-dtypes,--kv-dtype", o->kv_dtypes,
                          "KV-cache types, comma-separated, each run (default: each --dtype's own)"),
          kKvTypeNames);
  cmd->add_option("--baseline", o->baseline,
                  "SPEC of the baseline side: key=value,... over cache, dtype, kv-dtype, kernels, threads, "
                  "batch-size, prefill-chunk, device, simd (keys not given take the other options; default: cache=off)");
  cmd->add_option("--candidate", o->candidate,
                  "SPEC of the candidate side, as --baseline (default: cache=on); accuracy deltas and McNemar p "
                  "are candidate minus baseline");
  list_of(cmd->add_option("--kernels", o->kernels, "kernel policies, comma-separated, each run"), kPolicyNames);
  int_at_least(
      cmd->add_option("--shots", o->shots,
                      "few-shot exemplars (the first k of the train split); tiny 512-context models need 0 or 1"),
      0);
  int_at_least(cmd->add_option("--max-new-tokens", o->max_new_tokens, "generation budget per answer"), 1);
  int_at_least(cmd->add_option("--limit", o->limit, "first N problems of --data (0: all)"), 0);
  seed_option(cmd, o->seed, "seed of the counter-based RNG (conditions other than greedy)");
  int_at_least(cmd->add_option("--batch-size", o->batch_size,
                               "decode B items at a time as one batch on each side that does not set batch-size "
                               "(fixed groups of consecutive problems of the shard; same per-item draws as B = 1)"),
               1);
  threads_option(cmd, o->threads);
  device_option(cmd, o->device);
  simd_option(cmd, o->simd);
  cmd->add_option("--shard", o->shard, "run the problems with index mod n == i (0 <= i < n)")->type_name("i/n");
  cmd->add_flag("--skip-long", o->skip_long, "record prompts longer than the context as skipped instead of failing");
  cmd->add_flag("--no-report", o->no_report, "skip writing summary.json / summary.md / report.html");
  cmd->add_flag("--no-flips", o->no_flips,
                "skip the teacher-forced pass that counts token flips (under a batch-variant policy a second "
                "cache-OFF pass; records carry teacher_forced: null)");
  cmd->add_option("--out", o->out, "results directory (gsm8k.jsonl is resumed if present)")->required();
  cmd->callback([o, cmd] {
    check_chat(cmd, o->chat);
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
    refuse_unless(cmd, "--seed", any_sampling(g.conditions),
                  "a sampling condition in --conditions (temperature:T, top-p:P, ...)",
                  "greedy draws no random numbers");
    refuse_unless(cmd, "--train", o->shots > 0, "--shots 1 or more", "--shots 0 takes no exemplars");
    const std::vector<std::string> kernels = split_list(o->kernels);
    check_threads_policies(cmd, o->threads, kernels);
    for (const auto& d : split_list(o->dtypes)) g.dtypes.push_back(parse_dtype(d));
    for (const auto& k : split_list(o->kv_dtypes)) g.kv_dtypes.push_back(*parse_kv_type(k));
    if (given(cmd, "--baseline")) g.baseline = RunSpec::parse(o->baseline, "--baseline");
    if (given(cmd, "--candidate")) g.candidate = RunSpec::parse(o->candidate, "--candidate");
    for (const auto& k : kernels) g.kernels.push_back(parse_policy(k));
    g.shots = o->shots;
    g.chat = o->chat;
    g.max_new_tokens = o->max_new_tokens;
    g.limit = o->limit;
    g.seed = parse_seed(o->seed);
    g.threads = o->threads;
    g.device = parse_device(o->device);
    require_device(g.device);
    g.simd = parse_simd(o->simd);
    require_simd(g.simd);
    g.batch_size = o->batch_size;
    if (given(cmd, "--shard")) g.shard = parse_shard(o->shard);
    g.skip_long = o->skip_long;
    g.flips = !o->no_flips;
    g.out_dir = clean_dir(o->out);
    g.progress = isatty(STDERR_FILENO);
    const auto t0 = std::chrono::steady_clock::now();
    const int written = run_gsm8k(g);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << fmt::format("{} in {:.1f} s -> {}\n", count_of(size_t(written), "new record", "new records"), secs,
                             path_in(g.out_dir, kGsm8kResultsFile));
    if (!o->no_report) {
      write_reports(g.out_dir);
      std::cout << "wrote " << path_in(g.out_dir, "{summary.json,summary.md,report.html}") << "\n";
    }
  });
}

}  // namespace kvp::cli
