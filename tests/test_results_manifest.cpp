// Results folders never mix runs: every lab command pins its model and settings in manifest.json,
// a re-run with anything changed is refused before it touches the folder, and a re-run with the
// same settings resumes and says what it re-used.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "cli_run.h"
#include "core/build_info.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "lab/report_header.h"
#include "lab/results_log.h"
#include "lab/results_manifest.h"
#include "test_util.h"

namespace kvp {
namespace {

namespace fs = std::filesystem;
using test::folder_snapshot;
using test::run_kvparity;
using test::shell_quoted;

void write_text(const std::string& path, const std::string& s) {
  std::ofstream f(path, std::ios::binary);
  f << s;
}

nlohmann::json fake_model(const std::string& fingerprint) {
  return {{"name", "m"}, {"path", "/somewhere/m.bin"}, {"fingerprint", fingerprint}, {"config", {{"dim", 8}}},
          {"tokenizer", "embedded"}};
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ResultsManifest, RefusesOtherSettingsAndModelsOnlyWhenThereAreRecords) {
  test::TempDir tmp;
  const std::string dir = tmp.file("out");
  const nlohmann::json settings = {{"seed", 1}, {"dtypes", {"fp16"}}};
  check_results_manifest(dir, "compare", fake_model("a"), settings, {"results.jsonl"});
  EXPECT_FALSE(fs::exists(dir)) << "checking must not create the folder";
  record_results_manifest(dir, "compare", fake_model("a"), settings, {"results.jsonl"});
  ASSERT_TRUE(fs::exists(dir + "/manifest.json"));

  // No record written yet (the run failed early): other settings may take the folder over.
  nlohmann::json other = settings;
  other["seed"] = 2;
  EXPECT_EQ(error_of([&] { check_results_manifest(dir, "compare", fake_model("a"), other, {"results.jsonl"}); }), "");
  EXPECT_EQ(error_of([&] { check_results_manifest(dir, "compare", fake_model("b"), settings, {"results.jsonl"}); }),
            "");

  write_text(dir + "/results.jsonl", "{\"prompt_id\":\"x\"}\n");
  const auto before = folder_snapshot(dir);
  const std::string e1 =
      error_of([&] { check_results_manifest(dir, "compare", fake_model("a"), other, {"results.jsonl"}); });
  EXPECT_NE(e1.find("compare/settings/seed: 1 vs 2"), std::string::npos) << e1;
  const std::string e2 =
      error_of([&] { check_results_manifest(dir, "compare", fake_model("b"), settings, {"results.jsonl"}); });
  EXPECT_NE(e2.find("another model"), std::string::npos) << e2;
  EXPECT_NE(e2.find("model/fingerprint: \"a\" vs \"b\""), std::string::npos) << e2;
  // Another command with the same model is welcome; its settings are its own.
  EXPECT_EQ(error_of([&] { check_results_manifest(dir, "profile", fake_model("a"), other, {"profile.json"}); }), "");
  EXPECT_EQ(folder_snapshot(dir), before);

  // The same model reached by another path is the same model.
  nlohmann::json moved = fake_model("a");
  moved["path"] = "/elsewhere/m.bin";
  EXPECT_EQ(error_of([&] { check_results_manifest(dir, "compare", moved, settings, {"results.jsonl"}); }), "");
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

// Each command's entry lists the builds that wrote its records, oldest first and each once: a run
// resumed by another build continues the study (built_by is never compared) and the folder says
// so; an entry of other settings starts its list afresh. The reports show the list.
TEST(ResultsManifest, BuildsThatWroteTheRecordsAreListedNotCompared) {
  test::TempDir tmp;
  const std::string dir = tmp.file("out"), path = dir + "/manifest.json";
  const nlohmann::json settings = {{"seed", 1}};
  record_results_manifest(dir, "compare", fake_model("a"), settings, {"results.jsonl"});
  EXPECT_EQ(read_json(path)["commands"]["compare"]["built_by"], nlohmann::json::array({build_description()}));
  write_text(dir + "/results.jsonl", "{\"prompt_id\":\"x\"}\n");

  auto m = read_json(path);
  m["commands"]["compare"]["built_by"] = {"kvparity 0.0.9 (commit old, GNU 11.0.0, without CUDA)"};
  write_text(path, m.dump(2));
  EXPECT_EQ(error_of([&] { check_results_manifest(dir, "compare", fake_model("a"), settings, {"results.jsonl"}); }),
            "");
  record_results_manifest(dir, "compare", fake_model("a"), settings, {"results.jsonl"});
  record_results_manifest(dir, "compare", fake_model("a"), settings, {"results.jsonl"});
  const auto built_by = read_json(path)["commands"]["compare"]["built_by"];
  EXPECT_EQ(built_by,
            nlohmann::json::array({"kvparity 0.0.9 (commit old, GNU 11.0.0, without CUDA)", build_description()}));
  const std::string md = render_manifest_md(read_json(path));
  EXPECT_NE(md.find("built by: kvparity 0.0.9 (commit old, GNU 11.0.0, without CUDA); " + build_description()),
            std::string::npos)
      << md;
  EXPECT_NE(render_manifest_html(read_json(path)).find("built by"), std::string::npos);

  fs::remove(dir + "/results.jsonl");
  record_results_manifest(dir, "compare", fake_model("a"), {{"seed", 2}}, {"results.jsonl"});
  EXPECT_EQ(read_json(path)["commands"]["compare"]["built_by"], nlohmann::json::array({build_description()}));
}

// --version names the build as the folders record it: version, source commit, compiler, CUDA.
TEST(ResultsManifest, VersionNamesTheCommitCompilerAndCuda) {
  const auto r = run_kvparity("--version");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, build_description() + "\n");
  EXPECT_TRUE(std::regex_match(
      build_description(), std::regex(R"(kvparity [0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9a-z.-]+, (GNU|Clang) [0-9.]+, )"
                                      R"((CUDA [0-9.]+|without CUDA)\))")))
      << build_description();
}

TEST(ResultsManifest, ResultsWithoutAManifestAreRefused) {
  test::TempDir tmp;
  write_text(tmp.file("results.jsonl"), "{\"prompt_id\":\"x\"}\n");
  const std::string e =
      error_of([&] { check_results_manifest(tmp.path(), "compare", fake_model("a"), {}, {"results.jsonl"}); });
  EXPECT_NE(e.find("results without a manifest.json"), std::string::npos) << e;
  // An empty file (a run killed before its first record) holds nothing to protect.
  write_text(tmp.file("results.jsonl"), "");
  EXPECT_EQ(error_of([&] { check_results_manifest(tmp.path(), "compare", fake_model("a"), {}, {"results.jsonl"}); }),
            "");
  write_text(tmp.file("manifest.json"), "{\"kind\": \"something else\"}");
  EXPECT_NE(error_of([&] { read_results_manifest(tmp.path()); }).find("not a kvparity results manifest"),
            std::string::npos);
}

TEST(ResultsManifest, PathsJoinWithoutDoubleSlashes) {
  EXPECT_EQ(path_in("out/", "results.jsonl"), "out/results.jsonl");
  EXPECT_EQ(path_in("out", "results.jsonl"), "out/results.jsonl");
  EXPECT_EQ(path_in("/a//b/", "x"), "/a/b/x");
}

TEST(ResultsManifest, ModelIdentityNamesTheTokenizerFound) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  const Checkpoint ckpt = open_checkpoint(model);
  const auto beside = model_identity(ckpt, model, "");
  const auto given = model_identity(ckpt, model, tok);
  EXPECT_EQ(beside["name"], "stories260K");
  EXPECT_EQ(beside["config"]["vocab_size"], 512);
  ASSERT_TRUE(beside["tokenizer"].is_object()) << beside.dump();
  EXPECT_EQ(beside["tokenizer"]["fingerprint"], given["tokenizer"]["fingerprint"]);
}

class CompareFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::shared_file("models/stories260K/stories260K.bin");
    tok_ = test::shared_file("models/stories260K/tok512.bin");
    other_model_ = test::shared_file("models/aidreams260K/aidreams260K.bin");
    other_tok_ = test::shared_file("models/aidreams260K/tok512.bin");
    ASSERT_FALSE(model_.empty() || tok_.empty() || other_model_.empty() || other_tok_.empty());
    prompts_ = tmp_.file("prompts.txt");
    write_text(prompts_, "Once upon a time\nThe cat sat\n");
    out_ = tmp_.file("out/");  // a trailing slash, as shells complete it
  }
  // The CLI takes each option once: an option named in `extra` replaces the default.
  std::string args(const std::string& model, const std::string& tok, const std::string& prompts,
                   const std::string& extra) const {
    std::string a = "compare --model " + shell_quoted(model) + " --tokenizer " + shell_quoted(tok) + " --prompts " +
                    shell_quoted(prompts) + " --out " + shell_quoted(out_) + " " + extra;
    for (const char* d : {"--dtype fp32", "--max-new-tokens 4", "--sampler temperature"})
      if (extra.find(std::string(d).substr(0, std::string(d).find(' ') + 1)) == std::string::npos) a += " " + std::string(d);
    return a;
  }
  std::string base(const std::string& extra = "") const { return args(model_, tok_, prompts_, extra); }

  test::TempDir tmp_;
  std::string model_, tok_, other_model_, other_tok_, prompts_, out_;
};

