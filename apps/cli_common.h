#pragma once
// Options and helpers shared by the subcommands. The CLI stays thin: it parses, checks that every
// option given takes effect (cli_checks.h), then calls src/.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "cli_checks.h"
#include "model/model.h"
#include "runtime/chat_choice.h"
#include "runtime/generator.h"
#include "tokenizer/tokenizer.h"

namespace kvp::cli {

struct ModelOptions {
  std::string model;
  std::string tokenizer;
  std::string dtype = "fp32";
  std::string kv_dtype;  // empty: same as dtype
  double kv_scale = 1.0;
  std::string kernels = "standard";
  std::string device = "cpu";
  std::string simd = "auto";
  int threads = 1;
  int cache_capacity = 0;

  // Subcommands that take token ids, or size the cache themselves, leave those options out rather
  // than accept them and ignore them.
  struct Parts {
    bool tokenizer = true, cache_capacity = true;
  };
  void add(CLI::App* app, Parts parts);
  void add(CLI::App* app) { add(app, Parts{}); }
  // Refuses what would be ignored (--threads above 1 with the reference kernels); call first in
  // the callback.
  void check(const CLI::App* cmd) const;
  DType compute_dtype() const;
  EngineOptions engine() const;
};

// `--sampler` is one sampler, or a comma list where the subcommand runs each (compare): a
// parameter is accepted when at least one listed sampler uses it.
struct SamplerOptions {
  std::string sampler = "greedy";
  double temperature = 1.0;
  int top_k = 40;
  double top_p = 0.9;
  double min_p = 0.05;
  std::string seed_text = "0";

  void add(CLI::App* app, bool list = false);
  void check(const CLI::App* cmd) const;
  uint64_t seed() const { return parse_seed(seed_text); }
  SamplerConfig config(const std::string& kind) const;
  SamplerConfig config() const { return config(sampler); }
};

// --device cpu|cuda (one value).
CLI::Option* device_option(CLI::App* app, std::string& device);
// --simd auto|avx512|avx2|scalar (one value): the CPU kernels' SIMD target (kernels/simd_target.h).
CLI::Option* simd_option(CLI::App* app, std::string& simd);

// --chat-template none|auto|llama2|llama3|llama3.1|mistral|gemma|chatml (tokenizer/chat_template.h)
// and --system TEXT, into `chat`; check_chat refuses a --system that would have no effect.
void chat_options(CLI::App* app, ChatChoice& chat);
void check_chat(const CLI::App* cmd, const ChatChoice& chat);

// Refuses --threads above 1 when every policy in `policies` is `reference`.
void check_threads_policies(const CLI::App* cmd, int threads, const std::vector<std::string>& policies);

// Token ids as "1,2,3", "1 2 3" or a JSON array "[1, 2, 3]"; errors name `option`.
std::vector<int> parse_token_list(const std::string& text, const std::string& option);
void print_json(const std::string& s);

void register_generate(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_forward(CLI::App& app);
void register_model_files(CLI::App& app);  // synth, convert
void register_demo(CLI::App& app);
void register_bench(CLI::App& app);
void register_compare(CLI::App& app);
void register_report(CLI::App& app);
void register_profile(CLI::App& app);
void register_patch(CLI::App& app);
void register_eval(CLI::App& app);  // eval gsm8k
void register_merge(CLI::App& app);
void register_inspect(CLI::App& app);

}  // namespace kvp::cli
