#include <charconv>
#include <climits>
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
    std::string kv_positions, baseline, candidate;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  o->sampler.seed_text = "1";
  auto* cmd =
      app.add_subcommand("patch", "activation and KV patching from a baseline into a candidate (default: cache OFF "
                                  "into cache ON) at a divergent step");
  cmd->add_option("--model", o->p.model, "checkpoint")->required();
  cmd->add_option("--tokenizer", o->p.tokenizer, "tokenizer (default: the one the model carries or sits beside)");
  cmd->add_option("--prompt", o->p.prompt, "prompt");
  chat_options(cmd, o->p.chat);
  one_of(cmd->add_option("--dtype", o->dtype, "compute dtype"), kDtypeNames);
  one_of(cmd->add_option("--kernels", o->kernels, "kernel policy"), kPolicyNames);
  threads_option(cmd, o->p.threads);
  auto device = std::make_shared<std::string>("cpu");
  device_option(cmd, *device);
  auto simd = std::make_shared<std::string>("auto");
  simd_option(cmd, *simd);
  o->sampler.add(cmd);
  int_at_least(cmd->add_option("--max-new-tokens", o->p.max_new_tokens, "horizon searched for the first divergence"),
               1);
  int_at_least(cmd->add_option("--step", o->p.step,
                               "generated-token index to patch at (step 0 is the prefill, the same on both paths)"),
               1)
      ->default_str("the first divergence");
  int_at_least(cmd->add_option("--continuation", o->p.continuation, "tokens compared after the patched step"), 0);
  cmd->add_option("--kv-positions", o->kv_positions,
                  "KV rows copy only cached positions BEGIN:END, half-open (default: all before the step)")
      ->type_name("BEGIN:END");
  cmd->add_option("--baseline", o->baseline,
                  "SPEC of the side patched from: key=value,... over cache, dtype, kv-dtype, kernels, threads, "
                  "prefill-chunk, device, simd (keys not given take the other options; default: cache=off)");
  cmd->add_option("--candidate", o->candidate,
                  "SPEC of the side patched into, as --baseline; it runs with cache=on (default: cache=on)");
  cmd->add_option("--out", o->out, "directory for patch.json (and the report)");
  cmd->add_flag("--json", o->json, "print patch.json to stdout instead of the table");
  cmd->callback([o, cmd, device, simd] {
    check_chat(cmd, o->p.chat);
    check_threads_policies(cmd, o->p.threads, {o->kernels});
    o->p.device = parse_device(*device);
    require_device(o->p.device);
    o->p.simd = parse_simd(*simd);
    require_simd(o->p.simd);
    o->sampler.check(cmd);
    if (given(cmd, "--step") && o->p.step >= o->p.max_new_tokens)
      fail_usage("--step {} needs --max-new-tokens > {} (the free runs must reach the step)", o->p.step, o->p.step);
    o->p.dtype = parse_dtype(o->dtype);
    o->p.kernels = parse_policy(o->kernels);
    o->p.sampler = o->sampler.config();
    o->p.seed = o->sampler.seed();
    if (given(cmd, "--kv-positions")) {
      const std::string& kv = o->kv_positions;
      const size_t colon = kv.find(':');
      auto to_int = [](const std::string& t, int* v) {
        const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), *v);
        return !t.empty() && ec == std::errc() && p == t.data() + t.size();
      };
      if (colon == std::string::npos || !to_int(kv.substr(0, colon), &o->p.kv_begin) ||
          !to_int(kv.substr(colon + 1), &o->p.kv_end) || o->p.kv_begin < 0 || o->p.kv_end <= o->p.kv_begin)
        fail_usage("--kv-positions '{}': expected BEGIN:END with 0 <= BEGIN < END", kv);
    }
    if (given(cmd, "--baseline")) o->p.baseline = RunSpec::parse(o->baseline, "--baseline");
    if (given(cmd, "--candidate")) o->p.candidate = RunSpec::parse(o->candidate, "--candidate");
    patch_sides(o->p);  // refuse sides that cannot run before touching --out
    const std::string out = o->out.empty() ? std::string() : clean_dir(o->out);
    if (!out.empty()) check_patch_dir(out, o->p);  // refuse before the work, not after
    const PatchResult r = run_patch(o->p);
    const auto j = patch_json(r, o->p);
    if (!o->out.empty()) {
      save_patch(out, j, o->p);
      write_reports(out);
    }
    if (o->json) {
      std::cout << j.dump(2) << std::endl;
    } else {
      if (r.first_divergence < 0)
        std::cout << "note: the free-running sides did not diverge within " << o->p.max_new_tokens << " tokens\n";
      if (o->p.default_sides())
        std::cout << patch_table(r)
                  << "(next: whose token the patched cache-ON step picks; cont: leading tokens matching cache OFF's "
                     "continuation; then max |Δlogit| to cache OFF)\n";
      else
        std::cout << "baseline " << r.baseline.spec() << "\ncandidate " << r.candidate.spec() << "\n"
                  << patch_table(r, false)
                  << "(next: whose token the patched candidate step picks, BASE(line) or CAND(idate); cont: leading "
                     "tokens matching the baseline's continuation; then max |Δlogit| to the baseline)\n";
    }
  });
}

}  // namespace kvp::cli
