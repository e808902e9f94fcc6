// The command line means what it says (issue 20): an option that the chosen configuration would
// ignore is a usage error naming it, conflicting inputs are refused, every number is range-checked,
// seeds are exact 64-bit values, --help shows choices and defaults, and messages name the right
// option. Each case checks exit status 2 and the option named on stderr.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "test_util.h"

namespace kvp {
namespace {

using CliRun = test::CliRun;

using test::kvparity;
using test::q;

// Exit 2 with every one of `names` on stderr, in one "error:" line.
void expect_usage(const std::string& args, std::initializer_list<const char*> names) {
  SCOPED_TRACE(args);
  const CliRun r = kvparity(args);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one-line error expected: " << r.err;
  for (const char* n : names) EXPECT_NE(r.err.find(n), std::string::npos) << "'" << n << "' not named in: " << r.err;
}

std::string stories() { return test::shared_file("models/stories260K/stories260K.bin"); }

TEST(CliOptions, SamplerParametersWithoutASamplerThatUsesThemAreRefused) {
  const std::string m = stories();
  if (m.empty()) return;
  const std::string gen = "generate --model " + q(m) + " --prompt hi --max-new-tokens 2 ";
  expect_usage(gen + "--top-p 0.5", {"--top-p", "--sampler top-p"});
  expect_usage(gen + "--kv-scale 2", {"--kv-scale", "fp8"});
  expect_usage(gen + "--kv-dtype q9_0", {"--kv-dtype", "q9_0"});
  expect_usage(gen + "--temperature 0.5", {"--temperature", "--sampler"});
  expect_usage(gen + "--sampler greedy --temperature 0.5", {"--temperature"});
  expect_usage(gen + "--sampler top-k --top-p 0.5", {"--top-p", "--sampler top-p"});
  expect_usage(gen + "--sampler top-p --top-k 3", {"--top-k", "--sampler top-k"});
  expect_usage(gen + "--sampler top-p --min-p 0.1", {"--min-p", "--sampler min-p"});
  expect_usage(gen + "--seed 3", {"--seed", "greedy"});
  // What each sampler uses is accepted.
  EXPECT_EQ(kvparity(gen + "--sampler top-k --top-k 5 --temperature 0.8 --seed 3").status, 0);
  EXPECT_EQ(kvparity(gen + "--sampler min-p --min-p 0.1 --seed 3").status, 0);

  // compare takes a list: a parameter is fine when one listed sampler uses it.
  test::TempDir t;
  const std::string cmp =
      "compare --model " + q(m) + " --prompt hi --max-new-tokens 2 --no-report --out " + q(t.file("c")) + " ";
  expect_usage(cmp + "--sampler greedy,top-k --top-p 0.5", {"--top-p", "top-p among --sampler"});
  expect_usage(cmp + "--seed 5", {"--seed"});
  const CliRun ok = kvparity(cmp + "--sampler greedy,top-p --top-p 0.5 --seed 5");
  EXPECT_EQ(ok.status, 0) << ok.err;

  expect_usage("patch --model " + q(m) + " --top-k 3", {"--top-k", "--sampler top-k"});
  expect_usage("patch --model " + q(m) + " --seed 2", {"--seed"});
}

TEST(CliOptions, OtherIgnoredCombinationsAreRefused) {
  const std::string m = stories();
  const std::string tok = test::shared_file("models/stories260K/tok512.bin");
  if (m.empty() || tok.empty()) return;
  const std::string gen = "generate --model " + q(m) + " --prompt hi --max-new-tokens 2 ";
  expect_usage(gen + "--prefill-chunk 4 --cache off", {"--prefill-chunk", "--cache on"});
  expect_usage(gen + "--threads 2 --kernels reference", {"--threads", "--kernels standard, invariant or portable"});
  expect_usage(gen + "--prompt there --batch-size 1", {"--batch-size"});
  EXPECT_EQ(kvparity(gen + "--prefill-chunk 1 --threads 1 --kernels reference --dtype bf16 --kv-dtype fp32").status, 0);

  expect_usage("demo --max-new-tokens 2 --tokenizer " + q(tok), {"--tokenizer", "--model"});
  expect_usage("demo --max-new-tokens 2 --threads 2 --kernels reference", {"--threads"});
  expect_usage("forward --model " + q(m) + " --tokens 1,2 --logits-out x.npy --cache-capacity 4", {"--cache-capacity"});
  expect_usage("forward --model " + q(m) + " --tokens 1,2 --logits-out x.npy --tokenizer " + q(tok), {"--tokenizer"});
  expect_usage("bench --model " + q(m) + " --synth tiny", {"--synth", "--model"});
  expect_usage("bench --load", {"--load", "--model"});
  expect_usage("bench --load --model " + q(m) + " --kv-dtype q8_0", {"--kv-dtype", "--load"});
  expect_usage("bench --load --model " + q(m) + " --logits all", {"--logits", "--load"});
  expect_usage(
      "bench --kernels reference --threads 1,2 --prompt-tokens 2 --decode-tokens 1 --cache-off-tokens 2 "
      "--repeats 1 --bandwidth-gbs 1",
      {"--threads"});
  test::TempDir t;

  const std::string cmp = "compare --model " + q(m) + " --max-new-tokens 2 --no-report --out " + q(t.file("c")) + " ";
  expect_usage(cmp + "--prompt hi --dtype fp32 --control fp32", {"--control"});
  expect_usage(cmp + "--prompt hi --batch-size 2", {"--batch-size", "two prompts"});
  expect_usage(cmp + "--prompt hi --chat-template vicuna", {"--chat-template", "vicuna"});
  expect_usage(cmp + "--prompt hi --limit -1", {"--limit"});
  expect_usage(cmp + "--prompt hi --kernels reference --threads 2", {"--threads"});

  const std::string data = test::shared_file("data/gsm8k/test.jsonl");
  if (data.empty()) return;
  // Small budgets, so that a check that stopped working fails the test quickly instead of running a study.
  const std::string ev = "eval gsm8k --data " + q(data) + " --model " + q(m) + " --limit 1 --max-new-tokens 1 --out " +
                         q(t.file("e")) + " ";
  expect_usage(ev + "--conditions greedy --seed 3", {"--seed", "--conditions"});
  expect_usage(ev + "--shots 0 --train " + q(data), {"--train", "--shots"});
}

TEST(CliOptions, ConflictingInputsAreRefused) {
  const std::string m = stories();
  const std::string tok = test::shared_file("models/stories260K/tok512.bin");
  if (m.empty() || tok.empty()) return;
  test::TempDir t;
  std::ofstream(t.file("ids.json")) << "[1, 403]";
  expect_usage("forward --model " + q(m) + " --tokens 1,2 --tokens-file " + q(t.file("ids.json")) + " --logits-out " +
                   q(t.file("l.npy")),
               {"--tokens", "--tokens-file"});
  expect_usage("tokenize --tokenizer " + q(tok) + " --model " + q(m) + " --text hi", {"--tokenizer", "--model"});
  expect_usage("detokenize --tokenizer " + q(tok) + " --model " + q(m) + " --ids 1", {"--tokenizer", "--model"});
  expect_usage("compare --model " + q(m) + " --prompt hi --prompts builtin:facts --out " + q(t.file("c")),
               {"--prompt", "--prompts"});
}

TEST(CliOptions, NumbersOutsideTheirRangeAreRefusedBeforeAnyWork) {
  const std::string m = stories();
  if (m.empty()) return;
  // bench would run for seconds (and synthesise a model) if these got through to it.
  for (const char* bad : {"--threads 1000", "--threads 1,1000", "--threads 0", "--threads 1,,2", "--threads 2,2",
                          "--repeats 0", "--bandwidth-gbs -1", "--bandwidth-gbs 0", "--prompt-tokens 0",
                          "--decode-tokens -3", "--cache-off-tokens x", "--dtype fp16,fp8", "--kernels fastest",
                          "--batch-size 0", "--op-times --synth llama2-7b", "--logits first"}) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string args = std::string("bench ") + bad;
    const std::string option = std::string(bad).substr(0, std::string(bad).find(' '));
    expect_usage(args, {option.c_str()});
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.0) << args;
  }
  const std::string gen = "generate --model " + q(m) + " --prompt hi ";
  expect_usage(gen + "--threads 1000", {"--threads", "[1, 256]"});
  expect_usage(gen + "--threads 0", {"--threads", "[1, 256]"});
  expect_usage(gen + "--max-new-tokens -1", {"--max-new-tokens", ">= 0"});
  expect_usage(gen + "--cache-capacity -4", {"--cache-capacity"});
  expect_usage(gen + "--sampler top-p --top-p 1.5", {"--top-p", "(0, 1]"});
  expect_usage(gen + "--sampler top-k --top-k 2.5", {"--top-k"});
  expect_usage(gen + "--batch-size 0", {"--batch-size", ">= 1"});
  expect_usage("demo --threads 300", {"--threads", "[1, 256]"});
  expect_usage("profile --model " + q(m) + " --step 0", {"--step", ">= 1"});
  expect_usage("patch --model " + q(m) + " --continuation -1", {"--continuation"});
  expect_usage("patch --model " + q(m) + " --step 10 --max-new-tokens 10", {"--step", "--max-new-tokens"});
  expect_usage("patch --model " + q(m) + " --kv-positions 1x:5", {"--kv-positions"});
}