TEST_F(CompareFolder, EveryChangedSettingIsRefusedAndTheFolderStaysByteIdentical) {
  const auto first = run_kvparity(base());
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_EQ(first.out.find("//"), std::string::npos) << first.out;
  const auto records = ResultsLog::read_all(out_ + "results.jsonl");
  ASSERT_EQ(records.size(), 2u);
  for (const auto& r : records) EXPECT_EQ(r.value("model", std::string()), "stories260K") << r.dump();
  const auto manifest = read_results_manifest(out_);
  ASSERT_TRUE(manifest.is_object());
  EXPECT_EQ(manifest["model"]["name"], "stories260K");
  EXPECT_EQ(manifest["commands"]["compare"]["settings"]["max_new_tokens"], 4);

  const std::string edited = tmp_.file("edited.txt");
  write_text(edited, "Once upon a time there\nThe cat sat\n");
  struct Variant {
    std::string what, args, expect;
  };
  const std::vector<Variant> variants = {
      {"model", args(other_model_, other_tok_, prompts_, ""), "another model"},
      {"seed", base("--seed 99"), "compare/settings/seed: 1 vs 99"},
      {"max-new-tokens", base("--max-new-tokens 5"), "compare/settings/max_new_tokens: 4 vs 5"},
      {"dtype list", base("--dtype fp32,bf16"), "compare/settings/conditions"},
      {"sampler", base("--sampler top-k"), "compare/settings/conditions/0"},
      {"temperature", base("--temperature 0.5"), "compare/settings/conditions/0"},
      {"prompts content", args(model_, tok_, edited, ""), "compare/settings/prompts/hash"},
      {"threads", base("--threads 2"), "compare/settings/conditions/0/baseline"},
      {"candidate", base("--candidate kv-dtype=fp8_e4m3"), "compare/settings/candidate: \"cache=on\" vs \"kv-dtype=fp8_e4m3\""},
      {"baseline", base("--baseline cache=on"), "compare/settings/baseline: \"cache=off\" vs \"cache=on\""},
  };
  const auto before = folder_snapshot(out_);
  for (const auto& v : variants) {
    const auto r = run_kvparity(v.args);
    EXPECT_EQ(r.status, 1) << v.what << ": " << r.err;
    EXPECT_NE(r.err.find("error: "), std::string::npos) << v.what << ": " << r.err;
    EXPECT_NE(r.err.find(v.expect), std::string::npos) << v.what << ": " << r.err;
    EXPECT_EQ(folder_snapshot(out_), before) << v.what << ": the refused run changed the folder";
  }

  // The same settings resume, re-using both records and writing none.
  const auto again = run_kvparity(base());
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.err.find("2 of 2 records already there are re-used"), std::string::npos) << again.err;
  EXPECT_EQ(folder_snapshot(out_)[out_ + "results.jsonl"], before.at(out_ + "results.jsonl"));

  // A profile of another model cannot join this folder; one of the same model can.
  const auto foreign = run_kvparity("profile --model " + shell_quoted(other_model_) + " --tokenizer " +
                                    shell_quoted(other_tok_) + " --dtype fp32 --out " + shell_quoted(out_));
  EXPECT_EQ(foreign.status, 1) << foreign.err;
  EXPECT_NE(foreign.err.find("another model"), std::string::npos) << foreign.err;
  const auto own = run_kvparity("profile --model " + shell_quoted(model_) + " --tokenizer " + shell_quoted(tok_) +
                                " --dtype fp32 --out " + shell_quoted(out_));
  EXPECT_EQ(own.status, 0) << own.err;
  EXPECT_TRUE(read_results_manifest(out_)["commands"].contains("profile"));
}

