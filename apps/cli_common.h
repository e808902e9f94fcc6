#pragma once
// Options and helpers shared by the subcommands. The CLI stays thin: it parses, then calls src/.
#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/generator.h"
#include "tokenizer/tokenizer.h"

namespace kvp::cli {

struct ModelOptions {
  std::string model;
  std::string tokenizer;
  std::string dtype = "fp32";
  std::string kv_dtype;  // empty: same as dtype
  std::string kernels = "standard";
  int threads = 1;
  int cache_capacity = 0;

  void add(CLI::App* app, bool model_required = true);
  DType compute_dtype() const;
  EngineOptions engine() const;
};

struct SamplerOptions {
  std::string sampler = "greedy";
  double temperature = 1.0;
  int top_k = 40;
  double top_p = 0.9;
  double min_p = 0.05;
  uint64_t seed = 0;
  void add(CLI::App* app);
  SamplerConfig config() const;
};

std::vector<int> parse_token_list(const std::string& csv);  // "1,2,3"
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
void register_eval(CLI::App& app);   // eval gsm8k
void register_merge(CLI::App& app);

}  // namespace kvp::cli
