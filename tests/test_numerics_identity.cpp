// A results folder keeps what decides its records' bits besides the sides' SPECs (the CPU's SIMD
// target under simd=auto; on a GPU the card and the bit-changing switches): a resume or a merge
// under another one is refused naming it, a folder written before it was kept adopts this run's.
// (The CUDA suite checks the GPU's entries: tests/cuda/test_cuda_numerics_identity.cpp.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "kernels/simd_target.h"
#include "lab/numerics_identity.h"
#include "lab/results_manifest.h"
#include "test_util.h"

namespace kvp {
namespace {

namespace fs = std::filesystem;
using test::run_kvparity;
using test::shell_quoted;

RunSettings side(KernelPolicy k, SimdTarget simd = SimdTarget::Auto) {
  RunSettings s;
  s.kernels = k;
  s.simd = simd;
  return s;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

void write_json(const std::string& path, const nlohmann::json& j) { std::ofstream(path) << j.dump(2) << "\n"; }

TEST(NumericsIdentity, CpuSidesNameTheTargetAutoRunsOnlyWhereThePolicyFollowsIt) {
  const std::string here = simd_auto_target();
  EXPECT_FALSE(here.empty());
  EXPECT_EQ(here, simd_name(parse_simd(here))) << "an x86 build resolves auto to a --simd name";

  const auto both = numerics_identity({side(KernelPolicy::Standard), side(KernelPolicy::Invariant)});
  EXPECT_EQ(both, (nlohmann::json{{"cpu", {{"standard", {{"simd", here}}}, {"invariant", {{"simd", here}}}}}}));
  // A pinned target is in the SPEC already; reference and portable sum alike on every target.
  EXPECT_TRUE(numerics_identity({side(KernelPolicy::Standard, SimdTarget::Avx2)}).is_null());
  EXPECT_TRUE(numerics_identity({side(KernelPolicy::Reference), side(KernelPolicy::Portable)}).is_null());
  EXPECT_TRUE(numerics_identity({}).is_null());
  EXPECT_EQ(numerics_identity({side(KernelPolicy::Portable), side(KernelPolicy::Invariant, SimdTarget::Scalar),
                               side(KernelPolicy::Invariant)}),
            (nlohmann::json{{"cpu", {{"invariant", {{"simd", here}}}}}}));
}

TEST(NumericsIdentity, OldSettingsAdoptThisRunsAndOnlyIdentityDifferencesGetTheHint) {
  const nlohmann::json now = {{"seed", 1}, {"numerics", {{"cpu", {{"standard", {{"simd", "avx512"}}}}}}}};
  EXPECT_EQ(with_numerics_of({{"seed", 1}}, now, "m.json"), now);
  const nlohmann::json other = {{"seed", 1}, {"numerics", {{"cpu", {{"standard", {{"simd", "avx2"}}}}}}}};
  EXPECT_EQ(with_numerics_of(other, now, "m.json"), other) << "a kept identity is never replaced";
  EXPECT_EQ(with_numerics_of({{"seed", 2}}, {{"seed", 1}}, "m.json"), (nlohmann::json{{"seed", 2}}));
  const std::string d = json_first_difference(other, now, "settings");
  EXPECT_EQ(d, "settings/numerics/cpu/standard/simd: \"avx2\" vs \"avx512\"");
  EXPECT_NE(numerics_difference_hint(d).find("another machine"), std::string::npos);
  EXPECT_EQ(numerics_difference_hint("settings/seed: 1 vs 2"), "");
  // --simd given to one run and not the other: said so, rather than left to the reader.
  const std::string simd = numerics_difference_hint(
      "compare/settings/conditions/0/baseline: \"cache=off,dtype=fp16\" vs \"cache=off,dtype=fp16,simd=avx2\"");
  EXPECT_NE(simd.find("given --simd"), std::string::npos) << simd;
  EXPECT_EQ(numerics_difference_hint("compare/settings/conditions/0/baseline: \"cache=off,simd=avx2\" vs "
                                     "\"cache=on,simd=avx2\""),
            "");
}

class NumericsFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    shared_ = test::shared_dir();
    ASSERT_FALSE(shared_.empty());
    prompts_ = tmp_.file("prompts.txt");
    std::ofstream(prompts_) << "Once upon a time\nThe cat sat\n";
  }
  std::string compare(const std::string& out, const std::string& extra = "") const {
    const std::string m = shared_ + "/models/stories260K/";
    return "compare --model " + shell_quoted(m + "stories260K.bin") + " --tokenizer " + shell_quoted(m + "tok512.bin") +
           " --prompts " + shell_quoted(prompts_) + " --dtype fp16 --max-new-tokens 4 --out " + shell_quoted(out) +
           " " + extra;
  }
  std::string gsm8k(const std::string& out, const std::string& extra = "") const {
    return "eval gsm8k --no-report --data " + shell_quoted(shared_ + "/data/gsm8k/test.jsonl") + " --model " +
           shell_quoted(shared_ + "/models/stories260K/stories260K.bin") +
           " --conditions greedy --dtypes fp16 --shots 0 --max-new-tokens 4 --limit 2 --out " + shell_quoted(out) +
           " " + extra;
  }
  test::TempDir tmp_;
  std::string shared_, prompts_;
};

TEST_F(NumericsFolder, CompareRefusesAnotherMachinesFolderAndOldFoldersAdoptThisOne) {
  const std::string out = tmp_.file("c");
  const auto first = run_kvparity(compare(out));
  ASSERT_EQ(first.status, 0) << first.err;
  const std::string path = out + "/manifest.json";
  auto manifest = read_json(path);
  auto& settings = manifest["commands"]["compare"]["settings"];
  EXPECT_EQ(settings["numerics"], numerics_identity({side(KernelPolicy::Standard)})) << settings.dump();

  // The same folder as if written on a machine whose best target is another one.
  settings["numerics"]["cpu"]["standard"]["simd"] = "elsewhere";
  write_json(path, manifest);
  const auto before = test::folder_snapshot(out);
  const auto moved = run_kvparity(compare(out));
  EXPECT_EQ(moved.status, 1) << moved.err;
  EXPECT_NE(moved.err.find("compare/settings/numerics/cpu/standard/simd: \"elsewhere\" vs"), std::string::npos)
      << moved.err;
  EXPECT_NE(moved.err.find("another machine"), std::string::npos) << moved.err;
  EXPECT_EQ(test::folder_snapshot(out), before) << "the refused run changed the folder";

  // Written before the identity was kept: resumed, with a note, and the identity recorded from now on.
  settings.erase("numerics");
  write_json(path, manifest);
  const auto old = run_kvparity(compare(out));
  ASSERT_EQ(old.status, 0) << old.err;
  EXPECT_NE(old.err.find("recorded before the machine and switches"), std::string::npos) << old.err;
  EXPECT_NE(old.err.find("2 of 2 records already there are re-used"), std::string::npos) << old.err;
  EXPECT_EQ(read_json(path)["commands"]["compare"]["settings"]["numerics"],
            numerics_identity({side(KernelPolicy::Standard)}));
  const auto again = run_kvparity(compare(out));
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(again.err.find("recorded before"), std::string::npos) << again.err;

  // Sides whose bits follow nothing here keep the settings they had before the identity existed.
  const auto portable = run_kvparity(compare(tmp_.file("p"), "--kernels portable"));
  ASSERT_EQ(portable.status, 0) << portable.err;
  EXPECT_FALSE(read_json(tmp_.file("p/manifest.json"))["commands"]["compare"]["settings"].contains("numerics"));
}

TEST_F(NumericsFolder, ProfileAndPatchRecordItAndRefuseAnotherMachinesResult) {
  const std::string m = shared_ + "/models/stories260K/", out = tmp_.file("pp");
  const std::string model = " --model " + shell_quoted(m + "stories260K.bin") + " --tokenizer " +
                            shell_quoted(m + "tok512.bin") + " --out " + shell_quoted(out);
  const auto profile = run_kvparity("profile --dtype fp16 --kernels invariant" + model);
  ASSERT_EQ(profile.status, 0) << profile.err;
  const auto patch = run_kvparity("patch --dtype fp16 --max-new-tokens 8 --step 2 --continuation 2" + model);
  ASSERT_EQ(patch.status, 0) << patch.err;
  auto manifest = read_json(out + "/manifest.json");
  EXPECT_EQ(manifest["commands"]["profile"]["settings"]["numerics"],
            numerics_identity({side(KernelPolicy::Invariant)}));
  EXPECT_EQ(manifest["commands"]["patch"]["settings"]["numerics"], numerics_identity({side(KernelPolicy::Standard)}));

  manifest["commands"]["profile"]["settings"]["numerics"]["cpu"]["invariant"]["simd"] = "elsewhere";
  write_json(out + "/manifest.json", manifest);
  const auto before = test::folder_snapshot(out);
  const auto moved = run_kvparity("profile --dtype fp16 --kernels invariant" + model);
  EXPECT_EQ(moved.status, 1) << moved.err;
  EXPECT_NE(moved.err.find("profile/settings/numerics/cpu/invariant/simd"), std::string::npos) << moved.err;
  EXPECT_EQ(test::folder_snapshot(out), before);

  // A profile written before the identity was kept: re-run (checked before and after the work) with one note.
  manifest["commands"]["profile"]["settings"].erase("numerics");
  write_json(out + "/manifest.json", manifest);
  const auto old = run_kvparity("profile --dtype fp16 --kernels invariant" + model);
  ASSERT_EQ(old.status, 0) << old.err;
  const size_t first = old.err.find("recorded before the machine and switches");
  ASSERT_NE(first, std::string::npos) << old.err;
  EXPECT_EQ(old.err.find("recorded before the machine and switches", first + 1), std::string::npos) << old.err;
  EXPECT_EQ(read_json(out + "/manifest.json")["commands"]["profile"]["settings"]["numerics"],
            numerics_identity({side(KernelPolicy::Invariant)}));
}

TEST_F(NumericsFolder, Gsm8kResumeAndMergeRefuseShardsOfAnotherMachine) {
  const std::string a = tmp_.file("s0"), b = tmp_.file("s1");
  ASSERT_EQ(run_kvparity(gsm8k(a, "--shard 0/2")).status, 0);
  ASSERT_EQ(run_kvparity(gsm8k(b, "--shard 1/2")).status, 0);
  const std::string path = b + "/gsm8k_manifest.json";
  auto manifest = read_json(path);
  ASSERT_TRUE(manifest["settings"].contains("numerics")) << manifest.dump();
  manifest["settings"]["numerics"]["cpu"]["standard"]["simd"] = "elsewhere";
  write_json(path, manifest);

  const auto merge = run_kvparity("merge " + shell_quoted(a) + " " + shell_quoted(b) + " --no-report --out " +
                                  shell_quoted(tmp_.file("m")));
  EXPECT_EQ(merge.status, 1) << merge.err;
  EXPECT_NE(merge.err.find("settings/numerics/cpu/standard/simd"), std::string::npos) << merge.err;
  EXPECT_NE(merge.err.find("another machine"), std::string::npos) << merge.err;

  const auto before = test::folder_snapshot(b);
  const auto resumed = run_kvparity(gsm8k(b, "--shard 1/2"));
  EXPECT_EQ(resumed.status, 1) << resumed.err;
  EXPECT_NE(resumed.err.find("settings/numerics/cpu/standard/simd: \"elsewhere\" vs"), std::string::npos)
      << resumed.err;
  EXPECT_EQ(test::folder_snapshot(b), before);

  // A shard written before the identity was kept resumes and then merges with one that has it.
  manifest["settings"].erase("numerics");
  write_json(path, manifest);
  const auto old = run_kvparity(gsm8k(b, "--shard 1/2"));
  ASSERT_EQ(old.status, 0) << old.err;
  EXPECT_NE(old.err.find("recorded before the machine and switches"), std::string::npos) << old.err;
  const auto merged = run_kvparity("merge " + shell_quoted(a) + " " + shell_quoted(b) + " --no-report --out " +
                                   shell_quoted(tmp_.file("m")));
  EXPECT_EQ(merged.status, 0) << merged.err;
}

}  // namespace
}  // namespace kvp
