// `profile` and `patch` between any two sides (--baseline/--candidate SPECs): the default sides
// reproduce the cache study exactly, sides the invariant kernels promise to agree on measure zero
// everywhere, a quantised KV cache shows up from the first layer's K on, and sides these single-
// sequence analyses cannot run are usage errors naming the option and key.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "core/error.h"
#include "lab/layer_profile.h"
#include "lab/patching.h"
#include "test_util.h"

namespace kvp {
namespace {

ProfileOptions stories_profile(const std::string& model, const std::string& tok) {
  ProfileOptions o;
  o.model = model;
  o.tokenizer = tok;
  o.prompt = "In a small village by the sea,";
  o.step = 12;
  o.dtypes = {DType::F16};
  return o;
}

double max_k(const LayerProfile& L) {
  double m = 0;
  for (const auto& h : L.k) m = std::max(m, h.max);
  return m;
}

// Spelling out the default SPECs changes nothing: the same numbers as the cache study's profile.
TEST(ProfileSpecs, DefaultSidesSpelledOutGiveTheCacheStudysProfile) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  ProfileOptions o = stories_profile(model, tok);
  o.prompt = "Once upon a time";
  o.step = 40;
  o.dtypes = {DType::F16, DType::BF16};
  const auto plain = run_profile(o);
  o.baseline = RunSpec::parse("cache=off", "--baseline");
  o.candidate = RunSpec::parse("cache=on", "--candidate");
  EXPECT_TRUE(o.default_sides());
  const auto spelled = run_profile(o);
  ASSERT_EQ(plain.size(), 2u);
  ASSERT_EQ(spelled.size(), 2u);
  EXPECT_EQ(profile_json(plain, o).dump(), profile_json(spelled, o).dump());
  EXPECT_GT(plain[1].logits.max, 0.0) << "bf16 standard: the paths are expected to differ at step 40";
  EXPECT_EQ(plain[0].condition, "fp16/kv=fp16/standard");
}

// Under the invariant kernels, cache ON with one thread and chunked prefill against cache OFF with
// two threads is the same computation: every layer, every K/V entry and the logits agree exactly.
TEST(ProfileSpecs, SidesTheInvariantKernelsEquateMeasureZeroEverywhere) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  ProfileOptions o = stories_profile(model, tok);
  o.kernels = KernelPolicy::Invariant;
  o.dtypes = {DType::F16, DType::BF16};
  o.baseline = RunSpec::parse("cache=off,threads=2", "--baseline");
  o.candidate = RunSpec::parse("cache=on,prefill-chunk=3", "--candidate");
  for (const auto& p : run_profile(o)) {
    SCOPED_TRACE(p.condition);
    EXPECT_EQ(p.logits.max, 0.0);
    for (const auto& L : p.layers) {
      EXPECT_EQ(L.resid_mid.max, 0.0);
      EXPECT_EQ(L.resid_post.max, 0.0);
      for (const auto& h : L.k) EXPECT_EQ(h.max, 0.0);
      for (const auto& h : L.v) EXPECT_EQ(h.max, 0.0);
    }
  }
  // The same sides with the standard kernels differ (threads and chunks change their sums).
  o.kernels = KernelPolicy::Standard;
  double any = 0;
  for (const auto& p : run_profile(o)) any = std::max(any, p.logits.max);
  EXPECT_GT(any, 0.0);
}