TEST(CliOptions, SeedsAreExactUnsigned64BitDecimals) {
  const std::string m = stories();
  if (m.empty()) return;
  const std::string gen = "generate --model " + q(m) + " --prompt hi --max-new-tokens 3 --sampler top-p --json ";
  for (const char* bad : {"-1", "18446744073709551616", "99999999999999999999999", "abc", "1e3", "+5", "0x10"})
    expect_usage(gen + "--seed '" + bad + "'", {"--seed", "18446744073709551615"});
  expect_usage("synth --out /nonexistent/x --seed -1", {"--seed"});

  CliRun r = kvparity(gen + "--seed 18446744073709551615");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["seed"], nlohmann::json("18446744073709551615"));
  r = kvparity(gen + "--seed 7");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["seed"].is_number_unsigned()) << j["seed"];
  EXPECT_EQ(j["seed"], 7);
}

// The help entry of `option`: its line, and the next one when a long type pushed the description
// there.
std::string help_entry(const std::string& help, const std::string& option) {
  size_t at = std::string::npos;
  for (const char* after : {" ", ","}) {
    at = help.find("\n  " + option + after);
    if (at != std::string::npos) break;
  }
  if (at == std::string::npos) return "";
  size_t end = help.find("\n  -", at + 1);
  end = std::min(end, help.find("\n\n", at + 1));
  return help.substr(at + 1, end - at - 1);
}

