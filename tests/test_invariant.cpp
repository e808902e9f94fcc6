// The `invariant` policy (issue 5): every output is reduced in one order that depends on nothing
// but the reduction length, so cache-ON and cache-OFF, thread counts, prefill chunking, batching
// and the cache's capacity all give bitwise-identical logits and tokens. Checked first at the
// kernel level (a row computed inside a big call equals the row computed alone), then end to end
// on stories260K, aidreams260K and a synthesised tiny model of every family, in fp32/fp16/bf16,
// greedy and seeded top-p. And, so that the harness can fail: the same comparisons under the
// standard policy do differ somewhere in fp16.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "checking_build.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "hwy/targets.h"
#include "invariance_battery.h"
#include "kernels/kernels.h"
#include "kernels/policies.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/batch_compare.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

constexpr DType kAllTypes[] = {DType::F32, DType::F16, DType::BF16};
// Both fixed-order policies keep every guarantee tested here (portable adds width independence,
// tests/test_portable.cpp).
constexpr KernelPolicy kFixedOrder[] = {KernelPolicy::Invariant, KernelPolicy::Portable};

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// A weight matrix stored in `t`, with the fp32 values its bits mean.
struct Weights {
  DType t;
  std::vector<uint8_t> bytes;
  std::vector<float> values;
  Weights(DType type, size_t n, std::mt19937& rng) : t(type), bytes(n * dtype_size(type)), values(n) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto& v : values) v = round_to(t, nd(rng));
    from_f32(t, values.data(), bytes.data(), n);
  }
  TensorView view(int64_t N, int64_t K) {
    TensorView v;
    v.name = "w";
    v.dtype = t;
    v.shape = {N, K};
    v.data = bytes.data();
    return v;
  }
};

using test::normals;

// ---------------------------------------------------------------------------------------------
// Kernels.

// Each row of an M-row matmul is bitwise the 1-row matmul of that row, for every M (the direct
// and the blocked paths, K blocking included), every thread count, and K with and without a
// partial last vector; and the result is accurate.
void check_matmul_rows(Kernels& k1, Kernels& k2, Kernels& k3, Kernels& ref, std::mt19937& rng) {
  const std::pair<int, int> NKs[] = {{67, 131}, {300, 64}, {45, 77}, {1, 17}, {97, 3}, {130, 1500}, {50, 2048}};
  for (DType wt : kAllTypes)
    for (auto [N, K] : NKs) {
      Weights w(wt, size_t(N) * K, rng);
      const TensorView W = w.view(N, K);
      const int M = 70;
      const auto x = normals(size_t(M) * K, rng);
      std::vector<float> alone(size_t(M) * N), want(size_t(M) * N);
      for (int m = 0; m < M; ++m) k1.matmul(x.data() + size_t(m) * K, 1, W, DType::F32, alone.data() + size_t(m) * N);
      ref.matmul(x.data(), M, W, DType::F32, want.data());
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
          double mag = 0;
          for (int k = 0; k < K; ++k) mag += std::fabs(double(x[size_t(m) * K + k]) * w.values[size_t(n) * K + k]);
          ASSERT_LE(std::fabs(double(alone[size_t(m) * N + n]) - want[size_t(m) * N + n]), 1e-5 * mag + 1e-30)
              << "N=" << N << " K=" << K << " m=" << m << " n=" << n;
        }
      for (int rows : {2, 3, 4, 5, 15, 16, 17, 64, 70})
        for (Kernels* k : {&k1, &k2, &k3}) {
          std::vector<float> y(size_t(rows) * N, -1.0f);
          k->matmul(x.data(), rows, W, DType::F32, y.data());
          ASSERT_TRUE(same_bits(y.data(), alone.data(), y.size()))
              << "M=" << rows << " N=" << N << " K=" << K << " w=" << dtype_name(wt);
        }
    }
}

TEST(InvariantKernels, PolicyIsInvariant) {
  EXPECT_EQ(make_kernels(KernelPolicy::Invariant, nullptr)->policy(), KernelPolicy::Invariant);
  EXPECT_EQ(parse_policy("invariant"), KernelPolicy::Invariant);
  EXPECT_EQ(policy_name(KernelPolicy::Invariant), "invariant");
}

