// End-to-end engine tests on real checkpoints: golden greedy generations, cache-path equivalence,
// the static KV cache's NaN-poisoning and exact-size checks, and bitwise-equal logits across the
// four ways to load stories260K.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lab/path_comparison.h"
#include "model/checkpoint_export.h"
#include "model/model.h"
#include "reference_files.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

using test::read_json;

struct GoldenCase {
  std::vector<int> prompt, full;  // full = prompt + generated (llama2.c run.c ids incl. BOS)
  std::vector<std::vector<std::pair<int, double>>> top5;  // per position, may be empty
};

std::vector<GoldenCase> golden_cases(const std::string& path) {
  std::vector<GoldenCase> out;
  const nlohmann::json doc = read_json(path);
  for (const auto& c : doc.at("cases")) {
    GoldenCase g;
    g.prompt = c["prompt_ids"].get<std::vector<int>>();
    g.full = c["output_ids"].get<std::vector<int>>();
    if (c.contains("top5_logits_per_position"))
      for (const auto& pos : c["top5_logits_per_position"]) {
        std::vector<std::pair<int, double>> row;
        for (const auto& e : pos) row.emplace_back(e[0].get<int>(), e[1].get<double>());
        g.top5.push_back(row);
      }
    out.push_back(g);
  }
  return out;
}

std::vector<int> generate_ids(const std::shared_ptr<const Model>& model, KernelPolicy pol, CacheMode mode,
                              const std::vector<int>& prompt, int n, int threads = 1) {
  EngineOptions eo;
  eo.kernels = pol;
  eo.threads = threads;
  Engine engine(model, eo);
  GenerationConfig g;
  g.max_new_tokens = n;
  g.cache = mode;
  g.stop_at_eos = false;
  return engine.generate(prompt, g, nullptr).output_ids;
}

class Golden : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(Golden, GreedyMatchesReferenceOnBothPathsAndPolicies) {
  const auto& [name, file] = GetParam();
  KVP_REQUIRE_SHARED(ref, "models/" + name + "/reference_greedy.json");
  KVP_REQUIRE_SHARED(model_path, "models/" + name + "/" + file);
  auto model = Model::load(model_path, DType::F32);
  const auto cases = golden_cases(ref);
  ASSERT_FALSE(cases.empty()) << ref;
  for (const auto& c : cases) {
    const int n_new = int(c.full.size() - c.prompt.size());
    // The empty-prompt cases run 256/128 steps; the cache-OFF path is quadratic, so check a prefix there.
    for (KernelPolicy pol : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant}) {
      for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
        const int n = (mode == CacheMode::Off || pol == KernelPolicy::Reference) ? std::min(n_new, 64) : n_new;
        const auto ids = generate_ids(model, pol, mode, c.prompt, n);
        const std::vector<int> expect(c.full.begin() + c.prompt.size(), c.full.begin() + c.prompt.size() + n);
        EXPECT_EQ(ids, expect) << name << "/" << file << " policy " << policy_name(pol) << " cache "
                               << (mode == CacheMode::On ? "on" : "off") << " prompt of " << c.prompt.size();
      }
    }
    if (c.top5.empty()) continue;
    // Top-5 logits at every position of the reference sequence (one cache-free forward).
    for (KernelPolicy pol : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant}) {
      EngineOptions eo;
      eo.kernels = pol;
      Engine engine(model, eo);
      const int positions = int(c.top5.size());
      const float* logits = engine.forward(c.full.data(), positions, 0, ForwardOptions{});
      double worst = 0;
      for (int p = 0; p < positions; ++p)
        for (const auto& [id, value] : c.top5[size_t(p)])
          worst = std::max(worst, std::fabs(double(logits[size_t(p) * model->config.vocab_size + id]) - value));
      EXPECT_LE(worst, 1e-3) << name << " top-5 logits, policy " << policy_name(pol);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RealModels, Golden,
                         ::testing::Values(std::make_tuple("stories260K", "stories260K.bin"),
                                           std::make_tuple("stories260K", "hf"),
                                           std::make_tuple("aidreams260K", "aidreams260K.bin"),
                                           std::make_tuple("aidreams260K", "hf")));