TEST_F(CompareFolder, LargeSeedsAreWrittenAsStrings) {
  const auto ok = run_kvparity(base("--seed 18446744073709551615"));
  ASSERT_EQ(ok.status, 0) << ok.err;
  for (const auto& rec : ResultsLog::read_all(out_ + "results.jsonl"))
    EXPECT_EQ(rec["seed"], "18446744073709551615") << rec.dump();
  EXPECT_EQ(read_results_manifest(out_)["commands"]["compare"]["settings"]["seed"], "18446744073709551615");
}

TEST(ProfileStep, BeyondTheContextIsRefusedAndTheLastStepIsTheLastPosition) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  // "Once upon a time" is BOS + 4 tokens; step s compares position 5 + s - 1; the context is 512.
  const std::string base = "profile --model " + shell_quoted(model) + " --tokenizer " + shell_quoted(tok) + " --dtype fp32 ";
  for (const char* step : {"508", "509", "600", "1000"}) {
    const auto r = run_kvparity(base + "--step " + step);
    EXPECT_EQ(r.status, 2) << step << ": " << r.err;
    EXPECT_NE(r.err.find(std::string("--step ") + step + " is beyond the context"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("at most 507"), std::string::npos) << r.err;
  }
  const auto last = run_kvparity(base + "--step 507");
  ASSERT_EQ(last.status, 0) << last.err;
  EXPECT_NE(last.out.find("at position 511 (step 507)"), std::string::npos) << last.out;
  const auto first = run_kvparity(base + "--step 1");
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_NE(first.out.find("at position 5 (step 1)"), std::string::npos) << first.out;
}