TEST(InvariantKernels, MatmulRowIsTheSameForEveryMAndThreadCount) {
  ThreadPool p2(2), p3(3);
  for (KernelPolicy pol : kFixedOrder) {
    SCOPED_TRACE(policy_name(pol));
    auto k1 = make_kernels(pol, nullptr);
    auto k2 = make_kernels(pol, &p2);
    auto k3 = make_kernels(pol, &p3);
    auto ref = make_reference_kernels();
    std::mt19937 rng(5);
    check_matmul_rows(*k1, *k2, *k3, *ref, rng);
  }
}

struct AttnCase {
  int rows, heads, kv_heads, head_dim, window;
  DType kv, act;
  float scale = 0.0f, softcap = 0.0f;  // Gemma-2 when > 0
};

struct AttnData {
  AttnCase c;
  int capacity;
  std::vector<float> q;
  std::vector<uint8_t> k, v;
  AttnData(const AttnCase& cc, std::mt19937& rng) : c(cc), capacity(cc.rows + 7) {
    q = normals(size_t(c.rows) * c.heads * c.head_dim, rng, c.act);
    const size_t n = size_t(c.kv_heads) * capacity * c.head_dim;
    const auto kf = normals(n, rng, c.kv, 0.5f), vf = normals(n, rng, c.kv);
    k.resize(n * dtype_size(c.kv));
    v.resize(n * dtype_size(c.kv));
    from_f32(c.kv, kf.data(), k.data(), n);
    from_f32(c.kv, vf.data(), v.data(), n);
  }
  // Poisons positions >= `valid` (NaN), which the call must never read.
  void poison_from(int valid) {
    const size_t es = dtype_size(c.kv);
    std::vector<float> nan(size_t(c.head_dim), std::numeric_limits<float>::quiet_NaN());
    for (int h = 0; h < c.kv_heads; ++h)
      for (int j = valid; j < capacity; ++j) {
        const size_t off = (size_t(h) * capacity + j) * c.head_dim * es;
        from_f32(c.kv, nan.data(), k.data() + off, nan.size());
        from_f32(c.kv, nan.data(), v.data() + off, nan.size());
      }
  }
  // Rows [r0, r0 + n) as one call at start_pos r0.
  std::vector<float> run(Kernels& kern, int r0, int n) {
    AttentionParams p;
    p.n_rows = n;
    p.start_pos = r0;
    p.n_heads = c.heads;
    p.n_kv_heads = c.kv_heads;
    p.head_dim = c.head_dim;
    p.q = q.data() + size_t(r0) * c.heads * c.head_dim;
    p.k_cache = k.data();
    p.v_cache = v.data();
    p.kv = c.kv;
    p.capacity = capacity;
    p.score_divisor = std::sqrt(float(c.head_dim));
    p.score_scale = c.scale;
    p.softcap = c.softcap;
    p.sliding_window = c.window;
    p.act = c.act;
    std::vector<float> out(size_t(n) * c.heads * c.head_dim, -7.0f);
    p.out = out.data();
    kern.attention(p);
    return out;
  }
};

