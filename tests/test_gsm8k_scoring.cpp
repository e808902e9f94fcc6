// GSM8K study (issue 7), the parts without a model: answer extraction, McNemar's test, shard and
// condition options, the data file and its prompts (test_gsm8k.cpp runs the CLI end to end).
#include <cmath>
#include <fstream>
#include <optional>
#include <string>

#include "core/error.h"
#include "lab/answer_extract.h"
#include "lab/gsm8k_eval.h"
#include "lab/gsm8k_prompt.h"
#include "lab/mcnemar.h"
#include "test_util.h"

namespace kvp {
namespace {

using test::TempDir;

TEST(Gsm8kExtract, StrictTakesTheNumberAfterHashes) {
  EXPECT_EQ(extract_strict("She makes 9 * 2 = $18 every day.\n#### 18"), "18");
  EXPECT_EQ(extract_strict("#### -3"), "-3");
  EXPECT_EQ(extract_strict("so 1,000 in all\n#### 1,000"), "1000");
  EXPECT_EQ(extract_strict("#### $18."), "18");
  EXPECT_EQ(extract_strict("####0.50"), "0.5");
  EXPECT_EQ(extract_strict("#### 7 and then 9"), "7");
  EXPECT_EQ(extract_strict("The answer is 42."), std::nullopt);  // strict needs the #### format
  EXPECT_EQ(extract_strict("#### none"), std::nullopt);
}

TEST(Gsm8kExtract, FlexibleTakesTheLastNumber) {
  EXPECT_EQ(extract_flexible("The answer is 42."), "42");
  EXPECT_EQ(extract_flexible("3 apples and 5 pears, so 8 fruits"), "8");
  EXPECT_EQ(extract_flexible("It costs $1,234.50."), "1234.5");
  EXPECT_EQ(extract_flexible("The temperature fell to -7"), "-7");
  EXPECT_EQ(extract_flexible("It was 2.5 at first and 10 later."), "10");
  EXPECT_EQ(extract_flexible("between 3, 4"), "4");
  EXPECT_EQ(extract_flexible("#### 18\nand 20 more"), "20");  // lm-eval's flexible-extract: last number
  EXPECT_EQ(extract_flexible("no numbers here."), std::nullopt);
  EXPECT_EQ(extract_flexible(""), std::nullopt);
}

TEST(Gsm8kExtract, Normalisation) {
  EXPECT_EQ(normalize_number("007"), "7");
  EXPECT_EQ(normalize_number("-0"), "0");
  EXPECT_EQ(normalize_number("-0.0"), "0");
  EXPECT_EQ(normalize_number("1,000.00"), "1000");
  EXPECT_EQ(normalize_number("$5."), "5");
  EXPECT_EQ(normalize_number("+12"), "12");
  EXPECT_EQ(normalize_number(".5"), "0.5");
  EXPECT_EQ(normalize_number("-$3.25"), "-3.25");
  EXPECT_EQ(normalize_number("abc"), std::nullopt);
  EXPECT_EQ(normalize_number("."), std::nullopt);
  EXPECT_EQ(normalize_number("1.2.3"), std::nullopt);
}

TEST(Gsm8kMcNemar, MatchesHandComputedValues) {
  EXPECT_DOUBLE_EQ(mcnemar_exact(1, 6).p, 16.0 / 128);  // 2 * (1 + 7) / 2^7
  EXPECT_DOUBLE_EQ(mcnemar_exact(6, 1).p, 16.0 / 128);
  EXPECT_DOUBLE_EQ(mcnemar_exact(0, 5).p, 2.0 / 32);
  EXPECT_DOUBLE_EQ(mcnemar_exact(2, 8).p, 112.0 / 1024);  // 2 * (1 + 10 + 45) / 2^10
  EXPECT_DOUBLE_EQ(mcnemar_exact(3, 3).p, 1.0);
  EXPECT_DOUBLE_EQ(mcnemar_exact(3, 4).p, 1.0);
  EXPECT_DOUBLE_EQ(mcnemar_exact(0, 0).p, 1.0);
  EXPECT_DOUBLE_EQ(mcnemar_exact(0, 1).p, 1.0);
  // Reference values from exact integer arithmetic (Python: 2*sum(comb(n,i) for i<=k)/2**n).
  EXPECT_NEAR(mcnemar_exact(10, 30).p, 0.0022214337732293643, 1e-15);
  EXPECT_NEAR(mcnemar_exact(450, 550).p / 0.0017305360849763176, 1.0, 1e-9);
  EXPECT_NEAR(mcnemar_exact(4800, 5200).log10_p, -4.180882962038339, 1e-9);
}

TEST(Gsm8kMcNemar, LargeLopsidedSamplesStayFinite) {
  const McNemar m = mcnemar_exact(0, 2000);  // 2 * 2^-2000: below the smallest double
  EXPECT_EQ(m.p, 0.0);
  EXPECT_NEAR(m.log10_p, std::log10(2.0) - 2000 * std::log10(2.0), 1e-9);
  const McNemar big = mcnemar_exact(2'000'000, 2'001'000);
  EXPECT_TRUE(std::isfinite(big.log10_p));
  EXPECT_GT(big.p, 0.5);
  EXPECT_LE(big.p, 1.0);
}

TEST(Gsm8kOptions, ShardSpecs) {
  EXPECT_EQ(parse_shard("0/4").index, 0);
  EXPECT_EQ(parse_shard("3/4").count, 4);
  for (const char* bad : {"3/2", "4/4", "-1/3", "1/0", "a/b", "1", "1/", "/2", "1/2/3"}) {
    try {
      parse_shard(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Usage) << bad;
      EXPECT_NE(std::string(e.what()).find("--shard"), std::string::npos) << e.what();
    }
  }
}

TEST(Gsm8kOptions, Conditions) {
  const auto c = parse_gsm8k_conditions("greedy,temperature:0.7,top-p:0.9");
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].sampler.kind, SamplerKind::Greedy);
  EXPECT_EQ(c[1].sampler.kind, SamplerKind::Temperature);
  EXPECT_DOUBLE_EQ(c[1].sampler.temperature, 0.7);
  EXPECT_EQ(c[2].sampler.kind, SamplerKind::TopP);
  EXPECT_DOUBLE_EQ(c[2].sampler.top_p, 0.9);
  for (const char* bad : {"temperature", "greedy:1", "foo:1", "top-p:1.5", "temperature:x", "greedy,greedy", ""})
    EXPECT_THROW(parse_gsm8k_conditions(bad), Error) << bad;
}