TEST(ProfilePatchFolders, ChangedSettingsAreRefusedSameSettingsRerun) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  test::TempDir tmp;
  const std::string out = tmp.file("out");
  const std::string m = " --model " + shell_quoted(model) + " --tokenizer " + shell_quoted(tok) + " --out " + shell_quoted(out);
  const auto p1 = run_kvparity("profile --dtype fp32,fp16 --step 2" + m);
  ASSERT_EQ(p1.status, 0) << p1.err;
  auto before = folder_snapshot(out);
  const auto p2 = run_kvparity("profile --dtype fp32,fp16 --step 3" + m);
  EXPECT_EQ(p2.status, 1) << p2.err;
  EXPECT_NE(p2.err.find("profile/settings/step: 2 vs 3"), std::string::npos) << p2.err;
  EXPECT_EQ(folder_snapshot(out), before);
  const auto p3 = run_kvparity("profile --dtype fp32,fp16 --step 2" + m);
  EXPECT_EQ(p3.status, 0) << p3.err;
  auto prof = nlohmann::json::parse(folder_snapshot(out)[out + "/profile.json"]);
  EXPECT_EQ(prof["model"], "stories260K");

  const auto q1 = run_kvparity("patch --dtype fp32 --max-new-tokens 8 --step 2 --continuation 2" + m);
  ASSERT_EQ(q1.status, 0) << q1.err;
  before = folder_snapshot(out);
  const auto q2 = run_kvparity("patch --dtype fp32 --max-new-tokens 8 --step 2 --continuation 3" + m);
  EXPECT_EQ(q2.status, 1) << q2.err;
  EXPECT_NE(q2.err.find("patch/settings/continuation: 2 vs 3"), std::string::npos) << q2.err;
  EXPECT_EQ(folder_snapshot(out), before);
}

}  // namespace
}  // namespace kvp
