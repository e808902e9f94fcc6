// GSM8K study (issue 7) through the CLI: shard/merge/resume, batches, KV dtypes, flips, timing,
// end-to-end on real models (test_gsm8k_scoring.cpp: extraction, McNemar, options, data).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "cli_run.h"
#include "core/build_info.h"
#include "core/error.h"
#include "lab/gsm8k_eval.h"
#include "lab/gsm8k_prompt.h"
#include "lab/results_log.h"
#include "test_util.h"

namespace kvp {
namespace {

using test::TempDir;

using CliResult = test::CliRun;

using test::kvparity;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Records by key: the order items are written in may differ between runs, their content may not.
std::map<std::string, nlohmann::json> records_by_key(const std::string& dir) {
  std::map<std::string, nlohmann::json> m;
  for (auto& r : ResultsLog::read_all(dir + "/gsm8k.jsonl")) m[r["key"].get<std::string>()] = r;
  return m;
}

// Small settings so each run takes a second or two on the 260K-parameter models; an option in
// `extra` replaces the default of the same name (the CLI takes each option once).
std::string small_eval(const std::string& shared, const std::string& out, const std::string& extra) {
  const std::vector<std::pair<std::string, std::string>> defaults = {
      {"--data", shared + "/data/gsm8k/test.jsonl"}, {"--model", shared + "/models/stories260K/stories260K.bin"},
      {"--conditions", "greedy,temperature:0.7"}, {"--dtypes", "fp16"}, {"--shots", "0"},
      {"--max-new-tokens", "8"}, {"--limit", "4"}, {"--seed", "3"}, {"--out", out}};
  std::string args = "eval gsm8k --no-report " + extra;
  for (const auto& [k, v] : defaults)
    if ((" " + extra + " ").find(" " + k + " ") == std::string::npos) args += " " + k + " " + v;
  return args;
}

TEST(Gsm8kCli, ShardsMergeToTheUnshardedResult) {
  const std::string shared = test::shared_dir();
  if (shared.empty()) return;
  TempDir t;
  ASSERT_EQ(kvparity(small_eval(shared, t.file("all"), "")).status, 0);
  for (int i = 0; i < 3; ++i) {
    const CliResult r = kvparity(small_eval(shared, t.file("s" + std::to_string(i)), fmt::format("--shard {}/3", i)));
    ASSERT_EQ(r.status, 0) << r.err;
  }
  // The builds that wrote each shard (core/build_info.h): the merge lists them all, once each.
  auto manifest_of = [&](const std::string& dir) {
    std::ifstream f(t.file(dir + "/gsm8k_manifest.json"));
    return nlohmann::json::parse(f);
  };
  EXPECT_EQ(manifest_of("s0")["built_by"], nlohmann::json::array({build_description()}));
  auto s1 = manifest_of("s1");
  s1["built_by"] = {"kvparity 0.0.9 (commit old, GNU 11.0.0, without CUDA)", build_description()};
  std::ofstream(t.file("s1/gsm8k_manifest.json")) << s1.dump(2);
  const CliResult m = kvparity(fmt::format("merge {0}/s0 {0}/s1 {0}/s2 --out {0}/merged", t.path()));
  ASSERT_EQ(m.status, 0) << m.err;
  EXPECT_EQ(m.err.find("warning"), std::string::npos) << m.err;
  const auto all = records_by_key(t.file("all")), merged = records_by_key(t.file("merged"));
  EXPECT_EQ(all.size(), 8u);
  EXPECT_EQ(all, merged);
  EXPECT_TRUE(std::filesystem::exists(t.file("merged/report.html")));
  // The shards' timing lines, joined (one a group: every problem of every shard here).
  size_t timing_lines = 0;
  for (int i = 0; i < 3; ++i)
    timing_lines += ResultsLog::read_all(t.file("s" + std::to_string(i) + "/timing.jsonl")).size();
  EXPECT_GT(timing_lines, 0u);
  EXPECT_EQ(ResultsLog::read_all(t.file("merged/timing.jsonl")).size(), timing_lines);
  EXPECT_EQ(manifest_of("merged")["built_by"],
            nlohmann::json::array({build_description(), "kvparity 0.0.9 (commit old, GNU 11.0.0, without CUDA)"}));
  std::ifstream md(t.file("merged/summary.md"));
  const std::string md_text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(md_text.find("built by: " + build_description() + "; kvparity 0.0.9"), std::string::npos) << md_text;

  // A missing shard merges with a warning; a shard of another study is refused.
  const CliResult part = kvparity(fmt::format("merge {0}/s0 {0}/s2 --out {0}/partial --no-report", t.path()));
  EXPECT_EQ(part.status, 0) << part.err;
  EXPECT_NE(part.err.find("1/3"), std::string::npos) << part.err;
  EXPECT_NE(part.err.find("`kvparity eval gsm8k` with the shards' options"), std::string::npos) << part.err;
  // The unsharded run into the merged folder runs what the missing shard would have.
  const CliResult rest = kvparity(small_eval(shared, t.file("partial"), ""));
  ASSERT_EQ(rest.status, 0) << rest.err;
  EXPECT_EQ(records_by_key(t.file("partial")), all);
  ASSERT_EQ(kvparity(small_eval(shared, t.file("other"), "--shard 1/3 --max-new-tokens 6")).status, 0);
  const CliResult bad = kvparity(fmt::format("merge {0}/s0 {0}/other --out {0}/m2", t.path()));
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("max_new_tokens"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("different settings"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(t.file("m2/gsm8k.jsonl")));
  // Merging into a directory that already holds results is refused too.
  EXPECT_EQ(kvparity(fmt::format("merge {0}/s0 --out {0}/s1", t.path())).status, 1);
}

TEST(Gsm8kCli, KilledRunResumesToIdenticalResults) {
  const std::string shared = test::shared_dir();
  if (shared.empty()) return;
  TempDir t;
  ASSERT_EQ(kvparity(small_eval(shared, t.file("ref"), "")).status, 0);
  ASSERT_EQ(kvparity(small_eval(shared, t.file("run"), "")).status, 0);
  // A kill mid-write leaves a torn record: cut the file in the middle of its 5th line.
  const std::string path = t.file("run/gsm8k.jsonl");
  const std::string text = read_text(path);
  size_t pos = 0;
  for (int i = 0; i < 4; ++i) pos = text.find('\n', pos) + 1;
  const size_t cut = pos + (text.find('\n', pos) - pos) / 2;
  std::filesystem::resize_file(path, cut);
  EXPECT_EQ(ResultsLog::read_all(path).size(), 4u);
  const CliResult r = kvparity(small_eval(shared, t.file("run"), ""));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("4 new records"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("4 of 8 records already there are re-used"), std::string::npos) << r.err;
  EXPECT_EQ(records_by_key(t.file("ref")), records_by_key(t.file("run")));
  // A finished run resumes to nothing; a restart with other settings is refused.
  EXPECT_NE(kvparity(small_eval(shared, t.file("run"), "")).out.find("0 new records"), std::string::npos);
  const CliResult other = kvparity(small_eval(shared, t.file("run"), "--seed 4"));
  EXPECT_EQ(other.status, 1);
  EXPECT_NE(other.err.find("seed"), std::string::npos) << other.err;
  const CliResult shard = kvparity(small_eval(shared, t.file("run"), "--shard 0/2"));
  EXPECT_EQ(shard.status, 1);
  EXPECT_NE(shard.err.find("shard"), std::string::npos) << shard.err;
}

TEST(Gsm8kCli, BadInputAndUsageErrors) {
  const std::string shared = test::shared_dir();
  if (shared.empty()) return;
  TempDir t;
  EXPECT_EQ(kvparity(small_eval(shared, t.file("a"), "--shard 3/2")).status, 2);
  EXPECT_EQ(kvparity(small_eval(shared, t.file("a"), "--conditions warm:1")).status, 2);
  const std::string bad = t.file("bad.jsonl");
  std::ofstream(bad) << "{\"question\": \"q\", \"answer\": \"#### 1\"}\n{oops\n";
  const CliResult r = kvparity(fmt::format("eval gsm8k --data {} --model {}/models/stories260K/stories260K.bin --shots 0 "
                                     "--out {}",
                                     bad, shared, t.file("b")));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find(bad + ":2"), std::string::npos) << r.err;
  // Five exemplars do not fit a 512-token context: a clear error naming the lengths and the way out.
  const CliResult longp = kvparity(small_eval(shared, t.file("c"), "--shots 5"));
  EXPECT_EQ(longp.status, 1);
  EXPECT_NE(longp.err.find("context of 512"), std::string::npos) << longp.err;
  EXPECT_NE(longp.err.find("--shots"), std::string::npos) << longp.err;
  // ... or, with --skip-long, skipped records that the report counts apart.
  const CliResult skip = kvparity(small_eval(shared, t.file("d"), "--shots 5 --skip-long --limit 2"));
  ASSERT_EQ(skip.status, 0) << skip.err;
  for (const auto& [k, rec] : records_by_key(t.file("d"))) EXPECT_EQ(rec["skip_reason"], "prompt_too_long") << k;
  EXPECT_EQ(kvparity("report " + t.file("d")).status, 0);
  EXPECT_NE(read_text(t.file("d/summary.md")).find("skipped"), std::string::npos);
}

TEST(Gsm8kCli, InvariantPolicyDoesNotDependOnShardsOrThreads) {
  const std::string shared = test::shared_dir();
  if (shared.empty()) return;
  TempDir t;
  // Batches of 3 over 4 problems: a group of 3 and one of 1 unsharded, groups of 2 in each shard,
  // so items meet different batch partners (or none) from run to run.
  const std::string inv = "--kernels invariant --dtypes fp16,bf16";
  const CliResult a = kvparity(small_eval(shared, t.file("t1"), inv + " --threads 1 --batch-size 1"));
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(kvparity(small_eval(shared, t.file("t2"), inv + " --threads 2 --batch-size 3")).status, 0);
  ASSERT_EQ(kvparity(small_eval(shared, t.file("s0"), inv + " --threads 2 --shard 0/2 --batch-size 3")).status, 0);
  ASSERT_EQ(kvparity(small_eval(shared, t.file("s1"), inv + " --threads 1 --shard 1/2 --batch-size 3")).status, 0);
  ASSERT_EQ(kvparity(fmt::format("merge {0}/s0 {0}/s1 --out {0}/m --no-report", t.path())).status, 0);
  // Records name their sides in full, threads and batch size included: all else must be equal.
  auto without_sides = [](std::map<std::string, nlohmann::json> m) {
    for (auto& [k, r] : m) {
      EXPECT_NE(r["candidate"].get<std::string>().find("threads="), std::string::npos) << k;
      r.erase("baseline");
      r.erase("candidate");
    }
    return m;
  };
  const auto ref = without_sides(records_by_key(t.file("t1")));
  EXPECT_EQ(ref.size(), 16u);
  EXPECT_EQ(ref, without_sides(records_by_key(t.file("t2"))));
  EXPECT_EQ(ref, without_sides(records_by_key(t.file("m"))));
  for (const auto& [k, r] : ref) {
    EXPECT_FALSE(r["diverged"].get<bool>()) << k;
    EXPECT_EQ(r["teacher_forced"]["flips"], 0) << k;
  }
}

// Batched items are written when their group is done; a kill mid-group loses that group's unwritten
// records, and the restart decodes the same group again (standard kernels, where the batch
// partners could matter) and writes only what is missing.
TEST(Gsm8kCli, BatchedRunResumesToIdenticalResults) {
  const std::string shared = test::shared_dir();
  if (shared.empty()) return;
  TempDir t;
  const std::string opts = "--batch-size 3";  // 4 problems: groups of 3 and 1 per condition
  ASSERT_EQ(kvparity(small_eval(shared, t.file("run"), opts)).status, 0);
  const auto ref = records_by_key(t.file("run"));
  ASSERT_EQ(ref.size(), 8u);
  // Keep two records of the first group and half of its third.
  const std::string path = t.file("run/gsm8k.jsonl");
  const std::string text = read_text(path);
  size_t pos = 0;
  for (int i = 0; i < 2; ++i) pos = text.find('\n', pos) + 1;
  std::filesystem::resize_file(path, pos + (text.find('\n', pos) - pos) / 2);
  EXPECT_EQ(ResultsLog::read_all(path).size(), 2u);
  const CliResult r = kvparity(small_eval(shared, t.file("run"), opts));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("6 new records"), std::string::npos) << r.out;
  EXPECT_EQ(ref, records_by_key(t.file("run")));
  EXPECT_NE(kvparity(small_eval(shared, t.file("run"), opts)).out.find("0 new records"), std::string::npos);
}

TEST(Gsm8kCli, EndToEndOnBothRealModels) {
  KVP_REQUIRE_SHARED(stories, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(aidreams, "models/aidreams260K/aidreams260K.bin");
  KVP_REQUIRE_SHARED(data, "data/gsm8k/test.jsonl");
  TempDir t;
  const CliResult r = kvparity(fmt::format("eval gsm8k --data {} --model {} --model {} --tokenizer auto --tokenizer auto "
                                     "--conditions greedy,temperature:0.7,top-p:0.9 --dtypes fp16,fp32 "
                                     "--kernels standard --shots 0 --skip-long --max-new-tokens 12 --limit 5 --seed 1 "
                                     "--out {}",
                                     data, stories, aidreams, t.path()));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto recs = records_by_key(t.path());
  ASSERT_EQ(recs.size(), 2u * 3 * 2 * 5);
  int ok = 0;
  for (const auto& [k, rec] : recs) {
    if (rec["status"] != "ok") continue;
    ++ok;
    const int steps = rec["teacher_forced"]["steps"], flips = rec["teacher_forced"]["flips"];
    EXPECT_EQ(size_t(steps), rec["on"]["ids"].size()) << k;
    EXPECT_LE(flips, steps) << k;
    EXPECT_EQ(rec["diverged"].get<bool>(), !rec["first_divergence"].is_null()) << k;
    if (!rec["diverged"].get<bool>()) {
      EXPECT_EQ(flips, 0) << k;
      EXPECT_EQ(rec["on"]["text"], rec["off"]["text"]) << k;
    } else {
      EXPECT_GE(flips, 1) << k;  // the first divergence is a flip by definition
    }
    for (const char* side : {"on", "off"}) {
      const auto& s = rec[side];
      EXPECT_EQ(s["correct_strict"].get<bool>(), s["strict"].is_string() && s["strict"] == rec["target"]) << k;
      EXPECT_TRUE(s["stop_reason"] == "max_new_tokens" || s["stop_reason"] == "eos" ||
                  s["stop_reason"] == "bos" || s["stop_reason"] == "stop_string" || s["stop_reason"] == "context_full")
          << k;
    }
  }
  EXPECT_GT(ok, 0);
  std::ifstream in(t.file("summary.json"));
  const auto summary = nlohmann::json::parse(in);
  const auto& rows = summary["gsm8k"]["rows"];
  ASSERT_EQ(rows.size(), 12u);
  for (const auto& row : rows) {
    EXPECT_EQ(row["n"].get<int>() + row["skipped"].get<int>(), 5);
    if (row["n"].get<int>() == 0) continue;
    const double on = row["strict"]["accuracy_on"], off = row["strict"]["accuracy_off"];
    EXPECT_NEAR(row["strict"]["delta"].get<double>(), on - off, 1e-12);
    EXPECT_GT(row["strict"]["mcnemar_p"].get<double>(), 0.0);
    EXPECT_LE(row["strict"]["mcnemar_p"].get<double>(), 1.0);
    EXPECT_GE(row["sequence_divergence_rate"].get<double>(), 0.0);
    const double flip = row["token_flip_rate"], div = row["sequence_divergence_rate"];
    EXPECT_LE(flip, 1.0);
    EXPECT_EQ(flip == 0.0, div == 0.0);  // a diverged item has at least its first divergence as a flip
  }
  const std::string md = read_text(t.file("summary.md")), html = read_text(t.file("report.html"));
  EXPECT_NE(md.find("| model | condition | dtype | KV | kernels |"), std::string::npos);
  EXPECT_NE(md.find("stories260K | top-p:0.9 | fp32 | fp32 | standard"), std::string::npos) << md;
  EXPECT_NE(html.find("Accuracy: cache ON vs cache OFF"), std::string::npos);
  EXPECT_NE(html.find("data-series=\"fp16 ON\""), std::string::npos);
  EXPECT_NE(html.find("Sequence divergence rate per dtype"), std::string::npos);
  // `kvparity report` renders the same study again.
  EXPECT_EQ(kvparity("report " + t.path()).status, 0);
}

// --kv-dtypes joins the grid (record key, rows, KV column); --baseline/--candidate SPECs compare
// a quantised cache with the compute-dtype cache, with McNemar rows like the cache study's.
TEST(Gsm8kCli, KvDtypesAndSpecsCompareQuantisedWithFloatCaches) {
  const std::string shared = test::shared_dir();
  if (shared.empty()) return;
  TempDir t;
  // The cache study over two KV types: cache OFF keeps K/V in the compute dtype, so the fp8 rows
  // measure path and quantisation together.
  CliResult r = kvparity(small_eval(shared, t.file("grid"), "--kv-dtypes fp16,fp8_e4m3"));
  ASSERT_EQ(r.status, 0) << r.err;
  auto recs = records_by_key(t.file("grid"));
  ASSERT_EQ(recs.size(), 16u);
  for (const auto& [k, rec] : recs) {
    const std::string kv = rec["kv_dtype"];
    EXPECT_NE(k.find("/kv=" + kv + "/"), std::string::npos) << k;
    EXPECT_NE(rec["candidate"].get<std::string>().find("cache=on,dtype=fp16,kv-dtype=" + kv), std::string::npos);
    EXPECT_NE(rec["baseline"].get<std::string>().find("cache=off,dtype=fp16,kv-dtype=fp16"), std::string::npos);
  }
  ASSERT_EQ(kvparity("report " + t.file("grid")).status, 0);
  std::string md = read_text(t.file("grid/summary.md"));
  EXPECT_NE(md.find("| stories260K | greedy | fp16 | fp8_e4m3 | standard |"), std::string::npos) << md;
  EXPECT_NE(md.find("| stories260K | greedy | fp16 | fp16 | standard |"), std::string::npos) << md;

  // Quantisation alone: both sides cache ON, fp16 KV vs fp8 KV, invariant kernels. The fp8 cache
  // changes generations; the row says so, and the invariant promise is not claimed across KV types.
  const std::string q = "--kernels invariant --baseline kv-dtype=fp16 --candidate kv-dtype=fp8_e4m3";
  r = kvparity(small_eval(shared, t.file("q"), q));
  ASSERT_EQ(r.status, 0) << r.err;
  recs = records_by_key(t.file("q"));
  ASSERT_EQ(recs.size(), 8u);
  int diverged = 0;
  for (const auto& [k, rec] : recs) diverged += rec["diverged"].get<bool>();
  EXPECT_GT(diverged, 0);
  ASSERT_EQ(kvparity("report " + t.file("q")).status, 0);
  const auto summary = nlohmann::json::parse(read_text(t.file("q/summary.json")));
  const auto& row = summary["gsm8k"]["rows"][0];
  EXPECT_FALSE(row.contains("invariant_holds"));
  EXPECT_GT(row["sequence_divergence_rate"].get<double>(), 0.0);
  EXPECT_TRUE(row["strict"].contains("mcnemar_p"));
  md = read_text(t.file("q/summary.md"));
  EXPECT_NE(md.find("candidate (kv-dtype=fp8_e4m3) vs baseline (kv-dtype=fp16)"), std::string::npos) << md;
  EXPECT_NE(md.find("acc cand (strict)"), std::string::npos) << md;

  // A killed SPEC run resumes to the same records; other SPECs on the folder are refused.
  const std::string path = t.file("q/gsm8k.jsonl");
  const std::string full = read_text(path);
  std::filesystem::resize_file(path, full.find('\n', full.find('\n') + 1) + 10);
  r = kvparity(small_eval(shared, t.file("q"), q));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(records_by_key(t.file("q")), recs);
  r = kvparity(small_eval(shared, t.file("q"), "--kernels invariant --baseline kv-dtype=fp16 "
                                               "--candidate kv-dtype=fp8_e5m2"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("candidate"), std::string::npos) << r.err;

  // Identical sides under the invariant kernels: no divergence and the promise holds, batched too.
  r = kvparity(small_eval(shared, t.file("same"), "--kernels invariant --baseline cache=on,batch-size=2 "
                                                  "--candidate cache=on,threads=2"));
  ASSERT_EQ(r.status, 0) << r.err;
  for (const auto& [k, rec] : records_by_key(t.file("same"))) {
    EXPECT_FALSE(rec["diverged"].get<bool>()) << k;
    EXPECT_EQ(rec["teacher_forced"]["flips"], 0) << k;
  }
  ASSERT_EQ(kvparity("report " + t.file("same")).status, 0);
  for (const auto& row2 : nlohmann::json::parse(read_text(t.file("same/summary.json")))["gsm8k"]["rows"])
    EXPECT_TRUE(row2["invariant_holds"].get<bool>());

  // Bad SPECs: exit 2 naming the option and key, nothing written.
  for (const std::string bad : {"--candidate kv-dtype=q9", "--baseline colour=red", "--baseline cache=on,cache=off",
                                "--baseline dtype=fp32 --candidate dtype=fp32 --dtypes fp16,bf16"}) {
    r = kvparity(small_eval(shared, t.file("bad"), bad));
    EXPECT_EQ(r.status, 2) << bad << ": " << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    EXPECT_FALSE(std::filesystem::exists(t.file("bad/gsm8k.jsonl"))) << bad;
  }
}

// The cells of a markdown table column, by header, in row order.
std::vector<std::string> md_column(const std::string& md, const std::string& header) {
  std::vector<std::string> cells;
  auto split = [](const std::string& line) {
    std::vector<std::string> v;
    for (size_t a = line.find('|'), b; a != std::string::npos && (b = line.find('|', a + 1)) != std::string::npos;
         a = b)
      v.push_back(line.substr(a + 2, b - a - 3));
    return v;
  };
  size_t col = std::string::npos;
  for (size_t at = 0, end; at < md.size(); at = end + 1) {
    end = std::min(md.find('\n', at), md.size());
    const std::string line = md.substr(at, end - at);
    if (!line.starts_with("| ")) continue;
    const auto v = split(line);
    if (col == std::string::npos) {
      col = size_t(std::find(v.begin(), v.end(), header) - v.begin());
      if (col == v.size()) return {};
    } else if (!line.starts_with("|---") && col < v.size()) {
      cells.push_back(v[col]);
    }
  }
  return cells;
}

// --no-flips skips only the teacher-forced pass: the free runs, and so everything but
// teacher_forced, are the same. An fp8 candidate cache makes the sides diverge, batched in 3s so
// the batched forced pass is what is skipped.
TEST(Gsm8kCli, NoFlipsChangesNothingButTeacherForced) {
  const std::string shared = test::shared_dir();
  if (shared.empty()) return;
  TempDir t;
  const std::string opts = "--candidate kv-dtype=fp8_e4m3 --batch-size 3";
  CliResult r = kvparity(small_eval(shared, t.file("flips"), opts));
  ASSERT_EQ(r.status, 0) << r.err;
  r = kvparity(small_eval(shared, t.file("nf"), opts + " --no-flips"));
  ASSERT_EQ(r.status, 0) << r.err;
  auto with = records_by_key(t.file("flips")), without = records_by_key(t.file("nf"));
  ASSERT_EQ(with.size(), 8u);
  int diverged = 0;
  for (auto& [k, rec] : without) {
    ASSERT_EQ(rec["status"], "ok") << k;
    ASSERT_TRUE(rec.contains("teacher_forced")) << k;
    EXPECT_TRUE(rec["teacher_forced"].is_null()) << k;
    ASSERT_TRUE(with.count(k)) << k;
    EXPECT_TRUE(with[k]["teacher_forced"].is_object()) << k;
    diverged += rec["diverged"].get<bool>();
    rec.erase("teacher_forced");
    with[k].erase("teacher_forced");
  }
  EXPECT_GT(diverged, 0);  // else first_divergence would agree trivially
  EXPECT_EQ(with, without);
  EXPECT_NE(read_text(t.file("nf/gsm8k_manifest.json")).find("\"flips\": false"), std::string::npos);

  // The report: flips not measured, null in JSON and "–" in the table, never 0.
  ASSERT_EQ(kvparity("report " + t.file("nf")).status, 0);
  const auto rows = nlohmann::json::parse(read_text(t.file("nf/summary.json")))["gsm8k"]["rows"];
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) {
    EXPECT_TRUE(row["token_flip_rate"].is_null()) << row;
    EXPECT_EQ(row["flips_measured"], 0) << row;
    EXPECT_GT(row["sequence_divergence_rate"].get<double>(), 0.0) << row;
  }
  const std::string md = read_text(t.file("nf/summary.md"));
  EXPECT_EQ(md_column(md, "token flips"), (std::vector<std::string>{"–", "–"})) << md;
  EXPECT_NE(md.find("not measured"), std::string::npos) << md;
  EXPECT_NE(read_text(t.file("nf/report.html")).find("not measured"), std::string::npos);
  // With flips the same column holds rates, and no note.
  ASSERT_EQ(kvparity("report " + t.file("flips")).status, 0);
  const std::string md_flips = read_text(t.file("flips/summary.md"));
  const auto cells = md_column(md_flips, "token flips");
  EXPECT_EQ(cells.size(), 2u) << md_flips;
  for (const auto& cell : cells) EXPECT_TRUE(cell.ends_with("%")) << md_flips;
  EXPECT_EQ(md_flips.find("not measured"), std::string::npos) << md_flips;
}

// timing.jsonl: a line per group run, each side's passes and rows exactly those its engine ran
// (cache ON: one prefill pass of the batch's prompts, then a row a sequence a step; cache OFF:
// every step the whole of every sequence still running), its pass time within its wall time.
TEST(Gsm8kCli, TimingFileCountsEverySidesPassesAndRows) {
  const std::string shared = test::shared_dir();
  if (shared.empty()) return;
  TempDir t;
  const std::string opts = "--batch-size 3 --no-flips";  // groups of 3 and 1, per condition
  const CliResult r = kvparity(small_eval(shared, t.file("run"), opts));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("time of this run's 4 groups"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("baseline (cache=off)"), std::string::npos) << r.err;
  std::map<std::pair<std::string, int>, nlohmann::json> by_problem;  // (condition, problem)
  for (const auto& [k, rec] : records_by_key(t.file("run")))
    by_problem[{rec["condition"].get<std::string>(), rec["problem"].get<int>()}] = rec;
  ASSERT_EQ(by_problem.size(), 8u);
  const auto lines = ResultsLog::read_all(t.file("run/timing.jsonl"));
  ASSERT_EQ(lines.size(), 4u);
  for (const auto& line : lines) {
    const int first = line["first_problem"].get<int>();
    ASSERT_TRUE(first == 0 || first == 3) << line;
    const int items = line["items"].get<int>();
    ASSERT_EQ(items, first == 0 ? 3 : 1) << line;
    EXPECT_EQ(line["kernels"], "standard");
    EXPECT_TRUE(line["teacher_forced"].is_null()) << line;
    for (const char* side : {"candidate", "baseline"}) {
      const bool off = std::string(side) == "baseline";
      long long rows = 0, steps = 0;
      for (int p = first; p < first + items; ++p) {
        const auto& rec = by_problem.at({line["condition"].get<std::string>(), p});
        ASSERT_NE(rec[off ? "off" : "on"]["stop_reason"], "stop_string") << "its dropped tokens are not recorded";
        const long long P = rec["prompt_tokens"].get<long long>();
        const long long n = (long long)rec[off ? "off" : "on"]["ids"].size();
        rows += off ? n * P + n * (n - 1) / 2 : P + n - 1;
        steps = std::max(steps, n);
      }
      const auto& s = line[side];
      EXPECT_EQ(s["rows"].get<long long>(), rows) << side << " " << line;
      EXPECT_EQ(s["passes"].get<long long>(), steps) << side << " " << line;
      EXPECT_GT(s["pass_seconds"].get<double>(), 0.0) << side << " " << line;
      EXPECT_GE(s["seconds"].get<double>(), s["pass_seconds"].get<double>()) << side << " " << line;
      EXPECT_GT(s["rows_per_second"].get<double>(), 0.0) << side << " " << line;
    }
  }
  // A resumed run with nothing left to do runs no group and adds no line; a line torn by a kill is
  // cut off, so lines appended later stay readable.
  { std::ofstream(t.file("run/timing.jsonl"), std::ios::app) << "{\"model\": \"torn"; }
  const CliResult again = kvparity(small_eval(shared, t.file("run"), opts));
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(again.err.find("time of this run"), std::string::npos) << again.err;
  EXPECT_EQ(ResultsLog::read_all(t.file("run/timing.jsonl")).size(), 4u);
  EXPECT_EQ(read_text(t.file("run/timing.jsonl")).back(), '\n');
  EXPECT_EQ(read_text(t.file("run/timing.jsonl")).find("torn"), std::string::npos);

  // With flips, the teacher-forced pass is timed on its own.
  const CliResult f = kvparity(small_eval(shared, t.file("flips"), "--batch-size 4 --limit 2"));
  ASSERT_EQ(f.status, 0) << f.err;
  EXPECT_NE(f.err.find("teacher-forced baseline"), std::string::npos) << f.err;
  const auto fl = ResultsLog::read_all(t.file("flips/timing.jsonl"));
  ASSERT_EQ(fl.size(), 2u);  // one group per condition
  for (const auto& line : fl) {
    ASSERT_TRUE(line["teacher_forced"].is_object()) << line;
    EXPECT_GE(line["teacher_forced"]["seconds"].get<double>(), line["teacher_forced"]["pass_seconds"].get<double>());
  }
}

// Whether flips are counted is a setting: resuming either way round, or merging shards of both
// kinds, is refused; a manifest from before the setting counted them.
TEST(Gsm8kCli, NoFlipsIsASettingOfTheRun) {
  const std::string shared = test::shared_dir();
  if (shared.empty()) return;
  TempDir t;
  ASSERT_EQ(kvparity(small_eval(shared, t.file("flips"), "--shard 0/2")).status, 0);
  ASSERT_EQ(kvparity(small_eval(shared, t.file("nf"), "--shard 1/2 --no-flips")).status, 0);
  const auto before = read_text(t.file("nf/gsm8k.jsonl"));
  for (const auto& [dir, extra] : {std::pair{"nf", "--shard 1/2"}, std::pair{"flips", "--shard 0/2 --no-flips"}}) {
    SCOPED_TRACE(dir);
    const CliResult r = kvparity(small_eval(shared, t.file(dir), extra));
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("settings/flips"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--no-flips"), std::string::npos) << r.err;
  }
  EXPECT_EQ(read_text(t.file("nf/gsm8k.jsonl")), before);
  EXPECT_NE(kvparity(small_eval(shared, t.file("nf"), "--shard 1/2 --no-flips")).out.find("0 new records"),
            std::string::npos);
  const CliResult m = kvparity(fmt::format("merge {0}/flips {0}/nf --out {0}/m --no-report", t.path()));
  EXPECT_EQ(m.status, 1) << m.err;
  EXPECT_NE(m.err.find("flips"), std::string::npos) << m.err;

  // An older manifest has no "flips": it resumes as a run that counts them, and not with --no-flips.
  const std::string mpath = t.file("flips/gsm8k_manifest.json");
  auto manifest = nlohmann::json::parse(read_text(mpath));
  ASSERT_EQ(manifest["settings"].erase("flips"), 1u);
  std::ofstream(mpath) << manifest.dump(2);
  EXPECT_EQ(kvparity(small_eval(shared, t.file("flips"), "--shard 0/2 --no-flips")).status, 1);
  const CliResult old = kvparity(small_eval(shared, t.file("flips"), "--shard 0/2"));
  EXPECT_EQ(old.status, 0) << old.err;
  EXPECT_NE(old.out.find("0 new records"), std::string::npos) << old.out;
}

}  // namespace
}  // namespace kvp
