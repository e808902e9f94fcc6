// Every family against transformers' own outputs (../shared/reference/<family>; Qwen3's,
// Gemma-3's and the mixtures of experts' in tests/data/reference): fp32 logits / hidden states (1
// and 2 threads) / cached step / greedy generations on both paths, and a bf16 plausibility bound.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "model/model.h"
#include "reference_files.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

using test::HiddenCapture;
using test::max_abs_diff;
using test::read_f32;
using test::read_json;

const std::vector<std::string> kReferenceFamilies = {"llama",  "mistral", "gemma2",    "qwen2",     "qwen3",
                                                     "gemma3", "olmo2",   "mixtral",   "qwen2_moe", "qwen3_moe",
                                                     "olmoe"};

class FamilyReference : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyReference, Fp32LogitsAndHiddenStatesMatchTransformers) {
  const std::string fam = GetParam();
  KVP_REQUIRE_REFERENCE(dir, fam);
  auto model = Model::load(dir, DType::F32);
  EXPECT_EQ(family_name(model->config), fam);
  const auto tokens = read_json(dir + "/tokens.json")["input_ids"].get<std::vector<int>>();
  const auto ref_logits = read_f32(dir + "/logits.f32");
  const auto ref_hidden = read_f32(dir + "/hidden.f32");
  const auto ref_last = read_f32(dir + "/last_layer_out.f32");
  const ModelConfig& c = model->config;
  for (KernelPolicy pol : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant})
    for (int threads : {1, 2}) {
      EngineOptions eo;
      eo.kernels = pol;
      eo.threads = threads;
      Engine engine(model, eo);
      HiddenCapture cap(c.n_layers, int(tokens.size()), c.dim);
      ForwardOptions fo;
      fo.hooks = &cap;
      const float* logits = engine.forward(tokens.data(), int(tokens.size()), 0, fo);
      ASSERT_EQ(ref_logits.size(), tokens.size() * size_t(c.vocab_size));
      ASSERT_EQ(ref_hidden.size(), cap.data.size());
      ASSERT_EQ(ref_last.size(), cap.last_layer.size());
      const double dl = max_abs_diff(logits, ref_logits.data(), ref_logits.size());
      const double dh = max_abs_diff(cap.data.data(), ref_hidden.data(), ref_hidden.size());
      const double dlast = max_abs_diff(cap.last_layer.data(), ref_last.data(), ref_last.size());
      std::printf("[ measured ] %s fp32 %s, %d threads: max|dlogits| %.3g, max|dhidden| %.3g, last layer %.3g\n",
                  fam.c_str(), policy_name(pol).c_str(), threads, dl, dh, dlast);
      const std::string run = fmt::format("{}, policy {}, {} threads", fam, policy_name(pol), threads);
      EXPECT_LE(dl, 1e-4) << run << ": logits";
      EXPECT_LE(dh, 1e-4) << run << ": hidden states";
      EXPECT_LE(dlast, 1e-4) << run << ": last layer output";
    }
}

TEST_P(FamilyReference, Fp32CachedStepAndGreedyGenerationsMatchTransformers) {
  const std::string fam = GetParam();
  KVP_REQUIRE_REFERENCE(dir, fam);
  auto model = Model::load(dir, DType::F32);
  const auto tokens = read_json(dir + "/tokens.json")["input_ids"].get<std::vector<int>>();
  const auto step_ref = read_f32(dir + "/step_logits.f32");
  for (KernelPolicy pol : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant}) {
    EngineOptions eo;
    eo.kernels = pol;
    Engine engine(model, eo);
    engine.forward(tokens.data(), int(tokens.size()) - 1, 0, ForwardOptions{});
    const float* step =
        engine.forward(tokens.data() + tokens.size() - 1, 1, int(tokens.size()) - 1, ForwardOptions{});
    EXPECT_LE(max_abs_diff(step, step_ref.data(), step_ref.size()), 1e-4) << fam << " " << policy_name(pol);
  }

  const auto gen = read_json(dir + "/generate.json");
  const auto prompt = gen["prompt"].get<std::vector<int>>();
  const auto gen_logits = read_f32(dir + "/gen_logits.f32");
  for (KernelPolicy pol : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant}) {
    for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
      EngineOptions eo;
      eo.kernels = pol;
      Engine e(model, eo);
      GenerationConfig g;
      g.max_new_tokens = gen["max_new_tokens"].get<int>();
      g.cache = mode;
      g.stop_at_eos = false;
      double worst = 0;
      const auto r = e.generate(prompt, g, nullptr, [&](const StepInfo& s) {
        worst = std::max(worst, max_abs_diff(s.logits, gen_logits.data() + size_t(s.step) * s.vocab, size_t(s.vocab)));
      });
      const char* key = mode == CacheMode::On ? "new_tokens_use_cache_true" : "new_tokens_use_cache_false";
      EXPECT_EQ(r.output_ids, gen[key].get<std::vector<int>>()) << fam << " " << key << " " << policy_name(pol);
      EXPECT_LE(worst, 1e-4) << fam << " " << key << " " << policy_name(pol);
    }
  }
}

