// `compare --shard i/n` and `kvparity merge` of compare folders (DESIGN.md §9): the slices of a
// study joined are the unsharded study record for record; what would mix two studies is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "core/build_info.h"
#include "lab/results_log.h"
#include "test_util.h"

namespace kvp {
namespace {

using test::kvparity;
using test::q;
using test::TempDir;

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

nlohmann::json json_at(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, false);
}

// 16 built-in prompts x 2 conditions, a few tokens each: a second per run on stories260K.
std::string shard_study_args(const std::string& out, const std::string& extra) {
  const std::string shared = test::shared_dir();
  return fmt::format(
      "compare --model {} --prompts builtin:stories --dtype fp16 --sampler greedy,top-p --max-new-tokens 12 "
      "--no-report --out {} {}",
      q(shared + "/models/stories260K/stories260K.bin"), q(out), extra);
}

std::map<std::string, nlohmann::json> records_by_item(const std::string& dir) {
  std::map<std::string, nlohmann::json> m;
  for (auto& r : ResultsLog::read_all(dir + "/results.jsonl"))
    m[r["prompt_id"].get<std::string>() + "\n" + r["condition"].get<std::string>()] = r;
  return m;
}

nlohmann::json summary_sans_manifest(const std::string& dir) {
  nlohmann::json s = json_at(dir + "/summary.json");
  s.erase("manifest");
  return s;
}

TEST(CompareShards, ShardsMergeToTheUnshardedRunRecordForRecord) {
  if (test::shared_dir().empty()) return;
  TempDir t;
  ASSERT_EQ(kvparity(shard_study_args(t.file("all"), "")).status, 0);
  size_t sharded = 0;
  for (int i = 0; i < 3; ++i) {
    const auto r = kvparity(shard_study_args(t.file("s" + std::to_string(i)), fmt::format("--shard {}/3", i)));
    ASSERT_EQ(r.status, 0) << r.err;
    for (const auto& rec : ResultsLog::read_all(t.file("s" + std::to_string(i) + "/results.jsonl"))) {
      EXPECT_EQ(rec["prompt_index"].get<int>() % 3, i) << rec.dump();
      ++sharded;
    }
    EXPECT_EQ(json_at(t.file("s" + std::to_string(i) + "/manifest.json"))["commands"]["compare"]["settings"]["shard"],
              (nlohmann::json{{"index", i}, {"count", 3}}));
  }
  EXPECT_EQ(sharded, 32u);
  const auto m = kvparity(
      fmt::format("merge {} {} {} --out {}", q(t.file("s0")), q(t.file("s1")), q(t.file("s2")), q(t.file("merged"))));
  ASSERT_EQ(m.status, 0) << m.err;
  EXPECT_EQ(m.err.find("warning"), std::string::npos) << m.err;
  EXPECT_NE(m.out.find("merged 32 records from 3 directories"), std::string::npos) << m.out;
  // In the unsharded run's order, byte for byte; the manifest pins the unsharded settings.
  EXPECT_EQ(bytes_of(t.file("merged/results.jsonl")), bytes_of(t.file("all/results.jsonl")));
  const nlohmann::json all = json_at(t.file("all/manifest.json")), merged = json_at(t.file("merged/manifest.json"));
  EXPECT_EQ(merged["commands"]["compare"]["settings"], all["commands"]["compare"]["settings"]);
  EXPECT_EQ(merged["commands"]["compare"]["merged_from"].size(), 3u);
  EXPECT_EQ(merged["commands"]["compare"]["missing_shards"], nlohmann::json::array());
  EXPECT_EQ(merged["commands"]["compare"]["built_by"], nlohmann::json::array({build_description()}));
  // The timing of every shard's groups.
  EXPECT_EQ(ResultsLog::read_all(t.file("merged/timing.jsonl")).size(), 32u);
  ASSERT_EQ(kvparity("report " + q(t.file("all"))).status, 0);
  EXPECT_EQ(summary_sans_manifest(t.file("merged")), summary_sans_manifest(t.file("all")));
  // A finished merge resumes as the whole study: nothing left to run.
  const auto again = kvparity(shard_study_args(t.file("merged"), ""));
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.err.find("32 of 32 records already there"), std::string::npos) << again.err;
  EXPECT_EQ(bytes_of(t.file("merged/results.jsonl")), bytes_of(t.file("all/results.jsonl")));
}

