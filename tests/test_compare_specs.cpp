// `kvparity compare --baseline SPEC --candidate SPEC` (issue 17): SPEC parsing and resolution, the
// comparisons it opens (identical sides, threads, batch vs solo, quantised KV), teacher forcing on
// every kind of baseline, resume, and the command line. The generator's own teacher forcing is
// test_teacher_forcing.cpp's.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "checking_build.h"
#include "cli_run.h"
#include "compare_test_util.h"
#include "core/error.h"
#include "lab/compare.h"
#include "lab/report.h"
#include "lab/results_log.h"
#include "lab/run_spec.h"
#include "lab/side_runner.h"
#include "model/model.h"
#include "runtime/rng.h"
#include "runtime/sampler.h"
#include "runtime/tokenizer_for_model.h"
#include "test_util.h"

namespace kvp {
namespace {

// A compare of the mixed prompts, fp16, 2 threads, with the given SPECs and sweep samplers.
CompareOptions spec_compare(const Stories& s, const std::string& out, KernelPolicy pol, const std::string& baseline,
                            const std::string& candidate, std::vector<SamplerConfig> samplers = {SamplerConfig{}}) {
  CompareOptions o;
  o.model = s.model;
  o.tokenizer = s.tokenizer;
  o.prompts = mixed_prompts();
  o.baseline = RunSpec::parse(baseline, "--baseline");
  o.candidate = RunSpec::parse(candidate, "--candidate");
  RunDefaults c;
  c.dtype = DType::F16;
  c.kernels = pol;
  c.threads = 2;
  for (const auto& sm : samplers) add_condition(o, c, sm);
  o.max_new_tokens = 24;
  o.seed = 7;
  o.out_dir = out;
  return o;
}

CompareOptions batch_compare(const Stories& s, const std::string& out, KernelPolicy pol, int batch_size,
                             std::vector<SamplerConfig> samplers = {SamplerConfig{}}) {
  return spec_compare(s, out, pol, "cache=on", fmt::format("batch-size={}", batch_size), std::move(samplers));
}

// Every teacher-forced metric array of a results folder, by record key.
std::map<std::string, nlohmann::json> teacher_forced(const std::string& dir) {
  std::map<std::string, nlohmann::json> m;
  for (auto& r : ResultsLog::read_all(dir + "/results.jsonl")) m[r["prompt_id"].get<std::string>()] = r["teacher_forced"];
  return m;
}

std::map<std::string, nlohmann::json> by_key(const std::string& dir) {
  std::map<std::string, nlohmann::json> m;
  for (auto& r : ResultsLog::read_all(dir + "/results.jsonl"))
    m[r["prompt_id"].get<std::string>() + "\n" + r["condition"].get<std::string>()] = r;
  return m;
}

TEST(RunSpec, ParsesEveryKeyAndResolvesAgainstTheCommandsOptions) {
  const RunSpec s = RunSpec::parse(" kv-dtype=q8_0, cache=on ,threads=2,batch-size=4,prefill-chunk=16,kernels=invariant,"
                                   "dtype=bf16,device=cpu",
                                   "--candidate");
  EXPECT_EQ(s.text(),
            "cache=on,dtype=bf16,kv-dtype=q8_0,kernels=invariant,threads=2,batch-size=4,prefill-chunk=16,device=cpu");
  const RunSettings r = s.resolve(RunDefaults{});
  EXPECT_EQ(r.spec(), "cache=on,dtype=bf16,kv-dtype=q8_0,kernels=invariant,threads=2,batch-size=4,prefill-chunk=16");
  // Full settings parse back to themselves.
  EXPECT_EQ(RunSpec::parse(r.spec(), "x").resolve(RunDefaults{}), r);
  // Keys not given take the defaults; the KV type follows the side's dtype unless the command set it.
  RunDefaults d;
  d.dtype = DType::F32;
  d.kernels = KernelPolicy::Reference;
  const RunSettings e = RunSpec::parse("dtype=fp16", "x").resolve(d);
  EXPECT_EQ(e.spec(), "cache=on,dtype=fp16,kv-dtype=fp16,kernels=reference,threads=1,batch-size=1,prefill-chunk=0");
  d.kv_dtype = KvType(KvFormat::Q8_0);
  EXPECT_EQ(RunSpec::parse("", "x").resolve(d).kv_dtype.name(), "q8_0");
  // With cache=off nothing is cached: the command's quantised KV type does not apply to that side.
  EXPECT_EQ(RunSpec::parse("cache=off", "x").resolve(d).kv_dtype.name(), "fp32");
  EXPECT_EQ(RunSpec::parse("", "x").text(), "");
}

TEST(RunSpec, BadSpecsAreUsageErrorsNamingTheOptionAndKey) {
  auto bad = [](const std::string& text, std::initializer_list<const char*> named) {
    SCOPED_TRACE(text);
    const std::string msg = usage_error([&] { RunSpec::parse(text, "--candidate"); });
    EXPECT_NE(msg.find("--candidate"), std::string::npos) << msg;
    for (const char* n : named) EXPECT_NE(msg.find(n), std::string::npos) << msg;
  };
  bad("colour=red", {"unknown key 'colour'", "kv-dtype"});
  bad("cache=maybe", {"cache=maybe"});
  bad("dtype=fp64", {"dtype=fp64"});
  bad("kv-dtype=q9_0", {"kv-dtype=q9_0"});
  bad("kernels=fast", {"kernels=fast"});
  bad("threads=0", {"threads=0"});
  bad("threads=2x", {"threads=2x"});
  bad("batch-size=-1", {"batch-size=-1"});
  bad("threads=1,threads=2", {"'threads'", "twice"});
  bad("cache=on,,threads=2", {"empty item"});
  bad("cache", {"'cache'", "key=value"});
  bad("threads=", {"'threads'", "no value"});
  bad("device=tpu", {"device=tpu", "cpu or cuda"});
  bad("simd=avx3", {"simd=avx3", "auto, avx512, avx2 or scalar"});
  auto unresolvable = [](const std::string& text, std::initializer_list<const char*> named) {
    SCOPED_TRACE(text);
    const RunSpec s = RunSpec::parse(text, "--baseline");
    const std::string msg = usage_error([&] { s.resolve(RunDefaults{}); });
    for (const char* n : named) EXPECT_NE(msg.find(n), std::string::npos) << msg;
  };
  unresolvable("cache=off,kv-dtype=q8_0", {"--baseline", "kv-dtype=q8_0", "cache=off"});
  unresolvable("cache=off,prefill-chunk=4", {"--baseline", "prefill-chunk=4"});
  unresolvable("kernels=reference,threads=2", {"--baseline", "threads=2", "reference"});
}

TEST(RunSpec, SidesKeyOfTheDefaultPairIsTheCacheStudysConditionName) {
  RunDefaults d;
  const RunSettings off = RunSpec::parse(kDefaultBaselineSpec, "b").resolve(d);
  const RunSettings on = RunSpec::parse(kDefaultCandidateSpec, "c").resolve(d);
  EXPECT_EQ(sides_key(off, on), "fp16/kv=fp16/standard");
  RunSettings q = on;
  q.kv_dtype = KvType(KvFormat::Q8_0);
  q.threads = 2;
  EXPECT_EQ(sides_key(on, q), "fp16/kv=fp16->q8_0/standard/cache=on/threads=1->2");
  EXPECT_EQ(sides_key(on, on), "fp16/kv=fp16/standard/cache=on");
}

// Identical sides give exactly zero divergence, every logit bitwise equal, for the invariant
// kernels and (being deterministic) the standard ones; threads 1 vs 2 likewise with invariant.
TEST(LabCompareSpecs, IdenticalSidesAndInvariantThreadsGiveZeroDivergence) {
  KVP_REQUIRE_STORIES(s);
  const std::vector<std::tuple<std::string, std::string, KernelPolicy>> pairs = {
      {"cache=on", "cache=on", KernelPolicy::Invariant},
      {"cache=off", "cache=off", KernelPolicy::Standard},
      {"kv-dtype=fp8_e5m2", "kv-dtype=fp8_e5m2", KernelPolicy::Standard},
      {"threads=1", "threads=2", KernelPolicy::Invariant},
      {"prefill-chunk=3", "cache=on", KernelPolicy::Invariant}};
  for (size_t pi = 0; pi < pairs.size(); ++pi) {
    const auto& [base, cand, pol] = pairs[pi];
    SCOPED_TRACE(base + " vs " + cand);
    std::vector<SamplerConfig> samplers;  // the sanitizer build: each pair with one of the two
    for (size_t si = 0; si < 2; ++si)
      if (test::runs_grid_point(pi, si, 2)) samplers.push_back(si == 0 ? SamplerConfig{} : top_p());
    test::TempDir dir;
    const CompareOptions o = spec_compare(s, dir.path(), pol, base, cand, samplers);
    ASSERT_EQ(run_compare(o), 5 * int(samplers.size()));
    for (const auto& r : ResultsLog::read_all(dir.file("results.jsonl"))) {
      EXPECT_EQ(r["schema_version"], kCompareSchemaVersion);
      EXPECT_TRUE(r["first_divergence"].is_null()) << r["prompt_id"];
      EXPECT_EQ(r["on_ids"], r["off_ids"]);
      EXPECT_EQ(r["on_text"], r["off_text"]);
      const auto& tf = r["teacher_forced"];
      EXPECT_TRUE(tf["logits_bitwise_equal"].get<bool>()) << r["prompt_id"];
      EXPECT_EQ(tf["flips"], 0);
      for (const auto& d : tf["max_abs_logit_diff"]) EXPECT_EQ(d.get<double>(), 0.0);
    }
    const auto summary = write_reports(dir.path());
    for (const auto& c : summary["conditions"]) {
      EXPECT_EQ(c["sequence_divergence_rate"].get<double>(), 0.0);
      EXPECT_EQ(c["logit_difference_rate"].get<double>(), 0.0);
      EXPECT_EQ(c["baseline"], o.conditions[0].baseline.spec());
      EXPECT_EQ(c["candidate"], o.conditions[0].candidate.spec());
    }
  }
}

// timing.jsonl: a line per group (groups of lcm(1, 2) = 2 prompts here), each side's passes and
// rows those its engine ran: cache OFF solo, the whole sequence every step; cache ON in batches of
// 2, the prompts in one pass, then a row a sequence a step.
TEST(LabCompareSpecs, TimingFileCountsEverySidesPassesAndRows) {
  KVP_REQUIRE_STORIES(s);
  test::TempDir dir;
  const CompareOptions o = spec_compare(s, dir.path(), KernelPolicy::Standard, "cache=off", "cache=on,batch-size=2");
  ASSERT_EQ(run_compare(o), 5);
  std::map<std::string, nlohmann::json> rec;
  for (auto& r : ResultsLog::read_all(dir.file("results.jsonl"))) rec[r["prompt_id"].get<std::string>()] = r;
  const auto lines = ResultsLog::read_all(dir.file("timing.jsonl"));
  ASSERT_EQ(lines.size(), 3u);
  const std::vector<std::vector<std::string>> groups = {{"p0", "p1"}, {"p2", "p3"}, {"p4"}};
  for (size_t g = 0; g < 3; ++g) {
    const auto& line = lines[g];
    EXPECT_EQ(line["first_prompt"], groups[g][0]) << line;
    EXPECT_EQ(line["items"], groups[g].size()) << line;
    long long on_rows = 0, off_rows = 0, off_passes = 0, on_passes = 0;
    for (const auto& id : groups[g]) {
      const long long P = (long long)rec.at(id)["prompt_ids"].size();
      const long long on = (long long)rec.at(id)["on_ids"].size(), off = (long long)rec.at(id)["off_ids"].size();
      on_rows += P + on - 1;
      off_rows += off * P + off * (off - 1) / 2;
      off_passes += off;
      on_passes = std::max(on_passes, on);
    }
    EXPECT_EQ(line["candidate"]["rows"].get<long long>(), on_rows) << line;
    EXPECT_EQ(line["candidate"]["passes"].get<long long>(), on_passes) << line;
    EXPECT_EQ(line["baseline"]["rows"].get<long long>(), off_rows) << line;
    EXPECT_EQ(line["baseline"]["passes"].get<long long>(), off_passes) << line;
    for (const char* side : {"candidate", "baseline", "teacher_forced"}) {
      ASSERT_TRUE(line[side].is_object()) << side << line;
      EXPECT_GE(line[side]["seconds"].get<double>(), line[side]["pass_seconds"].get<double>()) << side << line;
    }
  }
}

// A quantised cache against the compute-dtype cache: nonzero logit gaps at every prompt, and the
// record's sides name the KV types.
TEST(LabCompareSpecs, QuantisedKvCacheGivesNonzeroLogitGaps) {
  KVP_REQUIRE_STORIES(s);
  for (const char* kv : {"fp8_e4m3", "fp8_e5m2"}) {
    SCOPED_TRACE(kv);
    test::TempDir dir;
    const CompareOptions o = spec_compare(s, dir.path(), KernelPolicy::Invariant, "kv-dtype=fp16",
                                          std::string("kv-dtype=") + kv);
    EXPECT_EQ(o.conditions[0].key(), fmt::format("fp16/kv=fp16->{}/invariant/cache=on/greedy", kv));
    ASSERT_EQ(run_compare(o), 5);
    for (const auto& r : ResultsLog::read_all(dir.file("results.jsonl"))) {
      EXPECT_EQ(r["kv_dtype"], kv);
      EXPECT_NE(r["candidate"].get<std::string>().find(std::string("kv-dtype=") + kv), std::string::npos);
      EXPECT_NE(r["baseline"].get<std::string>().find("kv-dtype=fp16"), std::string::npos);
      EXPECT_FALSE(r["teacher_forced"]["logits_bitwise_equal"].get<bool>());
      EXPECT_GT(r["teacher_forced"]["max_abs_logit_diff"][0].get<double>(), 0.0) << r["prompt_id"];
    }
  }
}

// Teacher forcing reaches the same numbers by every route: with the invariant kernels cache ON and
// OFF are bitwise equal, and so are solo and batched runs, so a cache-OFF baseline (recomputed
// steps), a cache-ON baseline (a forced run) and a batched cache-ON baseline (a forced batch) must
// give identical teacher-forced metrics against the same diverging candidate.
TEST(LabCompareSpecs, TeacherForcingAgreesForCacheOffCacheOnAndBatchedBaselines) {
  KVP_REQUIRE_STORIES(s);
  const std::string cand = "kv-dtype=fp8_e4m3";
  std::vector<std::map<std::string, nlohmann::json>> runs;
  int diverged = 0;
  for (const char* base : {"cache=off", "cache=on", "cache=on,batch-size=3", "cache=on,batch-size=2,threads=1"}) {
    SCOPED_TRACE(base);
    test::TempDir dir;
    CompareOptions o = spec_compare(s, dir.path(), KernelPolicy::Invariant, base, cand, {SamplerConfig{}});
    o.max_new_tokens = 20;
    ASSERT_EQ(run_compare(o), 5);
    runs.push_back(teacher_forced(dir.path()));
    if (runs.size() == 1)
      for (const auto& r : ResultsLog::read_all(dir.file("results.jsonl"))) diverged += !r["first_divergence"].is_null();
  }
  ASSERT_GT(diverged, 0) << "the candidate must leave the baseline's trajectory for this test to mean anything";
  for (size_t i = 1; i < runs.size(); ++i) EXPECT_EQ(runs[i], runs[0]) << "baseline " << i;
}

// Invariant kernels: a batch of 3 (and a last batch of 2) is bitwise the solo run for every prompt
// of a mixed-length group; the records say where each candidate sequence sat.
TEST(LabCompareSpecs, InvariantBatchEqualsSoloForMixedLengthPrompts) {
  KVP_REQUIRE_STORIES(s);
  test::TempDir dir;
  CompareOptions o = batch_compare(s, dir.path(), KernelPolicy::Invariant, 3, {SamplerConfig{}, top_p()});
  o.max_new_tokens = 16;
  ASSERT_EQ(run_compare(o), 10);
  std::map<std::string, int> index;
  for (size_t i = 0; i < o.prompts.size(); ++i) index[o.prompts[i].id] = int(i);
  for (const auto& [k, r] : by_key(dir.path())) {
    EXPECT_NE(r["condition"].get<std::string>().find("batch-size=1->3"), std::string::npos);
    ASSERT_TRUE(r.contains("batch")) << k;
    const auto& b = r["batch"]["candidate"];
    EXPECT_TRUE(r["batch"]["baseline"].is_null());
    const int i = index.at(r["prompt_id"].get<std::string>());
    EXPECT_EQ(b["batch_size"], i < 3 ? 3 : 2) << k;
    EXPECT_EQ(b["slot"], i % 3) << k;
    EXPECT_TRUE(r["first_divergence"].is_null()) << k;
    EXPECT_TRUE(r["teacher_forced"]["logits_bitwise_equal"].get<bool>()) << k;
  }
  const auto summary = write_reports(dir.path());
  ASSERT_EQ(summary["conditions"].size(), 2u);
  for (const auto& c : summary["conditions"]) {
    EXPECT_EQ(c["differs_in"], nlohmann::json::array({"batch-size"}));
    EXPECT_EQ(c["sequence_divergence_rate"].get<double>(), 0.0);
    EXPECT_EQ(c["logit_difference_rate"].get<double>(), 0.0);
  }
  const std::string md = read_text(dir.file("summary.md"));
  EXPECT_NE(md.find("differing in batch-size"), std::string::npos);
  EXPECT_NE(md.find("batch-size=3"), std::string::npos);
  EXPECT_NE(read_text(dir.file("report.html")).find("class=\"sides\""), std::string::npos);
}

// Deleting the record of a group's middle member reruns that group (the same batch) and writes
// only the missing record, identical to the one deleted. Standard kernels, where a different batch
// could change the result.
TEST(LabCompareSpecs, ResumeAfterDeletingAGroupMemberReproducesIdenticalRecords) {
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
  EXPECT_EQ(after.back()["batch"]["candidate"]["slot"], 1);
  EXPECT_EQ(before, by_key(dir.path()));
  EXPECT_EQ(run_compare(o), 0);
}

// A killed SPEC compare (records cut mid-line) resumes to exactly the uninterrupted run; other
// SPECs on the same folder are refused before anything is written.
TEST(LabCompareSpecs, KilledSpecCompareResumesToTheUninterruptedRun) {
  KVP_REQUIRE_STORIES(s);
  test::TempDir full, killed;
  const auto make = [&](const std::string& out) {
    return spec_compare(s, out, KernelPolicy::Standard, "kv-dtype=fp16,threads=1", "kv-dtype=fp8_e4m3,batch-size=2",
                        {SamplerConfig{}, top_p()});
  };
  ASSERT_EQ(run_compare(make(full.path())), 10);
  std::ifstream in(full.file("results.jsonl"));
  std::string line, kept;
  for (int i = 0; i < 6 && std::getline(in, line); ++i) kept += line + "\n";
  std::getline(in, line);
  kept += line.substr(0, line.size() / 3);
  std::ofstream(killed.file("results.jsonl")) << kept;
  std::filesystem::copy_file(full.file("manifest.json"), killed.file("manifest.json"));
  EXPECT_EQ(run_compare(make(killed.path())), 4);
  EXPECT_EQ(ResultsLog::read_all(full.file("results.jsonl")), ResultsLog::read_all(killed.file("results.jsonl")));
  EXPECT_EQ(run_compare(make(killed.path())), 0);
  CompareOptions other = make(killed.path());
  other.candidate = RunSpec::parse("kv-dtype=fp8_e5m2,batch-size=2", "--candidate");
  other.conditions.clear();
  RunDefaults d;
  d.threads = 2;
  add_condition(other, d, SamplerConfig{});
  const std::string before = read_text(killed.file("results.jsonl"));
  EXPECT_THROW(run_compare(other), Error);
  EXPECT_EQ(read_text(killed.file("results.jsonl")), before);
}

// Standard kernels: the batch objects are self-consistent and the summary counts them (whether
// batching changes anything here depends on the GEMM shapes, so it is not asserted).
TEST(LabCompareSpecs, StandardPolicyBatchFieldsAreConsistent) {
  KVP_REQUIRE_STORIES(s);
  test::TempDir dir;
  const CompareOptions o = batch_compare(s, dir.path(), KernelPolicy::Standard, 4);
  ASSERT_EQ(run_compare(o), 5);
  int diverged = 0, logits_differ = 0;
  double max_diff = 0.0;
  for (const auto& [k, r] : by_key(dir.path())) {
    const auto& b = r["batch"]["candidate"];
    EXPECT_LT(b["slot"].get<int>(), b["batch_size"].get<int>()) << k;
    const auto& tf = r["teacher_forced"];
    const bool equal = tf["logits_bitwise_equal"].get<bool>();
    double d = 0.0;
    for (const auto& x : tf["max_abs_logit_diff"]) d = std::max(d, x.get<double>());
    if (equal) {
      EXPECT_EQ(d, 0.0) << k;
    }
    if (!r["first_divergence"].is_null()) {
      EXPECT_FALSE(equal) << k;  // greedy: a different token needs different logits
      ++diverged;
    }
    logits_differ += !equal;
    max_diff = std::max(max_diff, d);
  }
  std::printf("[ measured ] stories260K fp16 standard, batch of 4 vs solo: tokens differ in %d/5, logits in %d/5, "
              "max |dlogit| %g\n",
              diverged, logits_differ, max_diff);
  const auto summary = write_reports(dir.path());
  const auto& c = summary["conditions"][0];
  EXPECT_DOUBLE_EQ(c["sequence_divergence_rate"].get<double>(), diverged / 5.0);
  EXPECT_DOUBLE_EQ(c["logit_difference_rate"].get<double>(), logits_differ / 5.0);
  EXPECT_EQ(c["max_abs_logit_diff"]["max"].get<double>(), max_diff);
}

// Both SPECs overriding the swept key would run the same comparison twice: refused.
TEST(LabCompareSpecs, SpecsThatCollapseTheSweepAreRefused) {
  CompareOptions o;
  o.baseline = RunSpec::parse("dtype=fp32", "--baseline");
  o.candidate = RunSpec::parse("dtype=fp32,kv-dtype=fp16", "--candidate");
  RunDefaults a, b;
  a.dtype = DType::F16;
  b.dtype = DType::BF16;
  add_condition(o, a, SamplerConfig{});
  const std::string msg = usage_error([&] { add_condition(o, b, SamplerConfig{}); });
  EXPECT_NE(msg.find("same comparison"), std::string::npos) << msg;
}

// The command line: SPECs reach the records; bad SPECs exit 2 naming the key; --batch-size is a
// shorthand that cannot be mixed with SPECs.
TEST(CompareSpecsCli, SpecsAndBatchShorthandReachTheRecords) {
  KVP_REQUIRE_STORIES(s);
  test::TempDir t;
  std::ofstream(t.file("prompts.txt")) << "Once upon a time\nThe dog\nA big red ball was in the park and\n";
  const std::string base = fmt::format("compare --model {} --tokenizer {} --prompts {} --dtype fp16 --max-new-tokens 6 ",
                                       s.model, s.tokenizer, t.file("prompts.txt"));
  test::CliRun r = test::run_kvparity(base + "--kernels invariant --batch-size 2 --out " + t.file("b"));
  ASSERT_EQ(r.status, 0) << r.err;
  auto recs = ResultsLog::read_all(t.file("b/results.jsonl"));
  ASSERT_EQ(recs.size(), 3u);
  for (const auto& rec : recs) {
    EXPECT_EQ(rec["condition"], "fp16/kv=fp16/invariant/cache=on/batch-size=1->2/greedy");
    EXPECT_TRUE(rec["teacher_forced"]["logits_bitwise_equal"].get<bool>()) << rec["prompt_id"];
  }
  r = test::run_kvparity(base + "--baseline 'kv-dtype=fp16' --candidate 'kv-dtype=fp8_e5m2,threads=2' --out " +
                         t.file("q"));
  ASSERT_EQ(r.status, 0) << r.err;
  recs = ResultsLog::read_all(t.file("q/results.jsonl"));
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0]["candidate"], "cache=on,dtype=fp16,kv-dtype=fp8_e5m2,kernels=standard,threads=2,batch-size=1,"
                                  "prefill-chunk=0");
  EXPECT_NE(read_text(t.file("q/summary.md")).find("differing in kv-dtype, threads"), std::string::npos);

  auto usage = [&](const std::string& args, std::initializer_list<const char*> named) {
    SCOPED_TRACE(args);
    const test::CliRun u = test::run_kvparity(base + args + " --out " + t.file("bad"));
    EXPECT_EQ(u.status, 2) << u.err;
    EXPECT_EQ(u.err.rfind("error: ", 0), 0u) << u.err;
    for (const char* n : named) EXPECT_NE(u.err.find(n), std::string::npos) << u.err;
  };
  usage("--candidate colour=red", {"--candidate", "'colour'"});
  usage("--baseline threads=abc", {"--baseline", "threads=abc"});
  usage("--candidate threads=1,threads=2", {"--candidate", "'threads'", "twice"});
  usage("--baseline cache=off,kv-dtype=q8_0", {"--baseline", "kv-dtype=q8_0"});
  usage("--batch-size 2 --candidate threads=2", {"--batch-size", "--candidate"});
  EXPECT_FALSE(std::filesystem::exists(t.file("bad/results.jsonl")));
}

}  // namespace
}  // namespace kvp
