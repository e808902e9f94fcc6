// A mixture of experts' routing as the runtime reports it (StepInfo::experts: the experts of the
// row each step's token comes from) and as `compare` and `eval gsm8k` measure it (records'
// teacher_forced.routing, the summaries' routing, the reports' tables; docs/metrics.md, "Routing").
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "cli_run.h"
#include "lab/compare.h"
#include "lab/report.h"
#include "lab/results_log.h"
#include "lab/routing_difference.h"
#include "lab/summary.h"
#include "model/model.h"
#include "model/moe_routing.h"
#include "model/synthetic.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

const char* const kRoutedFamilies[] = {"mixtral", "qwen2_moe", "qwen3_moe", "olmoe"};

// Every sparse layer's router logits of one pass, by layer.
struct RouterLogitsOfPass final : ForwardHooks {
  std::map<int, std::vector<float>> logits;
  bool wants(HookPoint p, int) const override { return p == HookPoint::RouterLogits; }
  bool writes(HookPoint, int) const override { return false; }
  void on(const HookSite& s, float* d) override { logits[s.layer].assign(d, d + size_t(s.rows) * s.width); }
};

std::string text_of(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::shared_ptr<const Model> tiny(const char* family, DType dtype) {
  return Model::from_checkpoint(synthesize_checkpoint(synthetic_config(family, "tiny"), DType::F32), dtype);
}

std::vector<int> prompt_of(const ModelConfig& c, int n, int salt) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(3 + (i * 37 + salt * 11) % (c.vocab_size - 3));
  return v;
}

// StepInfo::experts is what the routing of the last row of the step's pass chose: the same pass
// run again with a router hook, routed as the model routes, gives those experts at every step, on
// both cache paths (the step's last row: the decode row, the prefill's last, cache OFF's last).
TEST(MoeStepRouting, StepInfoNamesTheExpertsOfTheRowEachTokenComesFrom) {
  for (const char* fam : kRoutedFamilies) {
    SCOPED_TRACE(fam);
    const auto model = tiny(fam, DType::F16);
    const ModelConfig& c = model->config;
    const size_t k = size_t(c.moe.n_used);
    EngineOptions eo;
    eo.kernels = KernelPolicy::Invariant;
    for (CacheMode cache : {CacheMode::Off, CacheMode::On}) {
      Engine e(model, eo);
      GenerationConfig g;
      g.max_new_tokens = 30;
      g.cache = cache;
      g.stop_at_eos = false;
      std::vector<std::vector<int>> steps;
      const std::vector<int> prompt = prompt_of(c, 5, 1);
      const GenerationResult r = e.generate(prompt, g, nullptr, [&](const StepInfo& s) {
        ASSERT_NE(s.experts, nullptr);
        ASSERT_EQ(s.experts_size, c.n_layers * int(k));
        steps.emplace_back(s.experts, s.experts + s.experts_size);
      });
      ASSERT_EQ(steps.size(), r.output_ids.size());
      std::vector<int> seq = prompt;
      for (size_t s = 0; s < steps.size(); ++s) {
        Engine again(model, eo);
        RouterLogitsOfPass cap;
        ForwardOptions fo;
        fo.hooks = &cap;
        again.forward_uncached(seq.data(), int(seq.size()), fo);
        for (int l = 0; l < c.n_layers; ++l) {
          const std::vector<int> got(steps[s].begin() + std::ptrdiff_t(size_t(l) * k),
                                     steps[s].begin() + std::ptrdiff_t(size_t(l + 1) * k));
          if (!c.moe_layer(l)) {
            EXPECT_EQ(got, std::vector<int>(k, -1)) << "dense layer " << l;
            continue;
          }
          const std::vector<float>& v = cap.logits.at(l);
          const float* last = v.data() + (seq.size() - 1) * size_t(c.moe.n_experts);
          const ExpertRouting want = route_experts(last, 1, c.moe.n_experts, int(k), c.moe.norm_topk_prob, DType::F16);
          EXPECT_EQ(got, want.expert) << "step " << s << " layer " << l;
        }
        seq.push_back(r.output_ids[s]);
      }
    }
  }
}

