#pragma once
// `kvparity demo`: cache-ON vs cache-OFF on a few prompts in fp32, fp16 and bf16, summarised in a
// short table. Runs on a synthesised model by default, so it needs no download and no network.
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/simd_target.h"

namespace kvp {

struct DemoOptions {
  std::string model;      // empty: synthesise the "tiny" llama preset in memory
  std::string tokenizer;  // optional, for --model
  KernelPolicy kernels = KernelPolicy::Standard;
  Device device = Device::Cpu;
  SimdTarget simd = SimdTarget::Auto;
  int threads = 1;  // one default everywhere: the standard kernels' results depend on it
  int max_new_tokens = 48;
  std::vector<std::string> prompts{"Once upon a time", "The little robot looked at the sky and",
                                    "In a small village by the sea,"};
};

struct DemoRow {
  std::string dtype;
  std::string prompt;
  int first_divergence = -1;  // -1: identical sequences
  int generated = 0;
  double max_abs_logit_diff = 0.0;
};

std::vector<DemoRow> run_demo(const DemoOptions& opts, std::string* model_description);
std::string demo_table(const std::vector<DemoRow>& rows);

}  // namespace kvp
