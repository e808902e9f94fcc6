// The generator's teacher forcing (what compare's and eval gsm8k's teacher-forced metrics stand
// on): forced runs, skipped steps, forced batches, and the flips' choices without logits.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "checking_build.h"
#include "compare_test_util.h"
#include "lab/run_spec.h"
#include "lab/side_runner.h"
#include "model/model.h"
#include "runtime/generator.h"
#include "runtime/rng.h"
#include "runtime/sampler.h"
#include "runtime/tokenizer_for_model.h"

namespace kvp {
namespace {

// The generator's teacher forcing: a run forced along its own free-running tokens is that run; a
// forced run takes exactly the given tokens and ends with them; with cache OFF, skipped steps leave
// the later rows unchanged; forced batches equal forced solo runs (invariant kernels); and bad
// forcing is refused.
TEST(TeacherForcing, ForcedRunsTakeTheGivenTokensAndSkippedStepsChangeNothing) {
  KVP_REQUIRE_STORIES(s);
  const Checkpoint ck = open_checkpoint(s.model);
  std::shared_ptr<const Model> model(Model::from_checkpoint(ck, DType::F16));
  EngineOptions eo;
  eo.kernels = KernelPolicy::Invariant;
  Engine engine(model, eo);
  const std::vector<int> prompt = {1, 403, 407, 261, 378};
  GenerationConfig g;
  g.max_new_tokens = 12;
  g.sampler = top_p();
  g.seed = 3;
  g.sequence_id = 9;
  g.stop_at_eos = false;
  StepLogits free_logits, forced_logits;
  auto into = [](StepLogits& l) {
    return [&l](const StepInfo& st) { l.emplace_back(st.logits, st.logits + st.vocab); };
  };
  const auto free_run = engine.generate(prompt, g, nullptr, into(free_logits));
  g.forced_tokens = {free_run.output_ids};
  const auto again = engine.generate(prompt, g, nullptr, into(forced_logits));
  EXPECT_EQ(again.output_ids, free_run.output_ids);
  EXPECT_EQ(forced_logits, free_logits);

  // Arbitrary tokens, fewer than max_new_tokens: the run takes them and ends.
  const std::vector<int> path = {5, 17, 300, 2, 44, 44, 9};
  g.forced_tokens = {path};
  StepLogits on, off, skipped;
  const auto on_run = engine.generate(prompt, g, nullptr, into(on));
  EXPECT_EQ(on_run.output_ids, path);
  EXPECT_EQ(on_run.stop_reason, "forced_end");
  g.cache = CacheMode::Off;
  engine.generate(prompt, g, nullptr, into(off));
  EXPECT_EQ(off, on);  // invariant kernels: cache ON == OFF along any trajectory
  g.forced_skip = 4;
  const auto skip_run = engine.generate(prompt, g, nullptr, into(skipped));
  EXPECT_EQ(skip_run.output_ids, path);
  ASSERT_EQ(skipped.size(), path.size() - 4);
  for (size_t i = 0; i < skipped.size(); ++i) EXPECT_EQ(skipped[i], off[4 + i]) << "step " << 4 + i;

  // A forced batch is its members' forced solo runs.
  g.cache = CacheMode::On;
  g.forced_skip = 0;
  const std::vector<std::vector<int>> prompts = {prompt, {1, 22}, {1, 99, 98, 97, 96, 95, 94}};
  const std::vector<std::vector<int>> paths = {path, {7, 7}, {100, 101, 102, 103, 104}};
  g.forced_tokens = paths;
  std::vector<StepLogits> batched(3);
  const auto res = engine.generate_batch(prompts, {11, 12, 13}, g, nullptr, [&](int b, const StepInfo& st) {
    batched[size_t(b)].emplace_back(st.logits, st.logits + st.vocab);
  });
  for (size_t b = 0; b < 3; ++b) {
    EXPECT_EQ(res[b].output_ids, paths[b]);
    GenerationConfig solo = g;
    solo.forced_tokens = {paths[b]};
    solo.sequence_id = 11 + b;
    StepLogits one;
    engine.generate(prompts[b], solo, nullptr, into(one));
    EXPECT_EQ(one, batched[b]) << "sequence " << b;
  }

  GenerationConfig bad = g;
  bad.forced_tokens = {{model->config.vocab_size}};
  EXPECT_NE(usage_error([&] { engine.generate(prompt, bad, nullptr); }).find("outside the vocabulary"),
            std::string::npos);
  bad.forced_tokens = {path};
  bad.forced_skip = 2;  // cache ON needs every step
  EXPECT_NE(usage_error([&] { engine.generate(prompt, bad, nullptr); }).find("cache OFF"), std::string::npos);
  bad.forced_tokens = {path, path};
  bad.forced_skip = 0;
  EXPECT_NE(usage_error([&] { engine.generate(prompt, bad, nullptr); }).find("2 forced trajectories"),
            std::string::npos);
}

// eval gsm8k's flips keep no logits: teacher_force_choices gives, at every step, exactly the token
// the same draw picks from teacher_force's logits (shared steps from the free run's own tokens,
// the rest from forced runs), for cache-OFF, cache-ON and batched baselines and both samplers.
TEST(TeacherForcing, ChoicesAreTheForcedLogitsSampledWithTheSameDraws) {
  KVP_REQUIRE_STORIES(s);
  const Checkpoint ck = open_checkpoint(s.model);
  std::shared_ptr<const Model> model(Model::from_checkpoint(ck, DType::F16));
  RunDefaults d;
  d.dtype = DType::F16;
  d.kernels = KernelPolicy::Standard;
  d.threads = 2;
  const auto tok = tokenizer_for_model(*model, s.tokenizer);
  std::vector<SidePrompt> group;
  for (const auto& p : mixed_prompts()) group.push_back({tok->encode(p.text, true), 100 + group.size()});
  auto want = [](size_t i) { return i != 2; };  // an unwanted prompt gets nothing
  SideRunner cand(RunSpec::parse("kv-dtype=fp8_e4m3", "--candidate").resolve(d), model);
  int forced_steps_differ = 0;
  const char* const base_specs[] = {"cache=off", "cache=on", "cache=on,batch-size=3", "cache=off,batch-size=2"};
  const SamplerConfig samplers[] = {SamplerConfig{}, top_p()};
  for (size_t bi = 0; bi < std::size(base_specs); ++bi) {
    const char* base_spec = base_specs[bi];
    for (size_t si = 0; si < std::size(samplers); ++si) {
      if (!test::runs_grid_point(bi, si, 2)) continue;  // sanitizer build: each baseline with one sampler
      const SamplerConfig& sampler = samplers[si];
      SCOPED_TRACE(std::string(base_spec) + " " + sampler.describe());
      SideRunner base(RunSpec::parse(base_spec, "--baseline").resolve(d), model);
      GenerationConfig g;
      g.max_new_tokens = 16;
      g.sampler = sampler;
      g.seed = 7;
      g.stop_at_eos = false;
      const auto cand_runs = cand.generate(group, g, tok.get(), want, false);
      const auto plain = base.generate(group, g, tok.get(), want, false);
      auto with_logits = base.generate(group, g, tok.get(), want, true);
      const auto forced_choices = base.teacher_force_choices(group, g, tok.get(), cand_runs, plain, want);
      std::vector<std::vector<int>> choices;
      for (const auto& c : forced_choices) {
        choices.push_back(c.tokens);
        EXPECT_TRUE(c.experts.empty()) << "a dense model has no routing";
      }
      const auto forced = base.teacher_force(group, g, tok.get(), cand_runs, with_logits, want);
      ASSERT_EQ(choices.size(), group.size());
      for (size_t i = 0; i < group.size(); ++i) {
        if (!want(i)) {
          EXPECT_TRUE(choices[i].empty());
          continue;
        }
        ASSERT_EQ(choices[i].size(), cand_runs[i].trajectory.size()) << i;
        const StepLogits& logits = forced[i].logits;
        ASSERT_EQ(logits.size(), choices[i].size()) << i;
        EXPECT_TRUE(forced[i].experts.empty()) << "a dense model has no routing";
        for (size_t t = 0; t < choices[i].size(); ++t) {
          const double u = uniform_at(g.seed, group[i].sequence_id, t);
          EXPECT_EQ(choices[i][t], sample_token(logits[t].data(), int(logits[t].size()), sampler, u))
              << "prompt " << i << " step " << t;
          forced_steps_differ += choices[i][t] != cand_runs[i].trajectory[t];
        }
      }
    }
  }
  EXPECT_GT(forced_steps_differ, 0) << "no flip anywhere: the forced runs were never exercised";
}

}  // namespace
}  // namespace kvp