// In a batch each sequence gets its own row's routing: under `invariant` the same experts as alone,
// prefilled in chunks or not. A dense model reports none.
TEST(MoeStepRouting, EachSequenceOfABatchGetsItsOwnRouting) {
  const auto model = tiny("qwen2_moe", DType::F16);
  const ModelConfig& c = model->config;
  const std::vector<std::vector<int>> prompts = {prompt_of(c, 3, 1), prompt_of(c, 9, 2), prompt_of(c, 5, 3)};
  GenerationConfig g;
  g.max_new_tokens = 5;
  g.stop_at_eos = false;
  for (CacheMode cache : {CacheMode::On, CacheMode::Off}) {
    g.cache = cache;
    EngineOptions eo;
    eo.kernels = KernelPolicy::Invariant;
    eo.prefill_chunk = cache == CacheMode::On ? 4 : 0;
    Engine batch(model, eo);
    std::vector<std::vector<std::vector<int>>> got(prompts.size());
    batch.generate_batch(prompts, g, nullptr,
                         [&](int b, const StepInfo& s) { got[size_t(b)].emplace_back(s.experts, s.experts + s.experts_size); });
    for (size_t b = 0; b < prompts.size(); ++b) {
      Engine solo(model, eo);
      GenerationConfig gs = g;
      gs.sequence_id = b;
      std::vector<std::vector<int>> want;
      solo.generate(prompts[b], gs, nullptr, [&](const StepInfo& s) { want.emplace_back(s.experts, s.experts + s.experts_size); });
      EXPECT_EQ(got[b], want) << "sequence " << b << (cache == CacheMode::On ? " cache ON" : " cache OFF");
    }
    // The three prompts are not all routed alike (else this would not tell sequences apart).
    EXPECT_TRUE(got[0] != got[1] || got[1] != got[2]);
  }
  const auto dense = Model::from_checkpoint(synthesize_checkpoint(synthetic_config("llama", "tiny"), DType::F32), DType::F32);
  Engine e(dense, EngineOptions{});
  g.cache = CacheMode::On;
  e.generate(prompt_of(dense->config, 4, 1), g, nullptr, [&](const StepInfo& s) {
    EXPECT_EQ(s.experts, nullptr);
    EXPECT_EQ(s.experts_size, 0);
  });
}

nlohmann::json record_with_routing(const std::string& id, nlohmann::json first_div, const std::vector<int>& per_step,
                                   nlohmann::json first_step, const std::vector<nlohmann::json>& layer_flips) {
  const size_t n = per_step.size();
  nlohmann::json zeros = std::vector<double>(n, 0.0);
  int steps_differ = 0;
  for (int x : per_step) steps_differ += x > 0;
  nlohmann::json flips = nlohmann::json::array();
  for (const auto& f : layer_flips) flips.push_back(f);
  return {{"prompt_id", id},
          {"condition", "fp16/kv=fp16/standard/greedy"},
          {"dtype", "fp16"}, {"kv_dtype", "fp16"}, {"kernels", "standard"}, {"sampler", "greedy"}, {"control", false},
          {"max_new_tokens", int(n)},
          {"first_divergence", first_div},
          {"teacher_forced",
           {{"on_token", std::vector<int>(n, 5)},
            {"max_abs_logit_diff", zeros}, {"mean_abs_logit_diff", zeros}, {"kl", zeros}, {"top1_margin", zeros},
            {"flips", 0}, {"logits_bitwise_equal", false},
            {"routing",
             {{"sparse_layers", 2}, {"experts_per_token", 2}, {"n_experts", 8}, {"layers_differ", per_step},
              {"steps_differ", steps_differ}, {"first_step", first_step}, {"first_layers", nlohmann::json::array()},
              {"layer_flips", flips}}}}}};
}

