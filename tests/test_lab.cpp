// The divergence lab: metric definitions, crash-safe results, `compare` invariants on a real
// model, resume after a kill, and the reports.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lab/compare.h"
#include "lab/layer_profile.h"
#include "lab/report.h"
#include "lab/results_log.h"
#include "lab/side_timing.h"
#include "lab/stats.h"
#include "lab/step_metrics.h"
#include "lab/summary.h"
#include "test_util.h"

namespace kvp {
namespace {

TEST(LabStats, QuantilesInterpolateLikeNumpy) {
  const Distribution d = summarize({4, 1, 3, 2, 5, 6, 7, 8, 9, 10});
  EXPECT_EQ(d.n, 10u);
  EXPECT_DOUBLE_EQ(d.min, 1);
  EXPECT_DOUBLE_EQ(d.max, 10);
  EXPECT_DOUBLE_EQ(d.median, 5.5);
  EXPECT_NEAR(d.p90, 9.1, 1e-12);
  EXPECT_DOUBLE_EQ(d.mean, 5.5);
  EXPECT_TRUE(summarize({}).to_json()["median"].is_null());
  const Histogram h = histogram({0, 1, 5, 9, 9}, 10, 5);
  EXPECT_EQ(h.counts, (std::vector<int>{2, 0, 1, 0, 2}));
}

TEST(LabMetrics, StepMetricsMatchHandComputedValues) {
  const float a[3] = {1.0f, 2.0f, 3.0f};
  StepMetrics same = step_metrics(a, a, 3);
  EXPECT_EQ(same.max_abs_logit_diff, 0.0);
  EXPECT_EQ(same.kl, 0.0);
  EXPECT_DOUBLE_EQ(same.top1_margin, 1.0);
  const float b[3] = {1.0f, 2.5f, 3.0f};
  const StepMetrics m = step_metrics(a, b, 3);
  EXPECT_DOUBLE_EQ(m.max_abs_logit_diff, 0.5);
  EXPECT_NEAR(m.mean_abs_logit_diff, 0.5 / 3, 1e-12);
  // KL(p||q) by hand in double.
  double zp = std::exp(1.0) + std::exp(2.0) + std::exp(3.0), zq = std::exp(1.0) + std::exp(2.5) + std::exp(3.0);
  double kl = 0;
  const double la[3] = {1, 2, 3}, lb[3] = {1, 2.5, 3};
  for (int i = 0; i < 3; ++i) {
    const double p = std::exp(la[i]) / zp, q = std::exp(lb[i]) / zq;
    kl += p * std::log(p / q);
  }
  EXPECT_NEAR(m.kl, kl, 1e-12);
}

std::string key_of(const nlohmann::json& r) { return r.value("k", std::string()); }

TEST(LabResults, TornLastRecordIsDroppedAndAppendingResumes) {
  test::TempDir tmp;
  const std::string path = tmp.file("r.jsonl");
  {
    ResultsLog log(path, key_of);
    log.append({{"k", "a"}, {"v", 1}});
    log.append({{"k", "b"}, {"v", 2}});
  }
  {  // a kill in the middle of the third record
    std::ofstream out(path, std::ios::app);
    out << R"({"k": "c", "v": 3, "pad)";
  }
  ResultsLog log(path, key_of);
  EXPECT_EQ(log.records().size(), 2u);
  EXPECT_TRUE(log.has("a"));
  EXPECT_FALSE(log.has("c"));
  log.append({{"k", "c"}, {"v", 3}});
  const auto all = ResultsLog::read_all(path);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[2]["v"], 3);
}

CompareOptions small_compare(const std::string& model, const std::string& out, DType dt, KernelPolicy pol) {
  CompareOptions o;
  o.model = model;
  o.prompts = load_prompts("builtin:stories");
  o.prompts.resize(6);
  RunDefaults c;
  c.dtype = dt;
  c.kernels = pol;
  add_condition(o, c, SamplerConfig{});
  o.max_new_tokens = 40;
  o.out_dir = out;
  return o;
}