// fp16 KV against fp8 KV, both cache ON: the prefix, the computation and the kernels are the same,
// so what differs starts at layer 0's cached K (the fp8 rounding: e4m3 keeps 3 mantissa bits, so
// within |k|/16 of the fp16 value; this model's layer-0 keys stay below 32) and reaches the logits.
TEST(ProfileSpecs, QuantisedKvCacheShowsFromTheFirstLayersK) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  ProfileOptions o = stories_profile(model, tok);
  o.kernels = KernelPolicy::Invariant;
  o.baseline = RunSpec::parse("kv-dtype=fp16", "--baseline");
  o.candidate = RunSpec::parse("kv-dtype=fp8_e4m3", "--candidate");
  EXPECT_FALSE(o.default_sides());
  const auto ps = run_profile(o);
  ASSERT_EQ(ps.size(), 1u);
  const auto& p = ps[0];
  EXPECT_EQ(p.condition, "fp16/kv=fp16->fp8_e4m3/invariant/cache=on");
  EXPECT_EQ(p.candidate.kv_dtype.name(), "fp8_e4m3");
  EXPECT_GT(max_k(p.layers[0]), 0.0);
  EXPECT_LE(max_k(p.layers[0]), 2.0);
  EXPECT_GT(p.logits.max, 0.0);
  const auto j = profile_json(ps, o);
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["baseline"], "kv-dtype=fp16");
  EXPECT_EQ(j["profiles"][0]["candidate"],
            "cache=on,dtype=fp16,kv-dtype=fp8_e4m3,kernels=invariant,threads=1,batch-size=1,prefill-chunk=0");
  EXPECT_NE(profile_table(ps, false).find("[1] fp16/kv=fp16->fp8_e4m3/invariant/cache=on"), std::string::npos);
}

PatchOptions stories_patch(const std::string& model, const std::string& tok) {
  PatchOptions o;
  o.model = model;
  o.tokenizer = tok;
  o.prompt = "In a small village by the sea,";
  o.dtype = DType::F16;
  o.max_new_tokens = 64;
  o.continuation = 8;
  return o;
}

// Patching an fp16-KV baseline into an fp8-KV candidate: both run cache ON, so with the baseline's
// last residual the candidate's decode row is the baseline's row, bit for bit (same final norm, same
// one-row head), and picks the baseline's token.
TEST(PatchSpecs, LastResidualOfAnFp16KvBaselineGivesItsLogitsExactly) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  PatchOptions o = stories_patch(model, tok);
  o.baseline = RunSpec::parse("cache=on,kv-dtype=fp16", "--baseline");
  o.candidate = RunSpec::parse("kv-dtype=fp8_e4m3", "--candidate");
  const PatchResult r = run_patch(o);
  ASSERT_GE(r.first_divergence, 1) << "fp8 KV is expected to change a token within 64 steps";
  EXPECT_EQ(r.step, r.first_divergence);
  EXPECT_NE(r.on_token, r.off_token);
  EXPECT_EQ(r.baseline.kv_dtype.name(), "fp16");
  EXPECT_EQ(r.candidate.kv_dtype.name(), "fp8_e4m3");
  const int L = 5;
  const PatchRow& last = r.rows[size_t(L - 1)];
  ASSERT_EQ(last.kind, "residual");
  ASSERT_EQ(last.layer, L - 1);
  EXPECT_EQ(last.max_abs_logit_diff_to_off, 0.0);
  EXPECT_TRUE(last.next_follows_off);
  const auto j = patch_json(r, o);
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_FALSE(j["default_sides"].get<bool>());
  EXPECT_EQ(j["condition"], "fp16/kv=fp16->fp8_e4m3/standard/cache=on");
  EXPECT_NE(patch_table(r, false).find("BASE"), std::string::npos);
}

// Identical sides never diverge, and the unpatched step agrees exactly.
TEST(PatchSpecs, IdenticalSidesDoNotDiverge) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  PatchOptions o = stories_patch(model, tok);
  o.max_new_tokens = 24;
  o.baseline = RunSpec::parse("cache=on", "--baseline");
  o.candidate = RunSpec::parse("cache=on", "--candidate");
  const PatchResult r = run_patch(o);
  EXPECT_EQ(r.first_divergence, -1);
  EXPECT_EQ(r.unpatched_max_abs_logit_diff, 0.0);
  EXPECT_EQ(r.on_token, r.off_token);
  for (const auto& row : r.rows) EXPECT_EQ(row.max_abs_logit_diff_to_off, 0.0) << row.kind << " " << row.layer;
}

