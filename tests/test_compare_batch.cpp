// `kvparity compare --batch-size B`: each fixed group of B prompts is also decoded as one cache-ON
// batch and every record gets a "batch" object comparing it with the prompt's solo cache-ON run.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "lab/compare.h"
#include "lab/report.h"
#include "lab/results_log.h"
#include "test_util.h"

namespace kvp {
namespace {

struct Stories {
  std::string model, tokenizer;
};

// The stories260K files under $KVPARITY_SHARED, or "" with the reason in *why.
Stories find_stories(std::string* why) {
  const char* env = std::getenv("KVPARITY_SHARED");
  if (env == nullptr || *env == '\0') {
    *why = "KVPARITY_SHARED is unset; these tests need $KVPARITY_SHARED/models/stories260K/stories260K.bin and "
           "tok512.bin";
    return {};
  }
  const std::string dir = std::string(env) + "/models/stories260K/";
  for (const char* f : {"stories260K.bin", "tok512.bin"})
    if (!std::filesystem::exists(dir + f)) {
      *why = "missing shared test file: " + dir + f;
      return {};
    }
  return {dir + "stories260K.bin", dir + "tok512.bin"};
}

#define KVP_REQUIRE_STORIES(var)          \
  std::string why_##var;                  \
  const Stories var = find_stories(&why_##var); \
  if (var.model.empty()) FAIL() << why_##var

// Prompts of very different lengths (a single word up to a long sentence), so a batch prefills
// slices of different sizes and its sequences sit at different positions while decoding.
std::vector<Prompt> mixed_prompts() {
  return {{"p0", "Once"},
          {"p1", "The little girl found a shiny red ball in the garden and she wanted to show it to her mom, so"},
          {"p2", "Tom and Sam"},
          {"p3", "One day, a big dog"},
          {"p4", "The sun was hot. The cat slept under the old tree near the river while the birds sang"}};
}

CompareOptions batch_compare(const Stories& s, const std::string& out, KernelPolicy pol, int batch_size) {
  CompareOptions o;
  o.model = s.model;
  o.tokenizer = s.tokenizer;
  o.prompts = mixed_prompts();
  Condition c;
  c.dtype = DType::F16;
  c.kv_dtype = DType::F16;
  c.kernels = pol;
  o.conditions = {c};
  o.max_new_tokens = 24;
  o.seed = 7;
  o.threads = 2;
  o.batch_size = batch_size;
  o.out_dir = out;
  return o;
}

std::map<std::string, nlohmann::json> by_key(const std::string& dir) {
  std::map<std::string, nlohmann::json> m;
  for (auto& r : ResultsLog::read_all(dir + "/results.jsonl"))
    m[r["prompt_id"].get<std::string>() + "\n" + r["condition"].get<std::string>()] = r;
  return m;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Invariant kernels: batched == solo bitwise for every prompt of a mixed-length group (and a
// smaller last group), and the batch changes none of the cache-ON/OFF fields.
TEST(LabCompareBatch, InvariantBatchEqualsSoloForMixedLengthPrompts) {
  KVP_REQUIRE_STORIES(s);
  test::TempDir batched, solo;
  CompareOptions o = batch_compare(s, batched.path(), KernelPolicy::Invariant, 3);
  o.max_new_tokens = 16;
  Condition sampled = o.conditions[0];
  sampled.sampler.kind = SamplerKind::TopP;
  sampled.sampler.top_p = 0.9;
  sampled.sampler.temperature = 0.8;
  o.conditions.push_back(sampled);
  ASSERT_EQ(run_compare(o), 10);
  CompareOptions o1 = o;
  o1.out_dir = solo.path();
  o1.batch_size = 1;
  ASSERT_EQ(run_compare(o1), 10);

  const auto recs = by_key(batched.path()), ref = by_key(solo.path());
  ASSERT_EQ(recs.size(), 10u);
  std::map<std::string, int> index;
  for (size_t i = 0; i < o.prompts.size(); ++i) index[o.prompts[i].id] = int(i);
  for (const auto& [k, r] : recs) {
    ASSERT_TRUE(r.contains("batch")) << k;
    const auto& b = r["batch"];
    const int i = index.at(r["prompt_id"].get<std::string>());
    EXPECT_EQ(b["batch_size"], i < 3 ? 3 : 2) << k;
    EXPECT_EQ(b["slot"], i % 3) << k;
    EXPECT_TRUE(b["first_divergence"].is_null()) << k;
    EXPECT_TRUE(b["logits_bitwise_equal"].get<bool>()) << k;
    EXPECT_EQ(b["max_abs_logit_diff"].get<double>(), 0.0) << k;
    // Everything else is the solo run's record, field for field.
    nlohmann::json without = r;
    without.erase("batch");
    EXPECT_EQ(without, ref.at(k)) << k;
    EXPECT_FALSE(ref.at(k).contains("batch")) << k;
  }

  const auto summary = write_reports(batched.path());
  ASSERT_EQ(summary["conditions"].size(), 2u);
  for (const auto& c : summary["conditions"]) {
    const auto& b = c["batch_vs_solo"];
    ASSERT_TRUE(b.is_object()) << c["condition"];
    EXPECT_EQ(b["n_prompts"], 5);
    EXPECT_EQ(b["batch_sizes"], nlohmann::json::array({2, 3}));
    EXPECT_EQ(b["sequence_divergence_rate"].get<double>(), 0.0);
    EXPECT_EQ(b["logit_difference_rate"].get<double>(), 0.0);
    EXPECT_EQ(b["max_abs_logit_diff"].get<double>(), 0.0);
  }
  EXPECT_NE(read_text(batched.file("summary.md")).find("Batched vs solo"), std::string::npos);
  EXPECT_NE(read_text(batched.file("report.html")).find("class=\"batch\""), std::string::npos);
  // Without --batch-size the summary says so and the reports have no batch section.
  const auto plain = write_reports(solo.path());
  for (const auto& c : plain["conditions"]) EXPECT_TRUE(c["batch_vs_solo"].is_null());
  EXPECT_EQ(read_text(solo.file("summary.md")).find("Batched vs solo"), std::string::npos);
  EXPECT_EQ(read_text(solo.file("report.html")).find("class=\"batch\""), std::string::npos);
}

// Deleting the record of a group's middle member reruns that group (the same batch) and writes
// only the missing record, identical to the one deleted. Standard kernels, where a different batch
// could change the result.
TEST(LabCompareBatch, ResumeAfterDeletingAGroupMemberReproducesIdenticalRecords) {
  KVP_REQUIRE_STORIES(s);
  test::TempDir dir;
  const CompareOptions o = batch_compare(s, dir.path(), KernelPolicy::Standard, 3);
  ASSERT_EQ(run_compare(o), 5);
  const auto before = by_key(dir.path());
  const std::string path = dir.file("results.jsonl");
  std::string kept, line;
  {
    std::ifstream in(path);
    while (std::getline(in, line))
      if (nlohmann::json::parse(line)["prompt_id"] != "p1") kept += line + "\n";
  }
  std::ofstream(path, std::ios::trunc) << kept;
  ASSERT_EQ(ResultsLog::read_all(path).size(), 4u);
  EXPECT_EQ(run_compare(o), 1);
  const auto after = ResultsLog::read_all(path);
  ASSERT_EQ(after.size(), 5u);
  EXPECT_EQ(after.back()["prompt_id"], "p1");
  EXPECT_EQ(after.back()["batch"]["slot"], 1);
  EXPECT_EQ(before, by_key(dir.path()));
  EXPECT_EQ(run_compare(o), 0);
}

// Standard kernels: the batch object is present and self-consistent (whether batching changes
// anything here depends on the GEMM shapes, so it is not asserted), and the summary counts it.
TEST(LabCompareBatch, StandardPolicyBatchFieldsAreConsistent) {
  KVP_REQUIRE_STORIES(s);
  test::TempDir dir;
  const CompareOptions o = batch_compare(s, dir.path(), KernelPolicy::Standard, 4);
  ASSERT_EQ(run_compare(o), 5);
  int diverged = 0, logits_differ = 0;
  double max_diff = 0.0;
  for (const auto& [k, r] : by_key(dir.path())) {
    ASSERT_TRUE(r.contains("batch")) << k;
    const auto& b = r["batch"];
    for (const char* f : {"batch_size", "slot", "first_divergence", "logits_bitwise_equal", "max_abs_logit_diff"})
      EXPECT_TRUE(b.contains(f)) << k << " " << f;
    EXPECT_LT(b["slot"].get<int>(), b["batch_size"].get<int>()) << k;
    const bool equal = b["logits_bitwise_equal"].get<bool>();
    const double d = b["max_abs_logit_diff"].get<double>();
    EXPECT_GE(d, 0.0) << k;
    if (equal) {
      EXPECT_EQ(d, 0.0) << k;
    }
    if (!b["first_divergence"].is_null()) {
      const int fd = b["first_divergence"].get<int>();
      EXPECT_GE(fd, 0) << k;
      EXPECT_LT(fd, o.max_new_tokens) << k;
      // Greedy: a different token at the divergence step needs different logits there.
      EXPECT_FALSE(equal) << k;
      EXPECT_GT(d, 0.0) << k;
      ++diverged;
    }
    logits_differ += !equal;
    max_diff = std::max(max_diff, d);
  }
  std::printf("[ measured ] stories260K fp16 standard, batch of 4 vs solo: tokens differ in %d/5, logits in %d/5, "
              "max |dlogit| %g\n",
              diverged, logits_differ, max_diff);
  const auto summary = write_reports(dir.path());
  const auto& b = summary["conditions"][0]["batch_vs_solo"];
  ASSERT_TRUE(b.is_object());
  EXPECT_EQ(b["n_prompts"], 5);
  EXPECT_EQ(b["batch_sizes"], nlohmann::json::array({1, 4}));
  EXPECT_DOUBLE_EQ(b["sequence_divergence_rate"].get<double>(), diverged / 5.0);
  EXPECT_DOUBLE_EQ(b["logit_difference_rate"].get<double>(), logits_differ / 5.0);
  EXPECT_EQ(b["max_abs_logit_diff"].get<double>(), max_diff);
}

TEST(LabCompareBatch, BatchSizeBelowOneIsAUsageError) {
  CompareOptions o;
  o.prompts = {{"p", "x"}};
  o.conditions = {Condition{}};
  o.batch_size = 0;
  o.out_dir = "/nonexistent-kvparity-dir";
  EXPECT_THROW(run_compare(o), Error);
}

// The CLI: --batch-size and --kernels invariant reach the records.
TEST(CompareBatchCli, BatchSizeFlagWritesBatchObjects) {
  KVP_REQUIRE_STORIES(s);
  test::TempDir t;
  std::ofstream(t.file("prompts.txt")) << "Once upon a time\nThe dog\nA big red ball was in the park and\n";
  const std::string cmd = fmt::format("{} compare --model {} --tokenizer {} --prompts {} --kernels invariant "
                                      "--dtype fp16 --max-new-tokens 6 --batch-size 2 --out {} >{} 2>&1",
                                      KVPARITY_BIN, s.model, s.tokenizer, t.file("prompts.txt"), t.file("out"),
                                      t.file("log"));
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << read_text(t.file("log"));
  const auto recs = ResultsLog::read_all(t.file("out/results.jsonl"));
  ASSERT_EQ(recs.size(), 3u);
  for (const auto& r : recs) {
    EXPECT_EQ(r["kernels"], "invariant");
    EXPECT_TRUE(r["batch"]["logits_bitwise_equal"].get<bool>()) << r["prompt_id"];
    EXPECT_TRUE(r["batch"]["first_divergence"].is_null()) << r["prompt_id"];
  }
  const auto summary = nlohmann::json::parse(read_text(t.file("out/summary.json")));
  EXPECT_EQ(summary["conditions"][0]["batch_vs_solo"]["sequence_divergence_rate"], 0.0);
  // --batch-size 0 is refused by the parser.
  const std::string bad = fmt::format("{} compare --model {} --prompt x --batch-size 0 --out {} >/dev/null 2>&1",
                                      KVPARITY_BIN, s.model, t.file("bad"));
  const int bst = std::system(bad.c_str());
  EXPECT_TRUE(WIFEXITED(bst) && WEXITSTATUS(bst) != 0);
}

}  // namespace
}  // namespace kvp