TEST(CachePaths, Fp32ReferencePolicyAgreesWithinOneEMinus5) {
  KVP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  auto model = Model::load(path, DType::F32);
  EngineOptions eo;
  eo.kernels = KernelPolicy::Reference;
  GenerationConfig g;
  g.max_new_tokens = 40;
  g.stop_at_eos = false;
  const std::vector<int> prompt{1, 403, 407, 261, 378};
  std::vector<std::vector<float>> on, off;
  Engine engine(model, eo);
  g.cache = CacheMode::On;
  engine.generate(prompt, g, nullptr, [&](const StepInfo& s) { on.emplace_back(s.logits, s.logits + s.vocab); });
  g.cache = CacheMode::Off;
  engine.generate(prompt, g, nullptr, [&](const StepInfo& s) { off.emplace_back(s.logits, s.logits + s.vocab); });
  ASSERT_EQ(on.size(), off.size());
  for (size_t s = 0; s < on.size(); ++s) {
    double num = 0, den = 0;
    for (size_t v = 0; v < on[s].size(); ++v) {
      num = std::max(num, double(std::fabs(on[s][v] - off[s][v])));
      den = std::max(den, double(std::fabs(off[s][v])));
    }
    EXPECT_LE(num / den, 1e-5) << "step " << s;
  }
}

TEST(CachePaths, Fp16StandardPolicyDivergenceIsReported) {
  KVP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  for (DType dt : {DType::F16, DType::BF16}) {
    auto model = Model::load(path, dt);
    EngineOptions eo;
    eo.kernels = KernelPolicy::Standard;
    eo.threads = 2;
    eo.kv_dtype = dt;
    GenerationConfig g;
    g.max_new_tokens = 48;
    g.stop_at_eos = false;
    const auto c = compare_cache_paths(model, eo, {1, 403, 407, 261, 378}, g);
    // Reported, not asserted: whether the paths part depends on the model's margins.
    std::cout << "[report] stories260K " << dtype_name(dt) << " standard: first divergence "
              << c.first_divergence << ", max |dlogit| over shared prefix " << c.max_abs_logit_diff << " ("
              << c.steps_compared << " steps)\n";
    EXPECT_EQ(c.on_ids.size(), 48u);
  }
}

TEST(KVCache, UnwrittenPositionsNeverLeakIntoAttention) {
  KVP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  for (DType dt : {DType::F32, DType::F16}) {
    auto model = Model::load(path, dt);
    for (KernelPolicy pol : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant}) {
      EngineOptions eo;
      eo.kernels = pol;
      eo.kv_dtype = dt;
      Engine clean(model, eo), poisoned(model, eo);
      poisoned.cache().poison();
      const std::vector<int> prompt{1, 403, 407, 261, 378};
      std::vector<float> a, b;
      const float* la = clean.forward(prompt.data(), 5, 0, ForwardOptions{});
      a.assign(la, la + 5 * model->config.vocab_size);
      const float* lb = poisoned.forward(prompt.data(), 5, 0, ForwardOptions{});
      b.assign(lb, lb + 5 * model->config.vocab_size);
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << "prefill, policy " << policy_name(pol);
      for (int pos = 5; pos < 30; ++pos) {
        const int tok = (pos * 37) % 512;
        const float* x = clean.forward(&tok, 1, pos, ForwardOptions{});
        a.assign(x, x + model->config.vocab_size);
        const float* y = poisoned.forward(&tok, 1, pos, ForwardOptions{});
        for (int v = 0; v < model->config.vocab_size; ++v) ASSERT_FALSE(std::isnan(y[v]));
        ASSERT_EQ(0, std::memcmp(a.data(), y, a.size() * 4)) << "decode at " << pos << ", policy " << policy_name(pol);
      }
    }
  }
}