TEST(ProfilePatchSpecs, SidesThatCannotRunAreUsageErrors) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  auto usage_error = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.kind() == ErrorKind::Usage ? std::string(e.what()) : "not a usage error: " + std::string(e.what());
    }
    return "";
  };
  ProfileOptions p = stories_profile(model, tok);
  p.candidate = RunSpec::parse("batch-size=4", "--candidate");
  EXPECT_NE(usage_error([&] { profile_sides(p); }).find("--candidate: batch-size=4"), std::string::npos);
  p = stories_profile(model, tok);
  p.dtypes = {DType::F16, DType::BF16};
  p.baseline = RunSpec::parse("dtype=fp32", "--baseline");
  p.candidate = RunSpec::parse("dtype=fp16", "--candidate");
  EXPECT_NE(usage_error([&] { profile_sides(p); }).find("same comparison"), std::string::npos);
  PatchOptions q = stories_patch(model, tok);
  q.candidate = RunSpec::parse("cache=off", "--candidate");
  EXPECT_NE(usage_error([&] { patch_sides(q); }).find("--candidate cache=off"), std::string::npos);
}

// The command line: SPECs reach profile.json / patch.json and the manifest; bad SPECs exit 2 naming
// the option and key and leave --out untouched; a folder refuses a rerun with other sides.
TEST(ProfilePatchSpecsCli, SpecsReachTheResultsAndBadSpecsExit2) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  test::TempDir t;
  const std::string m = fmt::format(" --model {} --tokenizer {} --dtype fp16 ", test::shell_quoted(model),
                                    test::shell_quoted(tok));
  test::CliRun r = test::run_kvparity("profile" + m + "--step 4 --baseline kv-dtype=fp16 --candidate kv-dtype=fp8_e5m2 --out " +
                                      t.file("p"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("max |candidate - baseline|"), std::string::npos) << r.out;
  std::ifstream in(t.file("p/profile.json"));
  const auto prof = nlohmann::json::parse(in);
  EXPECT_EQ(prof["candidate"], "kv-dtype=fp8_e5m2");
  EXPECT_EQ(prof["profiles"][0]["condition"], "fp16/kv=fp16->fp8_e5m2/standard/cache=on");
  std::ifstream md(t.file("p/summary.md"));
  const std::string summary((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(summary.find("Baseline `kv-dtype=fp16`, candidate `kv-dtype=fp8_e5m2`"), std::string::npos) << summary;
  // Another comparison cannot join this folder.
  r = test::run_kvparity("profile" + m + "--step 4 --baseline kv-dtype=fp16 --candidate kv-dtype=fp8_e4m3 --out " +
                         t.file("p"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("candidate"), std::string::npos) << r.err;

  r = test::run_kvparity("patch" + m + "--max-new-tokens 64 --continuation 4 --baseline cache=on --candidate "
                         "kv-dtype=fp8_e4m3 --out " + t.file("q"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("the candidate chooses"), std::string::npos) << r.out;
  std::ifstream pin(t.file("q/patch.json"));
  const auto patch = nlohmann::json::parse(pin);
  EXPECT_EQ(patch["baseline"], "cache=on,dtype=fp16,kv-dtype=fp16,kernels=standard,threads=1,batch-size=1,prefill-chunk=0");

  for (const std::string cmd : {"profile", "patch"}) {
    auto usage = [&](const std::string& args, std::initializer_list<const char*> named) {
      SCOPED_TRACE(cmd + " " + args);
      const test::CliRun u = test::run_kvparity(cmd + m + args + " --out " + t.file("bad"));
      EXPECT_EQ(u.status, 2) << u.err;
      EXPECT_EQ(u.err.rfind("error: ", 0), 0u) << u.err;
      for (const char* n : named) EXPECT_NE(u.err.find(n), std::string::npos) << u.err;
    };
    usage("--candidate colour=red", {"--candidate", "'colour'"});
    usage("--baseline threads=1,threads=2", {"--baseline", "'threads'", "twice"});
    usage("--baseline kv-dtype=q9", {"--baseline", "kv-dtype=q9"});
    usage("--candidate batch-size=2", {"--candidate", "batch-size=2"});
    EXPECT_FALSE(std::filesystem::exists(t.file("bad")));
  }
}

}  // namespace
}  // namespace kvp
