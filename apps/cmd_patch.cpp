#include <filesystem>
#include <iostream>

#include "cli_common.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "lab/patching.h"
#include "lab/report.h"

namespace kvp::cli {

void register_patch(CLI::App& app) {
  struct Opts {
    PatchOptions p;
    SamplerOptions sampler;
    std::string dtype = "fp16", kernels = "standard", out;
    std::string kv_positions;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  o->sampler.seed = 1;
  auto* cmd = app.add_subcommand("patch", "activation and KV patching from cache OFF into cache ON at a divergent step");
  cmd->add_option("--model", o->p.model, "checkpoint")->required();
  cmd->add_option("--tokenizer", o->p.tokenizer, "tokenizer (optional when the model carries one)");
  cmd->add_option("--prompt", o->p.prompt, "prompt");
  cmd->add_option("--dtype", o->dtype, "compute dtype")->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  cmd->add_option("--kernels", o->kernels, "kernel policy");
  cmd->add_option("--threads", o->p.threads, "worker threads")->check(CLI::Range(1, 256));
  o->sampler.add(cmd);
  cmd->add_option("--max-new-tokens", o->p.max_new_tokens, "horizon searched for the first divergence")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--step", o->p.step, "generated-token index to patch at (default: the first divergence)");
  cmd->add_option("--continuation", o->p.continuation, "tokens compared after the patched step")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--kv-positions", o->kv_positions,
                  "KV rows copy only cached positions BEGIN:END (half-open; default all before the step)");
  cmd->add_option("--out", o->out, "directory for patch.json (and the report)");
  cmd->add_flag("--json", o->json, "print patch.json to stdout instead of the table");
  cmd->callback([o] {
    o->p.dtype = parse_dtype(o->dtype);
    o->p.kernels = parse_policy(o->kernels);
    o->p.sampler = o->sampler.config();
    o->p.seed = o->sampler.seed;
    if (!o->kv_positions.empty()) {
      const auto colon = o->kv_positions.find(':');
      try {
        if (colon == std::string::npos) throw std::invalid_argument("no colon");
        size_t used = 0;
        o->p.kv_begin = std::stoi(o->kv_positions.substr(0, colon), &used);
        const std::string end = o->kv_positions.substr(colon + 1);
        o->p.kv_end = std::stoi(end, &used);
        if (used != end.size() || o->p.kv_begin < 0 || o->p.kv_end <= o->p.kv_begin) throw std::invalid_argument("range");
      } catch (const std::exception&) {
        fail_usage("--kv-positions '{}': expected BEGIN:END with 0 <= BEGIN < END", o->kv_positions);
      }
    }
    if (!o->out.empty()) check_patch_dir(o->out, o->p);  // refuse before the work, not after
    const PatchResult r = run_patch(o->p);
    const auto j = patch_json(r, o->p);
    if (!o->out.empty()) {
      save_patch(o->out, j, o->p);
      write_reports(o->out);
    }
    if (o->json) {
      std::cout << j.dump(2) << std::endl;
    } else {
      if (r.first_divergence < 0)
        std::cout << "note: the free-running paths did not diverge within " << o->p.max_new_tokens << " tokens\n";
      std::cout << patch_table(r)
                << "(next: whose token the patched cache-ON step picks; cont: leading tokens matching cache OFF's "
                   "continuation; then max |Δlogit| to cache OFF)\n";
    }
  });
}

}  // namespace kvp::cli