// Prefill rows equal decode steps bitwise (with the cache beyond the step poisoned), for every
// thread count; and the result is close to the reference policy.
void check_attention(const AttnCase& c, Kernels& ref, Kernels* const* inv, int n_inv, std::mt19937& rng) {
  AttnData d(c, rng);
  const size_t width = size_t(c.heads) * c.head_dim;
  const auto want = d.run(ref, 0, c.rows);
  std::vector<std::vector<float>> full;
  for (int t = 0; t < n_inv; ++t) full.push_back(d.run(*inv[t], 0, c.rows));
  const double tol = (c.act == DType::F32 ? 1e-5 : c.act == DType::F16 ? 1e-2 : 6e-2) * 4.0;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(full[0][i], want[i], tol) << "i=" << i << " hd=" << c.head_dim << " window=" << c.window;
  for (int t = 1; t < n_inv; ++t) ASSERT_TRUE(same_bits(full[0].data(), full[t].data(), want.size())) << "threads";
  // Decode steps: row i alone at start_pos i, the cache poisoned past it; and a chunk of 7 rows.
  for (int i = c.rows - 1; i >= 0; --i) {
    d.poison_from(i + 1);
    for (int t = 0; t < n_inv; ++t) {
      const auto row = d.run(*inv[t], i, 1);
      ASSERT_TRUE(same_bits(row.data(), full[0].data() + size_t(i) * width, width))
          << "decode row " << i << " of " << c.rows << " hd=" << c.head_dim << " group=" << c.heads / c.kv_heads
          << " window=" << c.window << " kv=" << dtype_name(c.kv) << " act=" << dtype_name(c.act);
    }
    if (i >= 7 && i % 9 == 0) {
      const auto chunk = d.run(*inv[0], i - 6, 7);
      ASSERT_TRUE(same_bits(chunk.data(), full[0].data() + size_t(i - 6) * width, 7 * width)) << "chunk at " << i;
    }
  }
}

TEST(InvariantKernels, AttentionRowIsTheSameInPrefillDecodeAndChunks) {
  ThreadPool p2(2), p3(3);
  auto ref = make_reference_kernels();
  for (KernelPolicy pol : kFixedOrder) {
    SCOPED_TRACE(policy_name(pol));
    auto k1 = make_kernels(pol, nullptr);
    auto k2 = make_kernels(pol, &p2);
    auto k3 = make_kernels(pol, &p3);
    Kernels* inv[] = {k1.get(), k2.get(), k3.get()};
    std::mt19937 rng(17);
    const int head_dims[] = {8, 48, 64}, windows[] = {0, 5, 70};
    for (DType kv : kAllTypes)
      for (size_t hi = 0; hi < 3; ++hi)
        for (int group : {1, 4})
          for (size_t wi = 0; wi < 3; ++wi) {
            if (!test::runs_grid_point(hi, wi, 3)) continue;  // sanitizer build: each head size with one window
            const int hd = head_dims[hi], window = windows[wi];
            check_attention(AttnCase{150, 2 * group, 2, hd, window, kv, DType::F32}, *ref, inv, 3, rng);
            if (HasFailure()) return;
          }
    for (DType act : {DType::F16, DType::BF16}) {
      check_attention(AttnCase{140, 8, 2, 64, 0, act, act}, *ref, inv, 3, rng);
      // Gemma-2's scaled, soft-capped scores.
      check_attention(AttnCase{140, 4, 2, 48, 16, act, act, 0.25f, 50.0f}, *ref, inv, 3, rng);
    }
  }
}

TEST(InvariantKernels, RmsnormRowIsTheSameForEveryM) {
  ThreadPool p2(2);
  for (KernelPolicy pol : kFixedOrder) {
  SCOPED_TRACE(policy_name(pol));
  auto k1 = make_kernels(pol, nullptr);
  auto k2 = make_kernels(pol, &p2);
  auto ref = make_reference_kernels();
  std::mt19937 rng(11);
  for (DType act : kAllTypes)
    for (int dim : {7, 64, 67, 2048}) {
      const int M = 9;
      const auto x = normals(size_t(M) * dim, rng, act);
      const auto w = normals(size_t(dim), rng, act);
      std::vector<float> a(x.size()), b(x.size()), r(x.size()), want(x.size());
      k1->rmsnorm(x.data(), M, dim, w.data(), 1e-5f, act, a.data());
      k2->rmsnorm(x.data(), M, dim, w.data(), 1e-5f, act, b.data());
      ref->rmsnorm(x.data(), M, dim, w.data(), 1e-5f, act, want.data());
      for (int m = 0; m < M; ++m) k1->rmsnorm(x.data() + size_t(m) * dim, 1, dim, w.data(), 1e-5f, act, r.data() + size_t(m) * dim);
      ASSERT_TRUE(same_bits(a.data(), b.data(), a.size()));
      ASSERT_TRUE(same_bits(a.data(), r.data(), a.size()));
      const double rel = act == DType::F32 ? 1e-5 : act == DType::F16 ? 2.5e-3 : 2e-2;
      for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], want[i], rel * std::fabs(want[i]) + 1e-30);
      k1->rmsnorm_fp32_gain(x.data(), M, dim, w.data(), 1e-6f, act, a.data());
      for (int m = 0; m < M; ++m)
        k2->rmsnorm_fp32_gain(x.data() + size_t(m) * dim, 1, dim, w.data(), 1e-6f, act, r.data() + size_t(m) * dim);
      ASSERT_TRUE(same_bits(a.data(), r.data(), a.size()));
    }
  }
}

