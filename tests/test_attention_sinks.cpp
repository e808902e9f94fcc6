// Attention sinks (GPT-OSS's per-head learned logit with no value) in every CPU kernel policy: the
// softmax they give, that a sink too low to matter changes no bit, and that the fixed-order
// policies keep their row's bits whether it is a prefill row or a decode step.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "core/kv_type.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "runtime/rng.h"

namespace kvp {
namespace {

constexpr int kHeads = 4, kKvHeads = 2, kHd = 64;

// A [kv_heads][capacity][head_dim] cache of fp32 values of `act`, and q rows for every position.
struct SinkCase {
  int len;
  DType act;
  std::vector<float> k, v, q, sinks;
  SinkCase(int n, DType a) : len(n), act(a) {
    auto fill = [&](std::vector<float>& x, size_t count, uint64_t stream, float scale) {
      x.resize(count);
      for (size_t i = 0; i < count; ++i) x[i] = round_to(act, scale * (2.0f * float(uniform_at(99, stream, i)) - 1.0f));
    };
    fill(k, size_t(kKvHeads) * len * kHd, 1, 1.0f);
    fill(v, size_t(kKvHeads) * len * kHd, 2, 1.0f);
    fill(q, size_t(len) * kHeads * kHd, 3, 1.0f);
    sinks = {round_to(act, 0.5f), round_to(act, -1.25f), round_to(act, 2.0f), round_to(act, 0.0f)};
  }
  AttentionParams params(int start, int rows, float* out, const float* s) const {
    AttentionParams p;
    p.n_rows = rows;
    p.start_pos = start;
    p.n_heads = kHeads;
    p.n_kv_heads = kKvHeads;
    p.head_dim = kHd;
    p.q = q.data() + size_t(start) * kHeads * kHd;
    p.k_cache = k.data();
    p.v_cache = v.data();
    p.kv = KvType::of(DType::F32);
    p.capacity = len;
    p.out = out;
    p.score_scale = 0.125f;  // GPT-OSS: head_dim^-0.5
    p.sinks = s;
    p.act = act;
    return p;
  }
};

// softmax over the scores and the sink, the sink's share dropped, times V: in double.
std::vector<double> direct(const SinkCase& c, int pos, const float* sinks) {
  std::vector<double> out(size_t(kHeads) * kHd, 0.0);
  for (int h = 0; h < kHeads; ++h) {
    const int kvh = h / (kHeads / kKvHeads);
    std::vector<double> s(size_t(pos) + 1);
    double mx = sinks != nullptr ? sinks[h] : -INFINITY;
    for (int j = 0; j <= pos; ++j) {
      double dot = 0.0;
      for (int d = 0; d < kHd; ++d)
        dot += double(c.q[(size_t(pos) * kHeads + h) * kHd + d]) * c.k[(size_t(kvh) * c.len + j) * kHd + d];
      s[size_t(j)] = dot * 0.125;
      mx = std::max(mx, s[size_t(j)]);
    }
    double den = sinks != nullptr ? std::exp(double(sinks[h]) - mx) : 0.0;
    for (double& x : s) den += (x = std::exp(x - mx));
    for (int j = 0; j <= pos; ++j)
      for (int d = 0; d < kHd; ++d)
        out[size_t(h) * kHd + d] += s[size_t(j)] / den * c.v[(size_t(kvh) * c.len + j) * kHd + d];
  }
  return out;
}

std::vector<float> run(Kernels& kn, const SinkCase& c, int start, int rows, const float* sinks) {
  std::vector<float> out(size_t(rows) * kHeads * kHd, NAN);
  kn.attention(c.params(start, rows, out.data(), sinks));
  return out;
}

const KernelPolicy kPolicies[] = {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant,
                                  KernelPolicy::Portable};

// 300 keys: the standard policy's decode splits them into chunks of 128 and merges the sink in
// with them; the fixed-order ones fold 64-key tiles onto the sink's state.
TEST(AttentionSinks, Fp32EveryPolicyGivesTheSoftmaxWithTheSinkDropped) {
  const SinkCase c(300, DType::F32);
  ThreadPool pool(2);
  for (KernelPolicy pol : kPolicies) {
    auto kn = make_kernels(pol, &pool);
    for (int pos : {0, 63, 64, 200, 299}) {
      const std::vector<float> got = run(*kn, c, pos, 1, c.sinks.data());
      const std::vector<double> want = direct(c, pos, c.sinks.data());
      const std::vector<double> plain = direct(c, pos, nullptr);
      double moved = 0.0;
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 2e-6) << policy_name(pol) << " position " << pos << " element " << i;
        moved = std::max(moved, std::abs(want[i] - plain[i]));
      }
      EXPECT_GT(moved, 1e-3) << "the sinks must change the output at position " << pos;
    }
  }
}