// bf16 is a plausibility target (the reference README): PyTorch's CPU bf16 kernels reduce and
// round inside their matmuls in ways kvparity does not reproduce, so single logits move by a few
// bf16 ulps of the activations feeding them, and then the two bf16 runs differ about as much as
// either differs from fp32. The bounds asserted, all relative to HF's own bf16-vs-fp32 gap:
//  - argmax agrees at >= 90% of positions (HF's bf16 agrees with its fp32 at 92-96%), or, where HF's own
//    agreement is below 90% (Mixtral: 85%), at HF's own less 5% of the positions;
//  - mean |dlogit| <= 1.5x HF's mean bf16-vs-fp32 gap, max |dlogit| <= 2x HF's max gap
//    (summary.json), both against HF bf16 and against HF fp32;
//  - the cached bf16 step picks a token whose HF bf16 logit is within 0.5 of HF's best (HF's
//    Gemma-2 bf16 step has an exact tie at the top), or within HF's own bf16-vs-fp32 step gap when
//    that is larger.
// The measured values are printed.
TEST_P(FamilyReference, Bf16LogitsArePlausibleAgainstTransformersBf16) {
  const std::string fam = GetParam();
  KVP_REQUIRE_REFERENCE(dir, fam);
  auto model = Model::load(dir, DType::BF16);
  const auto tokens = read_json(dir + "/tokens.json")["input_ids"].get<std::vector<int>>();
  const auto ref = read_f32(dir + "/logits_bf16.f32");
  const auto ref32 = read_f32(dir + "/logits.f32");
  // HF's own bf16-vs-fp32 gap (summary.json's bf16_vs_fp32 for the shared four, the same number).
  ASSERT_EQ(ref.size(), ref32.size());
  const double hf_gap = max_abs_diff(ref.data(), ref32.data(), ref.size());
  const auto step_ref = read_f32(dir + "/step_logits_bf16.f32");
  const int V = model->config.vocab_size;
  const int n = int(tokens.size());
  // HF's own bf16 argmax agreement with its fp32: >= 90% for the dense families; Mixtral's bf16
  // routes 2-3 positions a layer to other experts, and agrees at 85% (tests/data/reference/README.md).
  // Below 90%, the bound is HF's own agreement less 5% of the positions.
  int hf_agree = 0;
  for (int p = 0; p < n; ++p) {
    const float* a = ref.data() + size_t(p) * V;
    const float* b = ref32.data() + size_t(p) * V;
    hf_agree += std::max_element(a, a + V) - a == std::max_element(b, b + V) - b;
  }
  const int agree_bound =
      hf_agree >= int(std::ceil(0.9 * n)) ? int(std::ceil(0.9 * n)) : hf_agree - int(std::ceil(0.05 * n));
  // The cached step's pick: within 0.5 of HF bf16's best, or within HF's own bf16-vs-fp32 step gap
  // where that is larger (Mixtral's routing again).
  const auto step_ref32 = read_f32(dir + "/step_logits.f32");
  const float step_slack = std::max(0.5f, float(max_abs_diff(step_ref.data(), step_ref32.data(), step_ref.size())));
  for (KernelPolicy pol : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant}) {
    EngineOptions eo;
    eo.kernels = pol;
    eo.kv_dtype = DType::BF16;
    Engine engine(model, eo);
    const float* logits = engine.forward(tokens.data(), n, 0, ForwardOptions{});
    const double d = max_abs_diff(logits, ref.data(), ref.size());
    const double d32 = max_abs_diff(logits, ref32.data(), ref32.size());
    double mean = 0;
    int agree = 0;
    for (int p = 0; p < n; ++p) {
      const float* a = logits + size_t(p) * V;
      const float* b = ref.data() + size_t(p) * V;
      agree += std::max_element(a, a + V) - a == std::max_element(b, b + V) - b;
      for (int v = 0; v < V; ++v) mean += std::fabs(a[v] - b[v]);
    }
    mean /= double(n) * V;
    double hf_mean_gap = 0;
    for (size_t i = 0; i < ref.size(); ++i) hf_mean_gap += std::fabs(ref[i] - ref32[i]);
    hf_mean_gap /= double(ref.size());
    std::printf("[ measured ] %s bf16 %s: max|d| to HF bf16 %.4g (mean %.3g), to HF fp32 %.4g, HF's own gap %.4g, "
                "argmax agreement %d/%d\n",
                fam.c_str(), policy_name(pol).c_str(), d, mean, d32, hf_gap, agree, n);
    EXPECT_GE(agree, agree_bound) << fam << " " << policy_name(pol) << " (HF's own bf16-vs-fp32 agreement "
                                  << hf_agree << "/" << n << ")";
    EXPECT_LE(d, 2.0 * hf_gap) << fam << " " << policy_name(pol);
    EXPECT_LE(d32, 2.0 * hf_gap) << fam << " (against HF fp32) " << policy_name(pol);
    EXPECT_LE(mean, 1.5 * hf_mean_gap) << fam << " " << policy_name(pol) << " (HF mean gap " << hf_mean_gap << ")";
    // The cached step in bf16 (prefill 47, then one row).
    Engine e2(model, eo);
    e2.forward(tokens.data(), n - 1, 0, ForwardOptions{});
    const float* step = e2.forward(tokens.data() + n - 1, 1, n - 1, ForwardOptions{});
    EXPECT_LE(max_abs_diff(step, step_ref.data(), step_ref.size()), 2.0 * hf_gap) << fam << " step";
    const auto chosen = std::max_element(step, step + V) - step;
    EXPECT_GE(step_ref[size_t(chosen)], *std::max_element(step_ref.begin(), step_ref.end()) - step_slack)
        << fam << " step argmax " << chosen << " " << policy_name(pol);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyReference, ::testing::ValuesIn(kReferenceFamilies));

}  // namespace
}  // namespace kvp