// The invariance holds on every compiled SIMD target (lane counts 16, 8, 4), not only this CPU's.
TEST(InvariantKernels, EveryCompiledTargetIsInvariantAndAccurate) {
  ThreadPool p2(2), p3(3);
  auto ref = make_reference_kernels();
  int tested = 0;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    ++tested;
    for (KernelPolicy pol : kFixedOrder) {
    SCOPED_TRACE(policy_name(pol));
    auto k1 = make_kernels(pol, nullptr);
    auto k2 = make_kernels(pol, &p2);
    auto k3 = make_kernels(pol, &p3);
    Kernels* inv[] = {k1.get(), k2.get()};
    std::mt19937 rng(77);
    for (DType wt : kAllTypes) {
      const int N = 45, K = 77;
      Weights w(wt, size_t(N) * K, rng);
      const auto x = normals(size_t(20) * K, rng);
      std::vector<float> alone(size_t(20) * N), y(size_t(20) * N);
      for (int m = 0; m < 20; ++m) k1->matmul(x.data() + size_t(m) * K, 1, w.view(N, K), DType::F32, alone.data() + size_t(m) * N);
      for (int M : {3, 20}) {
        k3->matmul(x.data(), M, w.view(N, K), DType::F32, y.data());
        ASSERT_TRUE(same_bits(y.data(), alone.data(), size_t(M) * N)) << "M=" << M;
      }
    }
    check_attention(AttnCase{80, 4, 2, 24, 0, DType::F16, DType::F16}, *ref, inv, 2, rng);
    check_attention(AttnCase{70, 4, 2, 48, 16, DType::BF16, DType::BF16, 0.25f, 50.0f}, *ref, inv, 2, rng);
    }
    if (HasFailure()) break;
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_GE(tested, 1);
}

// ---------------------------------------------------------------------------------------------
// End to end.

using test::batch;
using test::Counts;
using test::greedy;
using test::prompts_for;
using test::run_battery;
using test::Setup;
using test::solo;
using test::top_p;
using test::Trace;

// The mixtures of experts too: the experts' matmuls see only the rows routed to them, a count the
// cache path, chunking and batch all change.
const std::vector<std::string> kFamilies = {"llama",  "mistral", "gemma2",    "qwen2",    "qwen3",
                                            "gemma3", "olmo2",   "mixtral",   "qwen2_moe", "qwen3_moe", "olmoe",
                                            "olmo3",  "exaone4", "gpt_oss"};

std::shared_ptr<const Model> synth(const std::string& arch, DType dt) {
  static std::map<std::pair<std::string, int>, std::shared_ptr<const Model>> cache;
  auto& m = cache[{arch, int(dt)}];
  if (!m) m = Model::from_checkpoint(synthesize_checkpoint(synthetic_config(arch, "tiny"), dt), dt);
  return m;
}

// The full battery (cache ON/OFF, threads, chunks 1/7, exact cache, batch of 4 vs each solo) for
// every family, dtype and sampler.
class InvariantSynth : public ::testing::TestWithParam<std::string> {};

