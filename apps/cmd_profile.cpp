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
    std::string dtypes = "fp32,fp16,bf16", kernels = "standard", out;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("profile", "per-layer cache-ON vs cache-OFF differences at one decoding step");
  cmd->add_option("--model", o->p.model, "checkpoint")->required();
  cmd->add_option("--tokenizer", o->p.tokenizer, "tokenizer (optional when the model carries one)");
  cmd->add_option("--prompt", o->p.prompt, "prompt");
  cmd->add_option("--dtype", o->dtypes, "dtypes side by side, comma-separated");
  cmd->add_option("--kernels", o->kernels, "kernel policy");
  cmd->add_option("--threads", o->p.threads, "worker threads")->check(CLI::Range(1, 256));
  cmd->add_option("--step", o->p.step, "generated-token index to compare (1 = first decode step)");
  cmd->add_option("--out", o->out, "directory for profile.json (and the report)");
  cmd->add_flag("--json", o->json, "print profile.json to stdout instead of the table");
  cmd->callback([o] {
    o->p.dtypes.clear();
    size_t i = 0;
    while (i <= o->dtypes.size()) {
      size_t j = o->dtypes.find(',', i);
      if (j == std::string::npos) j = o->dtypes.size();
      if (j > i) o->p.dtypes.push_back(parse_dtype(o->dtypes.substr(i, j - i)));
      i = j + 1;
    }
    o->p.kernels = parse_policy(o->kernels);
    if (!o->out.empty()) check_profile_dir(o->out, o->p);  // refuse before the work, not after
    const auto prof = run_profile(o->p);
    const auto j = profile_json(prof, o->p);
    if (!o->out.empty()) {
      save_profile(o->out, j, o->p);
      write_reports(o->out);
    }
    if (o->json)
      std::cout << j.dump(2) << std::endl;
    else
      std::cout << "max |cache ON - cache OFF| at position " << prof.front().position << " (step " << o->p.step
                << "), residual stream after each layer and K over all cached positions:\n"
                << profile_table(prof);
  });
}

}  // namespace kvp::cli