// Keys all 0 and values all 1: every score is 0, so each output is (n) / (n + exp(sink)), the mass
// the sink leaves to the keys.
TEST(AttentionSinks, TheSinkTakesItsShareOfTheMass) {
  SinkCase c(130, DType::F32);
  std::fill(c.k.begin(), c.k.end(), 0.0f);
  std::fill(c.v.begin(), c.v.end(), 1.0f);
  ThreadPool pool(2);
  for (KernelPolicy pol : kPolicies) {
    auto kn = make_kernels(pol, &pool);
    for (int pos : {0, 9, 129}) {
      const std::vector<float> got = run(*kn, c, pos, 1, c.sinks.data());
      for (int h = 0; h < kHeads; ++h) {
        const double n = pos + 1, want = n / (n + std::exp(double(c.sinks[size_t(h)])));
        EXPECT_NEAR(got[size_t(h) * kHd], want, 5e-6) << policy_name(pol) << " head " << h << " position " << pos;
      }
    }
  }
}

// A sink far below every score weighs exp(-1e30) = 0: the result is the sink-free one, bit for bit,
// in every policy (the fixed-order states start at it, the split-KV merge takes it as a chunk).
// The reference in fp32 only: with a sink it rounds each score minus the max to the compute dtype,
// as GPT-OSS's eager code does, which the sink-free families' softmax does not.
TEST(AttentionSinks, ASinkTooLowToMatterChangesNoBit) {
  const std::vector<float> low(kHeads, -1e30f);
  ThreadPool pool(2);
  for (KernelPolicy pol : kPolicies) {
    const SinkCase c(200, pol == KernelPolicy::Reference ? DType::F32 : DType::BF16);
    auto kn = make_kernels(pol, &pool);
    for (const auto& [start, rows] : {std::pair{0, 200}, std::pair{199, 1}, std::pair{150, 7}}) {
      const std::vector<float> with = run(*kn, c, start, rows, low.data());
      const std::vector<float> without = run(*kn, c, start, rows, nullptr);
      ASSERT_EQ(std::memcmp(with.data(), without.data(), with.size() * sizeof(float)), 0)
          << policy_name(pol) << " rows " << start << ".." << start + rows - 1;
    }
  }
}

// invariant and portable: a row's bits are the same from a prefill of all rows, a chunk of 7 and a
// decode step, with sinks, in bf16 (where standard's decode and prefill orders may part).
TEST(AttentionSinks, FixedOrderPoliciesKeepARowsBitsHoweverItsRowsAreCut) {
  const SinkCase c(260, DType::BF16);
  ThreadPool pool(2);
  for (KernelPolicy pol : {KernelPolicy::Invariant, KernelPolicy::Portable}) {
    auto kn = make_kernels(pol, &pool);
    const std::vector<float> all = run(*kn, c, 0, c.len, c.sinks.data());
    const size_t row = size_t(kHeads) * kHd;
    for (int pos : {0, 63, 64, 127, 200, 259}) {
      const std::vector<float> step = run(*kn, c, pos, 1, c.sinks.data());
      ASSERT_EQ(std::memcmp(step.data(), all.data() + size_t(pos) * row, row * sizeof(float)), 0)
          << policy_name(pol) << " decode at " << pos;
    }
    const std::vector<float> chunk = run(*kn, c, 250, 7, c.sinks.data());
    ASSERT_EQ(std::memcmp(chunk.data(), all.data() + 250 * row, 7 * row * sizeof(float)), 0) << policy_name(pol);
  }
}

// The reference's bf16 softmax with a sink is GPT-OSS's eager one: each logit minus the row's max
// rounded to bf16, then exp and the sum in fp32, each probability rounded to bf16.
TEST(AttentionSinks, ReferenceRoundsTheShiftedLogitsAsGptOssEagerCode) {
  const SinkCase c(40, DType::BF16);
  auto kn = make_kernels(KernelPolicy::Reference, nullptr);
  const int pos = 39;
  const std::vector<float> got = run(*kn, c, pos, 1, c.sinks.data());
  for (int h = 0; h < kHeads; ++h) {
    const int kvh = h / (kHeads / kKvHeads);
    std::vector<float> s(pos + 1);
    float mx = c.sinks[size_t(h)];
    for (int j = 0; j <= pos; ++j) {
      float dot = 0.0f;
      for (int d = 0; d < kHd; ++d)
        dot += c.q[(size_t(pos) * kHeads + h) * kHd + d] * c.k[(size_t(kvh) * c.len + j) * kHd + d];
      s[size_t(j)] = round_to(DType::BF16, round_to(DType::BF16, dot) * 0.125f);
      mx = std::max(mx, s[size_t(j)]);
    }
    float den = 0.0f;
    for (float& x : s) den += (x = std::exp(round_to(DType::BF16, x - mx)));
    den += std::exp(round_to(DType::BF16, c.sinks[size_t(h)] - mx));
    for (int d = 0; d < kHd; ++d) {
      float acc = 0.0f;
      for (int j = 0; j <= pos; ++j)
        acc += round_to(DType::BF16, s[size_t(j)] / den) * c.v[(size_t(kvh) * c.len + j) * kHd + d];
      ASSERT_EQ(got[size_t(h) * kHd + d], acc) << "head " << h << " element " << d;
    }
  }
}

}  // namespace
}  // namespace kvp
