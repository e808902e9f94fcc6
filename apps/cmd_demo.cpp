#include <climits>
#include <iostream>

#include "cli_common.h"
#include "lab/demo.h"

namespace kvp::cli {

void register_demo(CLI::App& app) {
  auto o = std::make_shared<DemoOptions>();
  // One thread by default, as every other subcommand: the standard kernels' results depend on the
  // thread count, so the default output must be one every machine reproduces.
  o->threads = 1;
  auto kernels = std::make_shared<std::string>("standard");
  auto* cmd = app.add_subcommand("demo", "cache-ON vs cache-OFF in fp32/fp16/bf16 on a built-in synthetic model");
  auto* model = cmd->add_option("--model", o->model, "run on this checkpoint instead of the built-in synthetic model");
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer for --model (default: the one it carries or sits beside)")
      ->needs(model);
  one_of(cmd->add_option("--kernels", *kernels, "kernel policy"), kPolicyNames);
  threads_option(cmd, o->threads);
  auto device = std::make_shared<std::string>("cpu");
  device_option(cmd, *device);
  auto simd = std::make_shared<std::string>("auto");
  simd_option(cmd, *simd);
  int_at_least(cmd->add_option("--max-new-tokens", o->max_new_tokens, "tokens per generation"), 1);
  cmd->callback([o, kernels, device, simd, cmd] {
    check_threads_policies(cmd, o->threads, {*kernels});
    o->kernels = parse_policy(*kernels);
    o->device = parse_device(*device);
    require_device(o->device);
    o->simd = parse_simd(*simd);
    require_simd(o->simd);
    std::string description;
    const auto rows = run_demo(*o, &description);
    std::cout << "kvparity demo — model: " << description << "\n"
              << "greedy decoding, " << o->max_new_tokens << " new tokens, kernels=" << *kernels
              << ", threads=" << o->threads
              << (o->device == Device::Cpu ? std::string() : ", device=" + device_description(o->device)) << "\n\n"
              << demo_table(rows)
              << "\nmax |Δlogit| is taken over the steps where both paths still share the same prefix.\n";
  });
}

}  // namespace kvp::cli