TEST(CliOptions, HelpListsChoicesAndDefaults) {
  for (const char* sub : {"generate", "forward", "demo", "profile", "patch", "compare", "bench", "eval gsm8k"}) {
    SCOPED_TRACE(sub);
    const CliRun r = kvparity(std::string(sub) + " --help");
    ASSERT_EQ(r.status, 0) << r.err;
    // --kernels lists every policy and its default.
    const std::string k = help_entry(r.out, "--kernels");
    for (const char* p : {"reference", "standard", "invariant", "(default: standard)"})
      EXPECT_NE(k.find(p), std::string::npos) << p << " missing in: " << k << "\n" << r.out;
    // One thread by default everywhere, in the same range.
    const std::string t = help_entry(r.out, "--threads");
    EXPECT_NE(t.find("(default: 1)"), std::string::npos) << t;
    EXPECT_NE(t.find("[1, 256]"), std::string::npos) << t;
  }
  for (const char* sub : {"tokenize", "detokenize", "synth", "convert", "report", "merge"}) {
    const CliRun r = kvparity(std::string(sub) + " --help");
    EXPECT_EQ(r.status, 0) << sub << ": " << r.err;
  }
  const std::string g = kvparity("generate --help").out;
  const std::vector<std::pair<const char*, std::vector<const char*>>> expected = {
      {"--sampler", {"{greedy|temperature|top-k|top-p|min-p}", "(default: greedy)"}},
      {"--top-p", {"REAL in (0, 1]", "(default: 0.9)"}},
      {"--top-k", {"INT >= 1", "(default: 40)"}},
      {"--temperature", {"REAL > 0", "(default: 1)"}},
      {"--cache", {"{on|off}", "(default: on)"}},
      {"--dtype", {"{fp32|fp16|bf16}", "(default: fp32)"}},
      {"--seed", {"INT in [0, 2^64-1]", "(default: 0)"}},
      {"--max-new-tokens", {"INT >= 0", "(default: 64)"}},
      {"--batch-size", {"INT >= 1", "(default: one sequence per --prompt)"}},
      {"--on-nonfinite", {"{error|warn}", "(default: error)"}}};
  for (const auto& [opt, parts] : expected) {
    const std::string e = help_entry(g, opt);
    for (const char* p : parts) EXPECT_NE(e.find(p), std::string::npos) << opt << ": " << p << " missing in: " << e;
  }
  const std::string b = kvparity("bench --help").out;
  EXPECT_NE(help_entry(b, "--bandwidth-gbs").find("(default: measured)"), std::string::npos) << b;
  EXPECT_NE(help_entry(b, "--synth").find("(default: tiny)"), std::string::npos) << b;
  EXPECT_NE(help_entry(kvparity("compare --help").out, "--seed").find("(default: 1)"), std::string::npos);
  const std::string ev = kvparity("eval gsm8k --help").out;
  EXPECT_NE(help_entry(ev, "--dtype").find("--dtypes"), std::string::npos);
  EXPECT_NE(help_entry(ev, "--no-flips").find("teacher_forced: null"), std::string::npos) << ev;
}

