#include "cli_common.h"

#include <iostream>

#include "core/error.h"

namespace kvp::cli {

void ModelOptions::add(CLI::App* app, bool model_required) {
  auto* m = app->add_option("--model", model, "llama2.c .bin, .gguf, .safetensors or HF directory");
  if (model_required) m->required();
  app->add_option("--tokenizer", tokenizer, "tokenizer.json or llama2.c tokenizer.bin (optional when the model carries one)");
  app->add_option("--dtype", dtype, "compute dtype: fp32, fp16, bf16")->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  app->add_option("--kv-dtype", kv_dtype, "KV-cache dtype (default: --dtype)")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  app->add_option("--kernels", kernels, "kernel policy: reference, standard");
  app->add_option("--threads", threads, "worker threads")->check(CLI::Range(1, 256));
  app->add_option("--cache-capacity", cache_capacity, "static KV cache positions (default: the model's context)")
      ->check(CLI::NonNegativeNumber);
}

DType ModelOptions::compute_dtype() const { return parse_dtype(dtype); }

EngineOptions ModelOptions::engine() const {
  EngineOptions o;
  o.kernels = parse_policy(kernels);
  o.threads = threads;
  o.kv_dtype = kv_dtype.empty() ? compute_dtype() : parse_dtype(kv_dtype);
  o.cache_capacity = cache_capacity;
  return o;
}

void SamplerOptions::add(CLI::App* app) {
  app->add_option("--sampler", sampler, "greedy, temperature, top-k, top-p, min-p");
  app->add_option("--temperature", temperature, "sampling temperature (> 0)");
  app->add_option("--top-k", top_k, "top-k cutoff (>= 1)");
  app->add_option("--top-p", top_p, "nucleus cutoff in (0, 1]");
  app->add_option("--min-p", min_p, "min-p cutoff in [0, 1]");
  app->add_option("--seed", seed, "seed of the counter-based RNG");
}

SamplerConfig SamplerOptions::config() const {
  SamplerConfig c;
  c.kind = parse_sampler(sampler);
  c.temperature = temperature;
  c.top_k = top_k;
  c.top_p = top_p;
  c.min_p = min_p;
  c.validate();
  return c;
}

std::vector<int> parse_token_list(const std::string& csv) {
  std::vector<int> ids;
  size_t i = 0;
  while (i < csv.size()) {
    size_t j = csv.find(',', i);
    if (j == std::string::npos) j = csv.size();
    std::string item = csv.substr(i, j - i);
    item.erase(0, item.find_first_not_of(" \t[]"));
    item.erase(item.find_last_not_of(" \t[]") + 1);
    if (!item.empty()) {
      size_t used = 0;
      long v = 0;
      try {
        v = std::stol(item, &used);
      } catch (...) {
        used = 0;
      }
      if (used != item.size() || v < 0 || v > (1 << 30)) fail_usage("--tokens: '{}' is not a token id", item);
      ids.push_back(int(v));
    }
    i = j + 1;
  }
  return ids;
}

void print_json(const std::string& s) { std::cout << s << std::endl; }

}  // namespace kvp::cli