TEST(Gsm8kData, PromptAndTargets) {
  KVP_REQUIRE_SHARED(train, "data/gsm8k/train.jsonl");
  const auto items = load_gsm8k(train);
  ASSERT_EQ(items.size(), 7473u);
  EXPECT_EQ(items[0].target, "72");
  const std::string p = gsm8k_prompt(items, 2, "What is 1+1?");
  EXPECT_EQ(p.rfind("Question: " + items[0].question + "\nAnswer: " + items[0].answer + "\n\nQuestion: ", 0), 0u);
  EXPECT_TRUE(p.ends_with("\n\nQuestion: What is 1+1?\nAnswer:"));
  EXPECT_EQ(gsm8k_prompt(items, 0, "Q?"), "Question: Q?\nAnswer:");
  EXPECT_THROW(gsm8k_prompt(items, -1, "Q?"), Error);
}

TEST(Gsm8kData, MalformedLinesNameFileAndLine) {
  TempDir d;
  const std::string f = d.file("bad.jsonl");
  std::ofstream(f) << "{\"question\": \"q\", \"answer\": \"a\\n#### 1\"}\n{\"question\": \"q\"}\n";
  try {
    load_gsm8k(f);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(f + ":2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("answer"), std::string::npos) << e.what();
  }
  std::ofstream(f) << "{\"question\": \"q\", \"answer\": \"no final line\"}\n";
  EXPECT_THROW(load_gsm8k(f), Error);
  std::ofstream(f) << "not json\n";
  EXPECT_THROW(load_gsm8k(f), Error);
}

}  // namespace
}  // namespace kvp
