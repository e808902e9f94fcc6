#include <iostream>

#include "cli_common.h"
#include "lab/demo.h"

namespace kvp::cli {

void register_demo(CLI::App& app) {
  auto o = std::make_shared<DemoOptions>();
  auto kernels = std::make_shared<std::string>("standard");
  auto* cmd = app.add_subcommand("demo", "cache-ON vs cache-OFF in fp32/fp16/bf16 on a built-in synthetic model");
  cmd->add_option("--model", o->model, "run on this checkpoint instead of the built-in synthetic model");
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer for --model");
  cmd->add_option("--kernels", *kernels, "kernel policy: reference, standard");
  cmd->add_option("--threads", o->threads, "worker threads")->check(CLI::Range(1, 256));
  cmd->add_option("--max-new-tokens", o->max_new_tokens, "tokens per generation")->check(CLI::PositiveNumber);
  cmd->callback([o, kernels] {
    o->kernels = parse_policy(*kernels);
    std::string description;
    const auto rows = run_demo(*o, &description);
    std::cout << "kvparity demo — model: " << description << "\n"
              << "greedy decoding, " << o->max_new_tokens << " new tokens, kernels=" << *kernels
              << ", threads=" << o->threads << "\n\n"
              << demo_table(rows)
              << "\nmax |Δlogit| is taken over the steps where both paths still share the same prefix.\n";
  });
}

}  // namespace kvp::cli
