// Samplers and the counter-based RNG: determinism per (seed, sequence, step), each cutoff's
// semantics, and refusal of invalid parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "core/error.h"
#include "runtime/rng.h"
#include "runtime/sampler.h"

namespace kvp {
namespace {

TEST(Rng, PhiloxKnownAnswer) {
  // Known-answer vectors of Philox4x32-10 from the Random123 distribution (kat_vectors).
  auto r = philox4x32({0, 0, 0, 0}, {0, 0});
  EXPECT_EQ(r[0], 0x6627e8d5u);
  EXPECT_EQ(r[1], 0xe169c58du);
  EXPECT_EQ(r[2], 0xbc57ac4cu);
  EXPECT_EQ(r[3], 0x9b00dbd8u);
  r = philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu});
  EXPECT_EQ(r[0], 0x408f276du);
  EXPECT_EQ(r[1], 0x41c83b0eu);
  EXPECT_EQ(r[2], 0xa20bc7c6u);
  EXPECT_EQ(r[3], 0x6d5451fdu);
}

TEST(Rng, UniformIsAPureFunctionOfSeedSequenceStep) {
  EXPECT_EQ(uniform_at(7, 0, 3), uniform_at(7, 0, 3));
  EXPECT_NE(uniform_at(7, 0, 3), uniform_at(7, 0, 4));
  EXPECT_NE(uniform_at(7, 0, 3), uniform_at(7, 1, 3));
  EXPECT_NE(uniform_at(7, 0, 3), uniform_at(8, 0, 3));
  double sum = 0;
  for (int i = 0; i < 100000; ++i) {
    const double u = uniform_at(1, 2, uint64_t(i));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.01);
}

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
  const float logits[5] = {1, 3, 3, -1, 2};
  SamplerConfig c;
  EXPECT_EQ(sample_token(logits, 5, c, 0.99), 1);
}

TEST(Sampler, TopKOnlyEverReturnsTheKBest) {
  const float logits[6] = {0.1f, 5, 4, 0.2f, 3, 0};
  SamplerConfig c;
  c.kind = SamplerKind::TopK;
  c.top_k = 2;
  std::set<int> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(sample_token(logits, 6, c, uniform_at(3, 0, uint64_t(i))));
  EXPECT_EQ(seen, (std::set<int>{1, 2}));
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  // probabilities ~ 0.665, 0.245, 0.09 (logits 2, 1, 0)
  const float logits[3] = {2, 1, 0};
  SamplerConfig c;
  c.kind = SamplerKind::TopP;
  c.temperature = 1.0;
  c.top_p = 0.6;  // the first token alone reaches 0.6
  for (int i = 0; i < 200; ++i) EXPECT_EQ(sample_token(logits, 3, c, uniform_at(1, 0, uint64_t(i))), 0);
  c.top_p = 0.8;
  std::set<int> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(sample_token(logits, 3, c, uniform_at(1, 0, uint64_t(i))));
  EXPECT_EQ(seen, (std::set<int>{0, 1}));
}

TEST(Sampler, MinPDropsTokensBelowTheScaledMaximum) {
  const float logits[3] = {2, 1, 0};  // p ~ 0.665, 0.245, 0.09; min_p 0.2 -> threshold 0.133
  SamplerConfig c;
  c.kind = SamplerKind::MinP;
  c.min_p = 0.2;
  std::set<int> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(sample_token(logits, 3, c, uniform_at(1, 0, uint64_t(i))));
  EXPECT_EQ(seen, (std::set<int>{0, 1}));
}

TEST(Sampler, TemperatureFrequenciesFollowTheSoftmax) {
  const float logits[3] = {2, 1, 0};
  SamplerConfig c;
  c.kind = SamplerKind::Temperature;
  c.temperature = 2.0;
  std::map<int, int> count;
  const int n = 40000;
  for (int i = 0; i < n; ++i) ++count[sample_token(logits, 3, c, uniform_at(5, 0, uint64_t(i)))];
  const double z = std::exp(1.0) + std::exp(0.5) + 1.0;
  EXPECT_NEAR(count[0] / double(n), std::exp(1.0) / z, 0.01);
  EXPECT_NEAR(count[1] / double(n), std::exp(0.5) / z, 0.01);
  EXPECT_NEAR(count[2] / double(n), 1.0 / z, 0.01);
}

TEST(Sampler, InvalidParametersAreRefused) {
  SamplerConfig c;
  c.kind = SamplerKind::TopP;
  c.top_p = 0.0;
  EXPECT_THROW(c.validate(), Error);
  c.top_p = 1.5;
  EXPECT_THROW(c.validate(), Error);
  c.top_p = 1.0;
  EXPECT_NO_THROW(c.validate());
  c.temperature = -0.5;
  EXPECT_THROW(c.validate(), Error);
  c = SamplerConfig{};
  c.kind = SamplerKind::TopK;
  c.top_k = 0;
  EXPECT_THROW(c.validate(), Error);
  c.kind = SamplerKind::MinP;
  c.min_p = -0.1;
  EXPECT_THROW(c.validate(), Error);
  EXPECT_THROW(parse_sampler("beam"), Error);
}

}  // namespace
}  // namespace kvp