TEST(CompareShards, BatchesAreShardedWholeAndStayTheSameBatches) {
  if (test::shared_dir().empty()) return;
  TempDir t;
  // Groups of 3 prompts by index ([0,3), [3,6), ...): shard i of 2 takes the groups g with g mod 2 == i.
  const std::string batch = "--kernels invariant --batch-size 3";
  ASSERT_EQ(kvparity(shard_study_args(t.file("all"), batch)).status, 0);
  for (int i = 0; i < 2; ++i) {
    const auto r = kvparity(shard_study_args(t.file("s" + std::to_string(i)), batch + fmt::format(" --shard {}/2", i)));
    ASSERT_EQ(r.status, 0) << r.err;
    for (const auto& rec : ResultsLog::read_all(t.file("s" + std::to_string(i) + "/results.jsonl"))) {
      EXPECT_EQ(rec["prompt_index"].get<int>() / 3 % 2, i) << rec.dump();
      EXPECT_EQ(rec["batch"]["candidate"]["slot"].get<int>(), rec["prompt_index"].get<int>() % 3) << rec.dump();
    }
  }
  ASSERT_EQ(kvparity(fmt::format("merge {} {} --out {} --no-report", q(t.file("s1")), q(t.file("s0")), q(t.file("m"))))
                .status,
            0);
  EXPECT_EQ(bytes_of(t.file("m/results.jsonl")), bytes_of(t.file("all/results.jsonl")));
}

// --limit N runs the first N prompts of every condition and is not a setting: a larger limit, or
// none, runs on in the same folder to the whole study's records.
TEST(CompareShards, LimitRunsTheFirstPromptsAndALargerLimitRunsOn) {
  if (test::shared_dir().empty()) return;
  TempDir t;
  ASSERT_EQ(kvparity(shard_study_args(t.file("all"), "")).status, 0);
  const auto first = kvparity(shard_study_args(t.file("lim"), "--limit 3"));
  ASSERT_EQ(first.status, 0) << first.err;
  std::map<std::string, int> per_condition;
  for (const auto& rec : ResultsLog::read_all(t.file("lim/results.jsonl"))) {
    EXPECT_LT(rec["prompt_index"].get<int>(), 3) << rec.dump();
    ++per_condition[rec["condition"].get<std::string>()];
  }
  EXPECT_EQ(per_condition.size(), 2u);
  for (const auto& [cond, n] : per_condition) EXPECT_EQ(n, 3) << cond;
  const auto more = kvparity(shard_study_args(t.file("lim"), "--limit 10 --shard 0/1"));
  ASSERT_EQ(more.status, 0) << more.err;
  EXPECT_NE(more.err.find("6 of 20 records already there are re-used"), std::string::npos) << more.err;
  const auto rest = kvparity(shard_study_args(t.file("lim"), ""));
  ASSERT_EQ(rest.status, 0) << rest.err;
  EXPECT_EQ(records_by_item(t.file("lim")), records_by_item(t.file("all")));
  // A limit that leaves one prompt cannot form a batch.
  const auto one = kvparity(shard_study_args(t.file("one"), "--limit 1 --batch-size 2"));
  EXPECT_EQ(one.status, 2);
  EXPECT_NE(one.err.find("--limit 2 or more"), std::string::npos) << one.err;
}

TEST(CompareShards, AMissingShardIsNamedAndTheUnshardedRunCompletesTheMerge) {
  if (test::shared_dir().empty()) return;
  TempDir t;
  ASSERT_EQ(kvparity(shard_study_args(t.file("all"), "")).status, 0);
  for (int i : {0, 2})
    ASSERT_EQ(kvparity(shard_study_args(t.file("s" + std::to_string(i)), fmt::format("--shard {}/3", i))).status, 0);
  const auto m = kvparity(fmt::format("merge {} {} --out {}", q(t.file("s0")), q(t.file("s2")), q(t.file("part"))));
  ASSERT_EQ(m.status, 0) << m.err;
  EXPECT_NE(m.err.find("warning: shards not among the inputs: 1/3"), std::string::npos) << m.err;
  EXPECT_NE(m.err.find("no --shard runs what is missing"), std::string::npos) << m.err;
  EXPECT_EQ(json_at(t.file("part/manifest.json"))["commands"]["compare"]["missing_shards"],
            nlohmann::json::array({"1/3"}));
  // The report says what the folder holds: the inputs, and the shards that were missing.
  const std::string md = bytes_of(t.file("part/summary.md"));
  EXPECT_NE(md.find("merged from: " + t.file("s0") + " (0/3), " + t.file("s2") + " (2/3)"), std::string::npos) << md;
  EXPECT_NE(md.find("shards missing from the merge: 1/3"), std::string::npos) << md;
  ASSERT_EQ(kvparity("report " + q(t.file("s2"))).status, 0);
  EXPECT_NE(bytes_of(t.file("s2/summary.md")).find("  shard: 2/3\n"), std::string::npos);
  const auto rest = kvparity(shard_study_args(t.file("part"), ""));
  ASSERT_EQ(rest.status, 0) << rest.err;
  EXPECT_NE(rest.err.find("22 of 32 records already there"), std::string::npos) << rest.err;
  EXPECT_EQ(records_by_item(t.file("part")), records_by_item(t.file("all")));
  // The completing run keeps the merge's account of where the records came from.
  EXPECT_EQ(json_at(t.file("part/manifest.json"))["commands"]["compare"]["merged_from"].size(), 2u);
}