TEST(LabCompare, Fp32ReferenceHasNoFlipsAndInvariantsHold) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  test::TempDir tmp;
  CompareOptions o = small_compare(model, tmp.path(), DType::F32, KernelPolicy::Reference);
  RunDefaults half;
  half.dtype = DType::F16;
  half.kernels = KernelPolicy::Standard;
  add_condition(o, half, SamplerConfig{});
  SamplerConfig sampled;
  sampled.kind = SamplerKind::TopP;
  sampled.temperature = 0.8;
  add_condition(o, half, sampled);
  EXPECT_EQ(run_compare(o), 18);
  const auto summary = write_reports(tmp.path());
  for (const auto& r : ResultsLog::read_all(tmp.path() + "/results.jsonl")) {
    const auto on = r["on_ids"].get<std::vector<int>>(), off = r["off_ids"].get<std::vector<int>>();
    ASSERT_EQ(on.size(), 40u);
    const int fd = r["first_divergence"].is_null() ? int(on.size()) : r["first_divergence"].get<int>();
    for (int i = 0; i < fd; ++i) ASSERT_EQ(on[size_t(i)], off[size_t(i)]) << "prefixes before the first divergence";
    if (fd < int(on.size())) {
      EXPECT_NE(on[size_t(fd)], off[size_t(fd)]);
    }
    // Up to the first divergence the teacher-forced cache-OFF choice is the free-running one.
    const auto tf_off = r["teacher_forced"]["off_token"].get<std::vector<int>>();
    for (int i = 0; i < std::min(fd + 1, int(off.size())); ++i) EXPECT_EQ(tf_off[size_t(i)], off[size_t(i)]);
    if (r["dtype"] == "fp32") {
      EXPECT_TRUE(r["first_divergence"].is_null());
      EXPECT_EQ(r["teacher_forced"]["flips"], 0);
    }
  }
  for (const auto& c : summary["conditions"]) {
    EXPECT_LE(c["token_flip_rate"].get<double>(), c["sequence_divergence_rate"].get<double>() + 1e-12)
        << c["condition"];
    for (const char* k : {"sequence_divergence_rate", "token_flip_rate", "first_divergence_index",
                          "max_abs_logit_diff", "kl", "n_prompts", "n_steps"})
      EXPECT_TRUE(c.contains(k)) << k;
    for (const char* s : {"min", "median", "p90", "max", "mean"}) EXPECT_TRUE(c["kl"].contains(s));
    if (c["dtype"] == "fp32") {
      EXPECT_EQ(c["token_flip_rate"].get<double>(), 0.0);
    }
  }
  EXPECT_EQ(summary["schema_version"], kSummarySchemaVersion);
  for (const char* f : {"summary.json", "summary.md", "report.html"})
    EXPECT_TRUE(std::filesystem::exists(tmp.file(f))) << f;
}

TEST(LabCompare, ResumeAfterAKillEqualsAnUninterruptedRun) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  test::TempDir full, killed;
  run_compare(small_compare(model, full.path(), DType::F16, KernelPolicy::Standard));
  // Simulate a kill: keep the first 3 records and half of the 4th.
  std::ifstream in(full.file("results.jsonl"));
  std::string line, kept;
  for (int i = 0; i < 3 && std::getline(in, line); ++i) kept += line + "\n";
  std::getline(in, line);
  kept += line.substr(0, line.size() / 2);
  std::ofstream(killed.file("results.jsonl")) << kept;
  std::filesystem::copy_file(full.file("manifest.json"), killed.file("manifest.json"));
  EXPECT_EQ(run_compare(small_compare(model, killed.path(), DType::F16, KernelPolicy::Standard)), 3);
  const auto a = ResultsLog::read_all(full.file("results.jsonl"));
  const auto b = ResultsLog::read_all(killed.file("results.jsonl"));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "record " << i;
  EXPECT_EQ(run_compare(small_compare(model, killed.path(), DType::F16, KernelPolicy::Standard)), 0);
}