// The summary's routing figures from records whose counts are known, and the report's table.
TEST(CompareRouting, SummaryCountsLayerStepsStepsPromptsAndDivergencesAfterAFlip) {
  std::vector<nlohmann::json> recs = {
      // Diverged at 3, routing first differed at 1: a divergence after a routing difference.
      record_with_routing("a", 3, {0, 2, 0, 1}, 1, {nullptr, 2, 1}),
      // Diverged at 0, routing first differed at 2: the divergence came first.
      record_with_routing("b", 0, {0, 0, 1, 0}, 2, {nullptr, 0, 1}),
      // No divergence, no routing difference.
      record_with_routing("c", nullptr, {0, 0, 0, 0}, nullptr, {nullptr, 0, 0}),
  };
  const nlohmann::json s = summarize_compare(recs);
  ASSERT_EQ(s["conditions"].size(), 1u);
  const nlohmann::json& r = s["conditions"][0]["routing"];
  EXPECT_EQ(r["records"], 3);
  EXPECT_DOUBLE_EQ(r["layer_flip_rate"].get<double>(), 4.0 / (12 * 2));  // 4 layer-steps of 12 steps x 2 layers
  EXPECT_DOUBLE_EQ(r["step_flip_rate"].get<double>(), 3.0 / 12);
  EXPECT_DOUBLE_EQ(r["prompt_rate"].get<double>(), 2.0 / 3);
  EXPECT_EQ(r["divergences_after_routing_flip"]["count"], 1);
  EXPECT_EQ(r["divergences_after_routing_flip"]["of"], 2);
  EXPECT_DOUBLE_EQ(r["first_routing_difference_index"]["median"].get<double>(), 1.5);
  EXPECT_EQ(r["layer_flips"], nlohmann::json::parse("[null, 2, 2]"));
  const std::string md = render_summary_md(s);
  EXPECT_NE(md.find("## Routing"), std::string::npos) << md;
  EXPECT_NE(md.find("| 2 of 8, 2 sparse layers | 16.7% | 25.0% | 66.7% | 1 of 2 | 1.5 | L1 (2), L2 (2) |"),
            std::string::npos)
      << md;
  // A dense model's records carry no routing: no figures, no table.
  for (auto& rec : recs) rec["teacher_forced"].erase("routing");
  const nlohmann::json dense = summarize_compare(recs);
  EXPECT_FALSE(dense["conditions"][0].contains("routing"));
  EXPECT_EQ(render_summary_md(dense).find("## Routing"), std::string::npos);
}

// One tally for compare's and eval gsm8k's summaries: a routing object that lacks a field, or has
// one of the wrong type, is refused by name rather than read as zero.
TEST(CompareRouting, TallyRefusesARoutingRecordThatLacksAField) {
  const nlohmann::json rec = record_with_routing("a", 3, {0, 2, 0, 1}, 1, {nullptr, 2, 1});
  RoutingTally t;
  t.add(rec["teacher_forced"]["routing"], rec["first_divergence"]);
  EXPECT_EQ(t.records(), 1);
  EXPECT_EQ(t.layer_flips(), 3);
  EXPECT_EQ(t.to_json()["divergences_after_routing_flip"]["count"], 1);
  nlohmann::json bad = rec["teacher_forced"]["routing"];
  bad.erase("steps_differ");
  EXPECT_NE(test::error_of([&] { RoutingTally().add(bad, nullptr); }).find("steps_differ"), std::string::npos);
  bad = rec["teacher_forced"]["routing"];
  bad["first_step"] = "one";
  EXPECT_NE(test::error_of([&] { RoutingTally().add(bad, nullptr); }).find("teacher_forced.routing"), std::string::npos);
}

