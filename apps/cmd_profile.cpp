#include <climits>
#include <filesystem>
#include <iostream>

#include "cli_common.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "lab/layer_profile.h"
#include "lab/report.h"

namespace kvp::cli {

void register_profile(CLI::App& app) {
  struct Opts {
    ProfileOptions p;
    std::string dtypes = "fp32,fp16,bf16", kernels = "standard", out, baseline, candidate;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "profile", "per-layer differences between two ways of running a model (default: cache OFF vs ON) at one step");
  cmd->add_option("--model", o->p.model, "checkpoint")->required();
  cmd->add_option("--tokenizer", o->p.tokenizer, "tokenizer (default: the one the model carries or sits beside)");
  cmd->add_option("--prompt", o->p.prompt, "prompt");
  chat_options(cmd, o->p.chat);
  list_of(cmd->add_option("--dtype", o->dtypes, "dtypes side by side, comma-separated"), kDtypeNames);
  one_of(cmd->add_option("--kernels", o->kernels, "kernel policy"), kPolicyNames);
  threads_option(cmd, o->p.threads);
  auto device = std::make_shared<std::string>("cpu");
  device_option(cmd, *device);
  auto simd = std::make_shared<std::string>("auto");
  simd_option(cmd, *simd);
  int_at_least(cmd->add_option("--step", o->p.step, "generated-token index to compare (1 = first decode step)"), 1);
  cmd->add_option("--baseline", o->baseline,
                  "SPEC of the baseline side: key=value,... over cache, dtype, kv-dtype, kernels, threads, "
                  "prefill-chunk, device, simd (keys not given take the other options; default: cache=off)");
  cmd->add_option("--candidate", o->candidate,
                  "SPEC of the candidate side, as --baseline (default: cache=on); the shared prefix is the prompt "
                  "and the candidate's greedy tokens");
  cmd->add_option("--out", o->out, "directory for profile.json (and the report)");
  cmd->add_flag("--json", o->json, "print profile.json to stdout instead of the table");
  cmd->callback([o, cmd, device, simd] {
    check_chat(cmd, o->p.chat);
    check_threads_policies(cmd, o->p.threads, {o->kernels});
    o->p.device = parse_device(*device);
    require_device(o->p.device);
    o->p.simd = parse_simd(*simd);
    require_simd(o->p.simd);
    o->p.dtypes.clear();
    for (const auto& d : split_list(o->dtypes)) o->p.dtypes.push_back(parse_dtype(d));
    o->p.kernels = parse_policy(o->kernels);
    if (given(cmd, "--baseline")) o->p.baseline = RunSpec::parse(o->baseline, "--baseline");
    if (given(cmd, "--candidate")) o->p.candidate = RunSpec::parse(o->candidate, "--candidate");
    profile_sides(o->p);  // refuse sides that cannot run before touching --out
    const std::string out = o->out.empty() ? std::string() : clean_dir(o->out);
    if (!out.empty()) check_profile_dir(out, o->p);  // refuse before the work, not after
    const auto prof = run_profile(o->p);
    const auto j = profile_json(prof, o->p);
    if (!o->out.empty()) {
      save_profile(out, j, o->p);
      write_reports(out);
    }
    if (o->json)
      std::cout << j.dump(2) << std::endl;
    else if (o->p.default_sides())
      std::cout << "max |cache ON - cache OFF| at position " << prof.front().position << " (step " << o->p.step
                << "), residual stream after each layer and K over all cached positions:\n"
                << profile_table(prof);
    else
      std::cout << "max |candidate - baseline| at position " << prof.front().position << " (step " << o->p.step
                << "), residual stream after each layer and K over all cached positions; conditions name "
                   "baseline->candidate where the sides differ:\n"
                << profile_table(prof, false);
  });
}

}  // namespace kvp::cli