TEST_P(InvariantSynth, BitwiseAcrossCachePathsThreadsChunksBatchAndCacheSize) {
  const std::string arch = GetParam();
  for (DType dt : kAllTypes)
    for (const auto& [sname, sampler] : {std::pair{"greedy", greedy()}, std::pair{"top-p", top_p()}}) {
      for (KernelPolicy pol : kFixedOrder) {
        Counts c;
        run_battery(arch + " " + std::string(dtype_name(dt)) + " " + sname + " " + policy_name(pol), synth(arch, dt),
                    pol, sampler, 40, true, true, c);
        EXPECT_EQ(c.differing, 0);
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Families, InvariantSynth, ::testing::ValuesIn(kFamilies));

class InvariantReal : public ::testing::TestWithParam<std::string> {};

TEST_P(InvariantReal, BitwiseAcrossCachePathsThreadsChunksBatchAndCacheSize) {
  const std::string name = GetParam();
  KVP_REQUIRE_SHARED(path, "models/" + name + "/" + name + ".bin");
  for (DType dt : kAllTypes) {
    auto model = Model::load(path, dt);
    for (const auto& [sname, sampler] : {std::pair{"greedy", greedy()}, std::pair{"top-p", top_p()}}) {
      for (KernelPolicy pol : kFixedOrder) {
        Counts c;
        run_battery(name + " " + std::string(dtype_name(dt)) + " " + sname + " " + policy_name(pol), model, pol,
                    sampler, 48, true, true, c);
        EXPECT_EQ(c.differing, 0);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RealModels, InvariantReal, ::testing::Values("stories260K", "aidreams260K"));

// The harness can fail: the standard policy, run through the same comparisons on the synthesised
// models in fp16, differs somewhere (shape-dependent GEMM/attention orders, split-K GEMV).
TEST(InvariantControl, StandardPolicyDiffersSomewhereInFp16) {
  Counts total;
  for (const auto& arch : kFamilies) {
    Counts c;
    run_battery(arch + " fp16 standard", synth(arch, DType::F16), KernelPolicy::Standard, greedy(), 40, true, false, c);
    std::printf("[ measured ] %s fp16 standard: %d of %d comparisons differ\n", arch.c_str(), c.differing,
                c.comparisons);
    total.comparisons += c.comparisons;
    total.differing += c.differing;
  }
  EXPECT_GT(total.differing, 0) << "the standard policy agreed bitwise in all " << total.comparisons
                                << " comparisons: the invariance tests would not notice a broken policy";
}

// The library report: invariant batches never differ from solo; the standard rate is reported.
TEST(InvariantControl, BatchVersusSoloReport) {
  auto model = synth("llama", DType::F16);
  const auto prompts = prompts_for(model->config.vocab_size, model->config.bos_id);
  GenerationConfig g;
  g.max_new_tokens = 24;
  g.stop_at_eos = false;
  for (KernelPolicy pol : {KernelPolicy::Invariant, KernelPolicy::Standard}) {
    EngineOptions eo;
    eo.kernels = pol;
    eo.threads = 2;
    eo.kv_dtype = DType::F16;
    const auto r = compare_batch_to_solo(model, eo, prompts, g);
    ASSERT_EQ(r.sequences.size(), prompts.size());
    std::printf("[ measured ] llama fp16 %s: batch vs solo, tokens differ in %d/%zu, logits in %d/%zu\n",
                policy_name(pol).c_str(), r.tokens_differ, r.sequences.size(), r.logits_differ, r.sequences.size());
    for (const auto& s : r.sequences) EXPECT_EQ(int(s.batch_ids.size()), 24);
    if (pol == KernelPolicy::Invariant) {
      EXPECT_EQ(r.tokens_differ, 0);
      EXPECT_EQ(r.logits_differ, 0);
      EXPECT_EQ(r.token_divergence_rate(), 0.0);
      for (const auto& s : r.sequences) EXPECT_EQ(s.steps_compared, 24);
    }
  }
}

// Batched generation keeps each sequence's own stop conditions and context limit.
TEST(InvariantBatch, SequencesStopIndependently) {
  auto model = synth("qwen2", DType::F32);
  EngineOptions eo;
  eo.kernels = KernelPolicy::Invariant;
  eo.cache_capacity = 20;
  Engine e(model, eo);
  GenerationConfig g;
  g.max_new_tokens = 30;
  g.stop_at_eos = false;
  const auto r = e.generate_batch({{5, 6, 7}, std::vector<int>(18, 9), {1}}, g, nullptr);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].stop_reason, "context_full");
  EXPECT_EQ(r[0].output_ids.size(), 18u);  // positions 3..20 predicted, then the cache is full
  EXPECT_EQ(r[1].output_ids.size(), 3u);
  EXPECT_EQ(r[2].output_ids.size(), 20u);
  // ... the same as alone.
  for (int b = 0; b < 3; ++b) {
    GenerationConfig gb = g;
    gb.sequence_id = uint64_t(b);
    Engine alone(model, eo);
    const std::vector<int> p = b == 0 ? std::vector<int>{5, 6, 7} : b == 1 ? std::vector<int>(18, 9) : std::vector<int>{1};
    const auto s = alone.generate(p, gb, nullptr);
    EXPECT_EQ(s.output_ids, r[size_t(b)].output_ids) << b;
    EXPECT_EQ(s.stop_reason, r[size_t(b)].stop_reason) << b;
  }
  EXPECT_TRUE(e.generate_batch({}, g, nullptr).empty());
}

// ---------------------------------------------------------------------------------------------
// Command line: --kernels invariant, --prefill-chunk, --batch-size, and bench with a policy list.
std::string run_cli(const std::string& args, int* status) {
  test::TempDir tmp;
  const std::string cmd = std::string(KVPARITY_BIN) + " " + args + " 2>" + tmp.file("err");
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int st = pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  if (*status != 0) {
    std::ifstream e(tmp.file("err"));
    out += std::string(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  }
  return out;
}

TEST(InvariantCli, BatchedGenerateMatchesSoloAndBenchListsPolicies) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string common = "generate --model '" + model +
                             "' --kernels invariant --dtype fp16 --sampler top-p --seed 3 --max-new-tokens 24 --json";
  int st = 0;
  const std::string batched = run_cli(common + " --prompt 'Once upon a time' --prompt 'The cat' --batch-size 3", &st);
  ASSERT_EQ(st, 0) << batched;
  std::vector<nlohmann::json> lines;
  std::istringstream in(batched);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 3u) << batched;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(lines[size_t(i)]["sequence"].get<int>(), i);
    EXPECT_EQ(lines[size_t(i)]["output_ids"].size(), 24u);
  }
  EXPECT_EQ(lines[0]["prompt_ids"], lines[2]["prompt_ids"]);  // prompts cycle
  EXPECT_NE(lines[0]["prompt_ids"], lines[1]["prompt_ids"]);
  // Sequence 0 (sequence id 0) alone: cache on with chunked prefill and two threads, and cache off.
  for (const char* extra : {" --prefill-chunk 3 --threads 2", " --cache off"}) {
    const std::string s = run_cli(common + " --prompt 'Once upon a time'" + extra, &st);
    ASSERT_EQ(st, 0) << s;
    EXPECT_EQ(nlohmann::json::parse(s)["output_ids"], lines[0]["output_ids"]) << extra;
  }
  const std::string b = run_cli("bench --model '" + model +
                                    "' --dtype fp16 --kernels standard,invariant --threads 2 --prompt-tokens 8"
                                    " --decode-tokens 4 --cache-off-tokens 8 --repeats 1 --bandwidth-gbs 10 --json",
                                &st);
  ASSERT_EQ(st, 0) << b;
  const auto j = nlohmann::json::parse(b);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["kernels"], "standard");
  EXPECT_EQ(j[1]["kernels"], "invariant");
  for (const char* k : {"dtype", "threads", "prefill_tok_s", "decode_tok_s", "cache_off_step_s", "model_bytes",
                        "bandwidth_bound_tok_s"})
    EXPECT_TRUE(j[1].contains(k)) << k;
  EXPECT_EQ(run_cli("generate --model '" + model + "' --prefill-chunk -1", &st).empty(), false);
  EXPECT_EQ(st, 2);
}

}  // namespace
}  // namespace kvp