// End to end on a tiny Qwen3-MoE: the invariant kernels route cache ON and OFF alike everywhere;
// a coarse FP8 cache routes some rows elsewhere than an fp16 one, and the records, summary and
// report say where.
TEST(CompareRouting, CompareRecordsWhereTheSidesRoutedDifferently) {
  test::TempDir t;
  const std::string m = t.file("q3moe");
  ASSERT_EQ(test::kvparity("synth --arch qwen3_moe --out " + test::shell_quoted(m)).status, 0);
  const std::string common = "compare --model " + test::shell_quoted(m) +
                             " --prompts builtin:stories --limit 6 --max-new-tokens 24 --dtype fp16 ";
  const auto same = test::kvparity(common + "--kernels invariant --out " + test::shell_quoted(t.file("inv")));
  ASSERT_EQ(same.status, 0) << same.err;
  for (const auto& rec : ResultsLog::read_all(t.file("inv") + "/results.jsonl")) {
    const auto& r = rec["teacher_forced"]["routing"];
    EXPECT_EQ(r["sparse_layers"], 3);
    EXPECT_EQ(r["experts_per_token"], 3);
    EXPECT_EQ(r["steps_differ"], 0);
    EXPECT_TRUE(r["first_step"].is_null());
    EXPECT_EQ(r["layers_differ"].size(), rec["teacher_forced"]["on_token"].size());
  }
  const auto fp8 = test::kvparity(common + "--kernels standard --baseline kv-dtype=fp16 --candidate kv-dtype=fp8_e5m2 --out " +
                                  test::shell_quoted(t.file("fp8")));
  ASSERT_EQ(fp8.status, 0) << fp8.err;
  int differ = 0;
  for (const auto& rec : ResultsLog::read_all(t.file("fp8") + "/results.jsonl")) {
    const auto& r = rec["teacher_forced"]["routing"];
    int total = 0;
    for (const auto& n : r["layers_differ"]) total += n.get<int>();
    int by_layer = 0;
    for (const auto& n : r["layer_flips"]) by_layer += n.is_null() ? 0 : n.get<int>();
    EXPECT_EQ(total, by_layer);
    EXPECT_TRUE(r["layer_flips"][2].is_null()) << "layer 2 of the tiny Qwen3-MoE is dense";
    if (!r["first_step"].is_null()) {
      EXPECT_GT(r["layers_differ"][r["first_step"].get<size_t>()].get<int>(), 0);
      EXPECT_FALSE(r["first_layers"].empty());
    }
    differ += total;
  }
  EXPECT_GT(differ, 0) << "an FP8 E5M2 cache never changed the routing";
  const std::string md = text_of(t.file("fp8") + "/summary.md");
  EXPECT_NE(md.find("## Routing"), std::string::npos);
  EXPECT_NE(text_of(t.file("fp8") + "/report.html").find("<h2>Routing</h2>"), std::string::npos);
}

// eval gsm8k records the routing beside its flips, from the same teacher-forced pass: along the
// candidate's tokens, no routing difference under `invariant`, and the summary's Routing table.
TEST(CompareRouting, Gsm8kRecordsTheRoutingBesideItsFlips) {
  KVP_REQUIRE_SHARED(data, "data/gsm8k/test.jsonl");
  test::TempDir t;
  const std::string m = t.file("q3moe");
  ASSERT_EQ(test::kvparity("synth --arch qwen3_moe --out " + test::shell_quoted(m)).status, 0);
  const auto r = test::kvparity("eval gsm8k --data " + test::shell_quoted(data) + " --model " + test::shell_quoted(m) +
                                " --shots 0 --limit 4 --max-new-tokens 16 --dtypes bf16 --kernels standard,invariant "
                                "--skip-long --out " + test::shell_quoted(t.file("g")));
  ASSERT_EQ(r.status, 0) << r.err;
  int ok = 0;
  for (const auto& rec : ResultsLog::read_all(t.file("g") + "/gsm8k.jsonl")) {
    if (rec["status"] != "ok") continue;
    ++ok;
    const auto& tf = rec["teacher_forced"];
    ASSERT_TRUE(tf.contains("routing")) << rec.dump();
    EXPECT_EQ(tf["routing"]["layers_differ"].size(), tf["steps"].get<size_t>());
    EXPECT_EQ(tf["routing"]["sparse_layers"], 3);
    if (rec["kernels"] == "invariant") EXPECT_TRUE(tf["routing"]["first_step"].is_null()) << rec.dump();
  }
  EXPECT_GT(ok, 0);
  const nlohmann::json s = nlohmann::json::parse(text_of(t.file("g") + "/summary.json"))["gsm8k"];
  for (const auto& row : s["rows"]) {
    ASSERT_TRUE(row.contains("routing")) << row.dump();
    // compare's fields too (one tally): per layer, the dense layer 2 null.
    ASSERT_EQ(row["routing"]["layer_flips"].size(), 4u) << row.dump();
    EXPECT_TRUE(row["routing"]["layer_flips"][2].is_null());
    EXPECT_TRUE(row["routing"].contains("step_flip_rate"));
    if (row["kernels"] == "invariant") {
      EXPECT_EQ(row["routing"]["layer_flip_rate"], 0.0);
      EXPECT_TRUE(row["invariant_holds"].get<bool>());
    }
  }
  EXPECT_NE(text_of(t.file("g") + "/summary.md").find("## Routing"), std::string::npos);
}

}  // namespace
}  // namespace kvp