TEST(CliOptions, UnknownSubcommandsAreNamedWithTheNearestMatch) {
  expect_usage("generat --model x", {"unknown subcommand 'generat'", "did you mean 'generate'?"});
  expect_usage("comapre", {"unknown subcommand 'comapre'", "did you mean 'compare'?"});
  expect_usage("eval gsm8 --data x", {"unknown subcommand 'gsm8'", "did you mean 'gsm8k'?"});
  expect_usage("frobnicate", {"unknown subcommand 'frobnicate'", "generate"});
}

TEST(CliOptions, TokenListsNameTheirOptionAndTakeThreeForms) {
  const std::string tok = test::shared_file("models/stories260K/tok512.bin");
  const std::string m = stories();
  if (tok.empty() || m.empty()) return;
  const std::string det = "detokenize --tokenizer " + q(tok) + " --ids ";
  for (const char* ids : {"403,407", "'403 407'", "'[403, 407]'", "' 403 , 407 '"}) {
    const CliRun r = kvparity(det + ids);
    ASSERT_EQ(r.status, 0) << ids << ": " << r.err;
    EXPECT_EQ(r.out, "Once upon\n") << ids;
  }
  for (const char* bad : {"403,,407", "',403'", "403,", "'[403,,407]'", "abc", "'403 x'", "-1", "''", "'[1.5]'"}) {
    expect_usage(det + bad, {"--ids"});
    EXPECT_EQ(kvparity(det + bad).err.find("--tokens"), std::string::npos) << bad;
  }
  test::TempDir t;
  expect_usage("forward --model " + q(m) + " --logits-out " + q(t.file("l.npy")) + " --tokens 1,,2", {"--tokens"});
  const CliRun f = kvparity("forward --model " + q(m) + " --logits-out " + q(t.file("l.npy")) + " --tokens '1 403'");
  EXPECT_EQ(f.status, 0) << f.err;
}

TEST(CliOptions, EvalTakesDtypeLikeCompareAndDtypesAsAlias) {
  const std::string m = stories();
  if (m.empty()) return;
  test::TempDir t;
  const std::string ev =
      "eval gsm8k --data " + q(t.file("missing.jsonl")) + " --model " + q(m) + " --out " + q(t.file("e"));
  expect_usage(ev + " --dtype fp8", {"--dtype"});
  // Accepted options get as far as reading the (missing) data: exit 1, not 2.
  EXPECT_EQ(kvparity(ev + " --dtype fp16,bf16").status, 1);
  EXPECT_EQ(kvparity(ev + " --dtypes fp16").status, 1);
  EXPECT_EQ(kvparity(ev + " --no-flips").status, 1);
  expect_usage(ev + " --no-flips=maybe", {"--no-flips"});
}

TEST(CliOptions, PathsAreJoinedAndCountsPluralised) {
  const std::string m = stories();
  const std::string data = test::shared_file("data/gsm8k/test.jsonl");
  if (m.empty() || data.empty()) return;
  test::TempDir t;
  CliRun r = kvparity("compare --model " + q(m) + " --prompt hi --max-new-tokens 2 --out " + q(t.file("c") + "//"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(t.file("c") + "/{results.jsonl"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("//"), std::string::npos) << r.out;
  r = kvparity("eval gsm8k --data " + q(data) + " --model " + q(m) +
               " --shots 0 --limit 1 --max-new-tokens 2 "
               "--no-report --out " +
               q(t.file("e") + "/"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("1 new record in"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(t.file("e") + "/gsm8k.jsonl"), std::string::npos) << r.out;
  r = kvparity("merge " + q(t.file("e")) + " --no-report --out " + q(t.file("m") + "/"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("merged 1 record from 1 directory into " + t.file("m") + "/gsm8k.jsonl"), std::string::npos)
      << r.out;
}

TEST(CliOptions, DemoDefaultsToOneThread) {
  const CliRun r = kvparity("demo --max-new-tokens 2");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("threads=1\n"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kvp
