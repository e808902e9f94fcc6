#pragma once
// What the GPT-OSS suites (test_gpt_oss.cpp, test_gpt_oss_gguf.cpp) share: tests/gpt_oss_reference.py,
// an independent float64 numpy replay of transformers' eager GPT-OSS, run once per suite into a
// directory holding its tiny checkpoint (HF and GGUF forms) and the logits it computed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_run.h"
#include "model/model.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp::test {

using nlohmann::json;

inline constexpr const char* kReplayPython = "/usr/bin/python3";

struct Reference {
  std::vector<int> tokens;
  std::vector<double> logits;  // [tokens, vocab]
  int vocab = 0;
  json stats;
};

inline Reference read_reference(const std::string& dir) {
  Reference ref;
  std::ifstream f(dir + "/reference.json");
  if (!f) {
    ADD_FAILURE() << "no reference.json in " << dir;
    return ref;
  }
  const json j = json::parse(f);
  ref.tokens = j["tokens"].get<std::vector<int>>();
  ref.logits = j["logits"].get<std::vector<double>>();
  ref.vocab = j["vocab"].get<int>();
  ref.stats = j["stats"];
  return ref;
}

// Runs the replay into `dir` (its checkpoint, in the MXFP4 form when `mxfp4`, as config.json +
// model.safetensors and as llama.cpp's model.gguf, and reference.json);
// a missing python3/numpy fails.
inline Reference make_reference(const std::string& dir, bool mxfp4) {
  const std::string script = std::string(KVPARITY_SOURCE_DIR) + "/tests/gpt_oss_reference.py";
  const CliRun r = run_command(std::string(kReplayPython) + " " + q(script) + " " + q(dir) + " 7 --gguf" +
                               (mxfp4 ? " --mxfp4" : ""));
  EXPECT_EQ(r.status, 0) << "tests/gpt_oss_reference.py (needs /usr/bin/python3 with numpy): " << r.out << r.err;
  return read_reference(dir);
}

inline double max_diff(const float* got, const std::vector<double>& want, size_t first, size_t n) {
  double d = 0.0;
  for (size_t i = 0; i < n; ++i) d = std::max(d, std::fabs(double(got[i]) - want[first + i]));
  return d;
}

inline std::vector<float> logits_of(std::shared_ptr<const Model> model, KernelPolicy pol, const std::vector<int>& toks) {
  EngineOptions eo;
  eo.kernels = pol;
  Engine e(model, eo);
  const float* l = e.forward_uncached(toks.data(), int(toks.size()), ForwardOptions{});
  return {l, l + toks.size() * size_t(model->config.vocab_size)};
}

// b is the GPT-OSS model a is, as far as its config goes (a reader's or writer's round trip).
inline void expect_same_gpt_oss_config(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(b.arch, Arch::GptOss);
  EXPECT_EQ(b.sliding_window, a.sliding_window);
  EXPECT_EQ(b.sliding_window_period, a.sliding_window_period);
  EXPECT_EQ(b.moe.n_experts, a.moe.n_experts);
  EXPECT_EQ(b.moe.n_used, a.moe.n_used);
  EXPECT_EQ(b.moe.routing, a.moe.routing);
  EXPECT_EQ(b.moe.swiglu_limit, a.moe.swiglu_limit);
  EXPECT_EQ(b.rope_scaling, a.rope_scaling);
  EXPECT_EQ(b.rope_factor, a.rope_factor);
  EXPECT_EQ(b.rope_original_max_pos, a.rope_original_max_pos);
  EXPECT_EQ(b.rope_attention_factor, a.rope_attention_factor);
  EXPECT_EQ(b.rope_yarn_truncate, a.rope_yarn_truncate);
  EXPECT_TRUE(b.attention_sinks && b.o_bias && b.qkv_bias);
}

// One replay checkpoint and its reference per suite: the dequantised form, or (kMxfp4) the published
// checkpoints' form, experts as MXFP4 blocks and scales (U8).
template <bool kMxfp4>
class ReplayOf : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    ref_ = new Reference(make_reference(dir_->path(), kMxfp4));
  }
  static void TearDownTestSuite() {
    delete ref_;
    delete dir_;
  }
  static inline TempDir* dir_ = nullptr;
  static inline Reference* ref_ = nullptr;
};
}  // namespace kvp::test
