#pragma once
// The invariance battery of issue 5 (tests/test_invariant.cpp), shared with the CUDA suite: one
// model, dtype and sampler through cache ON vs OFF, threads 2 vs 1, prefill chunks 1 and 7, an
// exact-size cache vs the static one, and a batch of 4 mixed-length sequences vs each alone.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "runtime/generator.h"
#include "runtime/sampler.h"

namespace kvp::test {

// Every step's logits of a run, with its tokens.
struct Trace {
  std::vector<int> ids;
  std::vector<std::vector<float>> logits;  // per step
};

// Bitwise equality of two traces: the same tokens and every step's logits bit for bit.
inline ::testing::AssertionResult same_trace(const Trace& a, const Trace& b) {
  if (a.ids != b.ids) {
    size_t i = 0;
    while (i < a.ids.size() && i < b.ids.size() && a.ids[i] == b.ids[i]) ++i;
    return ::testing::AssertionFailure() << "tokens differ from generated index " << i;
  }
  if (a.logits.size() != b.logits.size()) return ::testing::AssertionFailure() << "step counts differ";
  for (size_t s = 0; s < a.logits.size(); ++s)
    if (a.logits[s].size() != b.logits[s].size() ||
        std::memcmp(a.logits[s].data(), b.logits[s].data(), a.logits[s].size() * sizeof(float)) != 0)
      return ::testing::AssertionFailure() << "logits differ at step " << s;
  return ::testing::AssertionSuccess();
}

struct Setup {
  std::shared_ptr<const Model> model;
  EngineOptions eo;
  GenerationConfig gen;
};

inline Trace solo(const Setup& s, const std::vector<int>& prompt, uint64_t sequence_id = 0) {
  Engine e(s.model, s.eo);
  GenerationConfig g = s.gen;
  g.sequence_id = sequence_id;
  Trace t;
  t.ids = e.generate(prompt, g, nullptr, [&](const StepInfo& i) { t.logits.emplace_back(i.logits, i.logits + i.vocab); })
              .output_ids;
  return t;
}

inline std::vector<Trace> batch(const Setup& s, const std::vector<std::vector<int>>& prompts) {
  Engine e(s.model, s.eo);
  std::vector<Trace> t(prompts.size());
  const auto r = e.generate_batch(prompts, s.gen, nullptr, [&](int b, const StepInfo& i) {
    t[size_t(b)].logits.emplace_back(i.logits, i.logits + i.vocab);
  });
  for (size_t b = 0; b < r.size(); ++b) t[b].ids = r[b].output_ids;
  return t;
}

// Prompts of mixed lengths; the longest plus the generated tokens passes the 64-key attention
// tile, so decode steps fold a partial tile on top of full ones.
inline std::vector<std::vector<int>> prompts_for(int vocab, int bos) {
  std::vector<std::vector<int>> p;
  for (int len : {29, 5, 17, 1}) {
    std::vector<int> q;
    for (int i = 0; i < len; ++i) q.push_back((i == 0 && bos >= 0) ? bos : (i * 131 + len * 7 + 3) % vocab);
    p.push_back(q);
  }
  return p;
}

struct Counts {
  int comparisons = 0, differing = 0;
};

// Runs the comparisons of issue 5 for one model/dtype/sampler. With `expect_equal` every one must
// be bitwise equal; otherwise the differences are only counted.
inline void run_battery(const std::string& label, const std::shared_ptr<const Model>& model, KernelPolicy pol,
                        const SamplerConfig& sampler, int n_new, bool full, bool expect_equal, Counts& counts,
                        Device device = Device::Cpu) {
  Setup base;
  base.model = model;
  base.eo.device = device;
  base.eo.kernels = pol;
  base.eo.threads = 1;
  base.eo.kv_dtype = model->dtype;
  base.gen.max_new_tokens = n_new;
  base.gen.stop_at_eos = false;
  base.gen.sampler = sampler;
  base.gen.seed = 20240607;
  const auto prompts = prompts_for(model->config.vocab_size, model->config.bos_id);
  const auto& prompt = prompts[0];
  const Trace ref = solo(base, prompt);
  ASSERT_EQ(int(ref.ids.size()), n_new) << label;

  auto compare = [&](const std::string& what, const Trace& t) {
    ++counts.comparisons;
    const auto r = same_trace(ref, t);
    if (!r) ++counts.differing;
    if (expect_equal) {
      EXPECT_TRUE(r) << label << ": " << what;
    }
  };
  {
    Setup s = base;
    s.gen.cache = CacheMode::Off;
    compare("cache OFF vs ON", solo(s, prompt));
  }
  {
    Setup s = base;
    s.eo.threads = 2;
    compare("threads 2 vs 1", solo(s, prompt));
  }
  for (int chunk : {1, 7}) {
    if (!full && chunk == 1) continue;
    Setup s = base;
    s.eo.prefill_chunk = chunk;
    compare("prefill chunk " + std::to_string(chunk), solo(s, prompt));
  }
  if (full) {
    Setup s = base;
    s.eo.cache_capacity = int(prompt.size()) + n_new;
    compare("exact-size cache vs static", solo(s, prompt));
  }
  {
    // Batch of 4 mixed lengths (batched prefill, then M = 4 decode) vs each sequence alone.
    Setup s = base;
    s.eo.threads = 2;
    s.eo.prefill_chunk = full ? 0 : 7;
    const auto tb = batch(s, prompts);
    ASSERT_EQ(tb.size(), prompts.size());
    compare("batch slot 0 vs solo", tb[0]);
    if (full || !expect_equal)
      for (size_t b = 1; b < prompts.size(); ++b) {
        ++counts.comparisons;
        const auto r = same_trace(solo(base, prompts[b], b), tb[b]);
        if (!r) ++counts.differing;
        if (expect_equal) {
          EXPECT_TRUE(r) << label << ": batch slot " << b << " vs solo";
        }
      }
  }
}

inline SamplerConfig greedy() { return SamplerConfig{}; }
inline SamplerConfig top_p() {
  SamplerConfig s;
  s.kind = SamplerKind::TopP;
  s.top_p = 0.9;
  s.temperature = 1.0;
  return s;
}

}  // namespace kvp::test