TEST(KVCache, StaticCacheEqualsExactSizeCacheBitwise) {
  KVP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  auto model = Model::load(path, DType::F16);
  for (KernelPolicy pol : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant}) {
    for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
      std::vector<std::vector<float>> logits[2];
      for (int exact = 0; exact < 2; ++exact) {
        EngineOptions eo;
        eo.kernels = pol;
        eo.kv_dtype = DType::F16;
        eo.cache_capacity = exact ? 5 + 24 : 0;
        Engine engine(model, eo);
        GenerationConfig g;
        g.max_new_tokens = 24;
        g.cache = mode;
        g.stop_at_eos = false;
        engine.generate({1, 403, 407, 261, 378}, g, nullptr,
                        [&](const StepInfo& s) { logits[exact].emplace_back(s.logits, s.logits + s.vocab); });
      }
      ASSERT_EQ(logits[0].size(), logits[1].size());
      for (size_t s = 0; s < logits[0].size(); ++s)
        ASSERT_EQ(0, std::memcmp(logits[0][s].data(), logits[1][s].data(), logits[0][s].size() * 4))
            << "step " << s << " policy " << policy_name(pol);
    }
  }
}

// Batch caches hold what the batch can write (its longest prompt plus the budget, in steps of
// 256), not the model's context, and that changes no bit: the same batch on an engine whose cache
// is exactly that size gives the same logits under every policy.
TEST(KVCache, BatchCachesHoldWhatTheBatchCanWriteWithTheSameBits) {
  KVP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  auto model = Model::load(path, DType::F16);
  ASSERT_EQ(model->config.max_seq_len, 512);
  const std::vector<std::vector<int>> prompts = {{1, 403, 407, 261, 378}, {1, 300}, {1, 5, 6, 7, 8, 9, 10}};
  for (KernelPolicy pol : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant})
    for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
      GenerationConfig g;
      g.max_new_tokens = 20;
      g.cache = mode;
      g.stop_at_eos = false;
      std::vector<std::vector<float>> logits[2];
      for (int exact = 0; exact < 2; ++exact) {
        EngineOptions eo;
        eo.kernels = pol;
        eo.cache_capacity = exact ? 7 + 20 : 0;
        Engine engine(model, eo);
        engine.generate_batch(prompts, g, nullptr, [&](int b, const StepInfo& s) {
          if (b == 2) logits[exact].emplace_back(s.logits, s.logits + s.vocab);
        });
        EXPECT_EQ(engine.batch_cache_capacities(), std::vector<int>(3, exact ? 27 : 256)) << policy_name(pol);
        if (exact || pol != KernelPolicy::Reference || mode != CacheMode::On) continue;
        // A longer budget grows the caches, up to the context.
        g.max_new_tokens = 300;
        engine.generate_batch(prompts, g, nullptr);
        EXPECT_EQ(engine.batch_cache_capacities(), std::vector<int>(3, 512));
        g.max_new_tokens = 20;
      }
      ASSERT_EQ(logits[0].size(), 20u);
      ASSERT_EQ(logits[0].size(), logits[1].size());
      for (size_t s = 0; s < logits[0].size(); ++s)
        ASSERT_EQ(0, std::memcmp(logits[0][s].data(), logits[1][s].data(), logits[0][s].size() * 4))
            << "step " << s << " policy " << policy_name(pol) << (mode == CacheMode::On ? " cache ON" : " cache OFF");
    }
}

TEST(Formats, FourWaysToLoadStories260KGiveBitwiseIdenticalLogits) {
  KVP_REQUIRE_SHARED(bin, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(hf, "models/stories260K/hf");
  test::TempDir tmp;
  const Checkpoint src = open_checkpoint(bin);
  export_checkpoint(src, "gguf", tmp.file("s.gguf"));
  export_checkpoint(src, "hf", tmp.file("hf_out"));
  const std::vector<int> tokens{1, 403, 407, 261, 378, 432, 383, 286, 261, 376};
  for (DType dt : {DType::F32, DType::F16}) {
    std::vector<float> first;
    for (const std::string& path : {bin, hf, tmp.file("s.gguf"), tmp.file("hf_out")}) {
      auto model = Model::load(path, dt);
      Engine engine(model, EngineOptions{});
      const float* l = engine.forward(tokens.data(), int(tokens.size()), 0, ForwardOptions{});
      std::vector<float> v(l, l + tokens.size() * model->config.vocab_size);
      if (first.empty())
        first = v;
      else
        EXPECT_EQ(0, std::memcmp(first.data(), v.data(), v.size() * 4)) << path << " differs from the .bin";
    }
  }
}

}  // namespace
}  // namespace kvp