TEST(LabReport, HtmlIsSelfContainedWithChartData) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  test::TempDir tmp;
  CompareOptions o = small_compare(model, tmp.path(), DType::F16, KernelPolicy::Standard);
  EXPECT_EQ(add_fp32_controls(o), 1);
  run_compare(o);
  const auto summary = write_reports(tmp.path());
  ASSERT_EQ(summary["fp32_control"].size(), 1u);
  std::ifstream in(tmp.file("report.html"));
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Self-contained: no scripts, stylesheets or images fetched from anywhere.
  for (const char* external : {"<script", "<link", "<img", "https://", "src="})
    EXPECT_EQ(html.find(external), std::string::npos) << external;
  EXPECT_NE(html.find("class=\"chart line log-y\""), std::string::npos);
  EXPECT_NE(html.find("class=\"chart bars\""), std::string::npos);
  // One point per generated token index for each condition's per-step |Δlogit| curve (non-zero ones).
  size_t points = 0;
  for (size_t p = html.find("class=\"point\""); p != std::string::npos; p = html.find("class=\"point\"", p + 1)) ++points;
  EXPECT_GT(points, 10u);
}

}  // namespace
}  // namespace kvp

namespace kvp {
namespace {

TEST(LabProfile, ReferencePolicyIsBitwiseEqualAndStandardShowsWhereDivergenceIsBorn) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  ProfileOptions o;
  o.model = model;
  o.step = 40;
  o.kernels = KernelPolicy::Reference;
  o.dtypes = {DType::F32, DType::F16};
  for (const auto& p : run_profile(o)) {
    EXPECT_EQ(p.logits.max, 0.0) << p.dtype;
    for (const auto& L : p.layers) {
      EXPECT_EQ(L.resid_post.max, 0.0);
      for (const auto& k : L.k) EXPECT_EQ(k.max, 0.0);
    }
  }
  o.kernels = KernelPolicy::Standard;
  const auto std_prof = run_profile(o);
  const auto j = profile_json(std_prof, o);
  ASSERT_EQ(j["profiles"].size(), 2u);
  EXPECT_EQ(j["profiles"][0]["layers"].size(), 5u);
  EXPECT_EQ(j["profiles"][0]["layers"][0]["k"].size(), 4u);  // one entry per KV head
  double fp16_max = 0;
  for (const auto& L : std_prof[1].layers) fp16_max = std::max(fp16_max, L.resid_post.max);
  std::cout << "[report] stories260K standard fp16 step 40: max residual |Δ| " << fp16_max << ", logits "
            << std_prof[1].logits.max << "\n";
  EXPECT_GT(std_prof[0].logits.max, 0.0) << "fp32 standard: GEMV vs GEMM orders should differ in the last bits";
}

// The totals say when the teacher-forced pass had nothing to do, rather than timing nothing.
TEST(StudyTiming, TotalsSayWhenNoSequenceNeededTheTeacherForcedPass) {
  test::TempDir tmp;
  SideTime side;
  side.seconds = 0.5;
  side.passes = {0.4, 8, 80};
  for (const bool diverged : {false, true}) {
    std::filesystem::create_directories(tmp.file(diverged ? "d" : "n"));
    StudyTiming timing(tmp.file(diverged ? "d" : "n"));
    SideTime forced;
    if (diverged) forced = side;
    timing.group({{"model", "m"}}, side, side, &forced);
    std::ostringstream out;
    timing.print_totals(out, "cache=on", "cache=off");
    EXPECT_EQ(out.str().find("no pass (no sequence diverged)") != std::string::npos, !diverged) << out.str();
    EXPECT_EQ(out.str().find("teacher-forced baseline 0.5 s") != std::string::npos, diverged) << out.str();
  }
}

}  // namespace
}  // namespace kvp