TEST(CompareShards, WhatWouldMixTwoStudiesIsRefused) {
  const std::string shared = test::shared_dir();
  if (shared.empty()) return;
  TempDir t;
  ASSERT_EQ(kvparity(shard_study_args(t.file("s0"), "--shard 0/3")).status, 0);
  const std::string before = bytes_of(t.file("s0/results.jsonl"));
  // Resuming a shard's folder as another slice, or as the whole study.
  auto r = kvparity(shard_study_args(t.file("s0"), "--shard 1/3"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("holds shard 0/3 but this run is shard 1/3; give each shard its own --out"), std::string::npos)
      << r.err;
  r = kvparity(shard_study_args(t.file("s0"), ""));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("but this run is the whole study (no shard)"), std::string::npos) << r.err;
  EXPECT_EQ(bytes_of(t.file("s0/results.jsonl")), before);
  for (const char* bad : {"3/3", "1/0", "-1/2", "1", "a/b"}) {
    r = kvparity(shard_study_args(t.file("bad"), std::string("--shard ") + bad));
    EXPECT_EQ(r.status, 2) << bad;
    EXPECT_NE(r.err.find("--shard"), std::string::npos) << r.err;
  }

  // A shard of other settings (one option differs), and of another model.
  ASSERT_EQ(kvparity(shard_study_args(t.file("s1x"), "--shard 1/3 --seed 7")).status, 0);
  r = kvparity(fmt::format("merge {} {} --out {}", q(t.file("s0")), q(t.file("s1x")), q(t.file("m"))));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("different settings (settings/seed: 1 vs 7)"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(t.file("m")));
  const std::string other_model = shared + "/models/aidreams260K/aidreams260K.bin";
  ASSERT_EQ(kvparity(fmt::format("compare --model {} --tokenizer {} --prompts builtin:stories --dtype fp16 --sampler "
                                 "greedy,top-p --max-new-tokens 12 --no-report --out {} --shard 1/3",
                                 q(other_model), q(shared + "/models/stories260K/tok512.bin"), q(t.file("s1m"))))
                .status,
            0);
  r = kvparity(fmt::format("merge {} {} --out {}", q(t.file("s0")), q(t.file("s1m")), q(t.file("m"))));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("different models"), std::string::npos) << r.err;

  // Two shards that disagree on a record they both hold (one edited by hand).
  std::filesystem::copy(t.file("s0"), t.file("s0b"), std::filesystem::copy_options::recursive);
  std::string text = bytes_of(t.file("s0b/results.jsonl"));
  const size_t at = text.find("\"seed\":1");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 8, "\"seed\":2");
  std::ofstream(t.file("s0b/results.jsonl"), std::ios::binary) << text;
  r = kvparity(fmt::format("merge {} {} --out {}", q(t.file("s0")), q(t.file("s0b")), q(t.file("m"))));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("disagree on prompt"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/seed: 1 vs 2"), std::string::npos) << r.err;

  // A record or a manifest edited into another shape is named, not read as something else.
  text = bytes_of(t.file("s0/results.jsonl"));
  text.replace(text.find("\"condition\":\""), 13, "\"condition\":5,\"was\":\"");
  std::ofstream(t.file("s0b/results.jsonl"), std::ios::binary) << text;
  r = kvparity(fmt::format("merge {} {} --out {}", q(t.file("s0")), q(t.file("s0b")), q(t.file("m"))));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("s0b/results.jsonl: a record without a string \"prompt_id\" and \"condition\""),
            std::string::npos)
      << r.err;
  nlohmann::json manifest = json_at(t.file("s0b/manifest.json"));
  manifest["commands"]["compare"]["settings"]["shard"]["count"] = "3";
  std::ofstream(t.file("s0b/manifest.json")) << manifest.dump(2);
  r = kvparity(fmt::format("merge {} {} --out {}", q(t.file("s0")), q(t.file("s0b")), q(t.file("m"))));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("s0b/manifest.json: its compare settings are not a kvparity compare run's"), std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(t.file("m")));

  // Folders that are not a compare run's, and an output that already holds results.
  std::filesystem::create_directories(t.file("empty"));
  r = kvparity(fmt::format("merge {} {} --out {}", q(t.file("s0")), q(t.file("empty")), q(t.file("m"))));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("neither a compare nor an `eval gsm8k` output directory"), std::string::npos) << r.err;
  r = kvparity(fmt::format("merge {} {} --out {}", q(t.file("s0")), q(t.file("nowhere")), q(t.file("m"))));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  r = kvparity(fmt::format("merge {} --out {}", q(t.file("s0")), q(t.file("s1x"))));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("merge into an empty directory"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kvp
