// The `portable` policy (issue 15): the invariant policy's guarantees (tests/test_invariant.cpp
// runs its whole battery on both policies) plus the same bits on every SIMD target. Checked at the
// kernel level on every target this build compiled and this CPU runs (AVX-512, AVX2 and the
// 128-bit/scalar fallback on the build machines), end to end through --simd, and against golden
// SHA-256 digests pinned here, so that any machine running the suite checks itself against the
// bits this one produced. And, so that the harness can fail: the invariant policy's bits do
// differ between targets.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/kv_type.h"
#include "core/quant.h"
#include "core/quantize.h"
#include "core/sha256.h"
#include "core/thread_pool.h"
#include "hwy/targets.h"
#include "kernels/kernels.h"
#include "kernels/policies.h"
#include "kernels/portable_simd.h"
#include "kernels/simd_target.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/generator.h"
#include "portable_golden.h"
#include "test_util.h"

namespace kvp {
namespace {

constexpr DType kAllTypes[] = {DType::F32, DType::F16, DType::BF16};

using test::normals;

// Ulps between two finite floats of the same sign (or both zero).
int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if (ia < 0) ia = int32_t(0x80000000u - uint32_t(ia));
  if (ib < 0) ib = int32_t(0x80000000u - uint32_t(ib));
  return std::llabs(int64_t(ia) - int64_t(ib));
}

TEST(PortableKernels, PolicyIsPortable) {
  EXPECT_EQ(make_kernels(KernelPolicy::Portable, nullptr)->policy(), KernelPolicy::Portable);
  EXPECT_EQ(parse_policy("portable"), KernelPolicy::Portable);
  EXPECT_EQ(policy_name(KernelPolicy::Portable), "portable");
}

// The policy's own exp and tanh stay within a few ulps of the true values (libm in double, then
// rounded), including the subnormal range, overflow and the special values.
TEST(PortableKernels, ExpAndTanhAreAccurate) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  int64_t worst_exp = 0, worst_tanh = 0;
  for (float x = -103.0f; x < 88.7f; x += 0.0037f) {
    const float want = float(std::exp(double(x)));
    const float got = psimd::exp_f32(x);
    if (want < std::numeric_limits<float>::min()) {  // subnormal results: one subnormal step
      ASSERT_LE(std::fabs(double(got) - want), 1.5e-45) << x;
      continue;
    }
    worst_exp = std::max(worst_exp, ulps(got, want));
    ASSERT_LE(ulps(got, want), 2) << "exp(" << x << ") = " << got << ", want " << want;
  }
  for (float x = -12.0f; x < 12.0f; x += 0.00071f) {
    const float want = float(std::tanh(double(x)));
    const float got = psimd::tanh_f32(x);
    worst_tanh = std::max(worst_tanh, ulps(got, want));
    ASSERT_LE(ulps(got, want), 3) << "tanh(" << x << ") = " << got << ", want " << want;
  }
  for (float x : {1e-30f, 1e-8f, 1e-4f, 0.4999f, 0.5f, 0.5001f}) {
    ASSERT_LE(ulps(psimd::tanh_f32(x), float(std::tanh(double(x)))), 3) << x;
    ASSERT_LE(ulps(psimd::tanh_f32(-x), float(std::tanh(-double(x)))), 3) << -x;
  }
  std::printf("worst exp error %lld ulp, tanh %lld ulp\n", (long long)worst_exp, (long long)worst_tanh);
  EXPECT_EQ(psimd::exp_f32(0.0f), 1.0f);
  EXPECT_EQ(psimd::exp_f32(-inf), 0.0f);
  EXPECT_EQ(psimd::exp_f32(inf), inf);
  EXPECT_EQ(psimd::exp_f32(89.0f), inf);
  EXPECT_EQ(psimd::exp_f32(-110.0f), 0.0f);
  EXPECT_TRUE(std::isnan(psimd::exp_f32(nan)));
  EXPECT_EQ(psimd::tanh_f32(inf), 1.0f);
  EXPECT_EQ(psimd::tanh_f32(-inf), -1.0f);
  EXPECT_TRUE(std::signbit(psimd::tanh_f32(-0.0f)));
  EXPECT_TRUE(std::isnan(psimd::tanh_f32(nan)));
}

// Every kernel the pass calls, on inputs that exercise tails (K, head_dim and dim not multiples of
// 16), K blocks, the direct and blocked GEMMs, partial attention tiles, windows, Gemma-2's scores,
// fp32/fp16/bf16 and GGUF-quantised weights, float, q8_0/q4_0 and fp8 KV caches, with 1 and 2
// threads: all outputs in one buffer.
std::vector<float> kernel_outputs(KernelPolicy pol) {
  ThreadPool p2(2);
  auto k1 = make_kernels(pol, nullptr);
  auto k2 = make_kernels(pol, &p2);
  std::mt19937 rng(4242);
  std::vector<float> out;
  auto keep = [&](const std::vector<float>& v) { out.insert(out.end(), v.begin(), v.end()); };
  for (DType wt : kAllTypes)
    for (auto [N, K] : {std::pair{45, 77}, std::pair{37, 1500}, std::pair{20, 2048}}) {
      const auto wf = normals(size_t(N) * K, rng, wt);
      std::vector<uint8_t> wb(wf.size() * dtype_size(wt));
      from_f32(wt, wf.data(), wb.data(), wf.size());
      const auto x = normals(size_t(40) * K, rng);
      for (int M : {1, 3, 40}) {
        std::vector<float> y(size_t(M) * N);
        (M == 3 ? k2 : k1)->matmul(x.data(), M, test::weight_view(wb, wt, N, K), DType::F32, y.data());
        keep(y);
      }
    }
  // Quantised weights (GGUF blocks), dequantised on the fly through the same fp32 paths.
  for (QuantType qt : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K, QuantType::Q6_K}) {
    const int N = 19, K = 512;
    const auto wf = normals(size_t(N) * K, rng);
    const auto wb = test::quantized_rows(qt, wf, N, K);
    TensorView W = test::weight_view(wb, DType::F32, N, K);
    W.quant = qt;
    const auto x = normals(size_t(20) * K, rng);
    for (int M : {1, 20}) {
      std::vector<float> y(size_t(M) * N);
      k2->matmul(x.data(), M, W, DType::F32, y.data());
      keep(y);
    }
  }
  struct Case {
    int rows, heads, kv_heads, hd, window;
    DType act;
    float scale, cap;
    KvType kv;
  };
  for (const Case& c : {Case{70, 4, 2, 24, 0, DType::F16, 0.0f, 0.0f, DType::F16},
                        Case{90, 2, 1, 64, 0, DType::F32, 0.0f, 0.0f, DType::F32},
                        Case{70, 4, 2, 48, 16, DType::BF16, 0.25f, 50.0f, DType::BF16},
                        Case{70, 4, 2, 64, 0, DType::F16, 0.0f, 0.0f, KvType(KvFormat::Q8_0)},
                        Case{70, 4, 2, 64, 0, DType::BF16, 0.0f, 0.0f, KvType(KvFormat::Q4_0)},
                        Case{70, 4, 2, 64, 0, DType::F16, 0.0f, 0.0f, KvType(KvFormat::FP8_E4M3, 0.5f)}}) {
    const int cap_rows = c.rows + 3;
    const auto q = normals(size_t(c.rows) * c.heads * c.hd, rng, c.act);
    const size_t n = size_t(c.kv_heads) * cap_rows * c.hd;
    const auto kf = normals(n, rng, c.act, 0.5f), vf = normals(n, rng, c.act);
    std::vector<uint8_t> kb(c.kv.bytes(n)), vb(c.kv.bytes(n));
    kv_encode(c.kv, kf.data(), n, kb.data());
    kv_encode(c.kv, vf.data(), n, vb.data());
    AttentionParams p;
    p.n_rows = c.rows;
    p.n_heads = c.heads;
    p.n_kv_heads = c.kv_heads;
    p.head_dim = c.hd;
    p.q = q.data();
    p.k_cache = kb.data();
    p.v_cache = vb.data();
    p.kv = c.kv;
    p.capacity = cap_rows;
    p.score_divisor = std::sqrt(float(c.hd));
    p.score_scale = c.scale;
    p.softcap = c.cap;
    p.sliding_window = c.window;
    p.act = c.act;
    std::vector<float> o(q.size());
    p.out = o.data();
    k2->attention(p);
    keep(o);
  }
  for (DType act : kAllTypes)
    for (int dim : {7, 64, 67, 2048}) {
      const auto x = normals(size_t(3) * dim, rng, act, 3.0f);
      const auto w = normals(size_t(dim), rng, act);
      std::vector<float> y(x.size());
      k1->rmsnorm(x.data(), 3, dim, w.data(), 1e-5f, act, y.data());
      keep(y);
      k1->rmsnorm_fp32_gain(x.data(), 3, dim, w.data(), 1e-6f, act, y.data());
      keep(y);
      auto g = normals(size_t(dim) * 3, rng, act, 4.0f);
      k1->silu_mul(g.data(), x.data(), g.size(), act);
      keep(g);
      g = normals(size_t(dim) * 3, rng, act, 4.0f);
      k1->gelu_tanh_mul(g.data(), x.data(), g.size(), act);
      keep(g);
      g = normals(size_t(dim) * 3, rng, act, 40.0f);
      k1->softcap(g.data(), g.size(), 30.0f, act);
      keep(g);
    }
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The kernels give the same bits on every target; the invariant policy, run through the same
// inputs, does not (its sums are grouped by the vector width), which shows the comparison bites.
TEST(PortableKernels, EveryTargetGivesTheSameBits) {
  std::vector<float> first, first_inv;
  std::string first_name;
  int tested = 0, invariant_differs = 0;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    const std::string name = hwy::TargetName(target);
    const auto out = kernel_outputs(KernelPolicy::Portable);
    const auto inv = kernel_outputs(KernelPolicy::Invariant);
    if (tested++ == 0) {
      first = out;
      first_inv = inv;
      first_name = name;
      continue;
    }
    ASSERT_EQ(out.size(), first.size());
    size_t diff = 0;
    for (size_t i = 0; i < out.size(); ++i)
      if (std::memcmp(&out[i], &first[i], 4) != 0) ++diff;
    EXPECT_EQ(diff, 0u) << name << " vs " << first_name << ": " << diff << " of " << out.size() << " outputs differ";
    if (!same_bits(inv, first_inv)) ++invariant_differs;
  }
  hwy::SetSupportedTargetsForTest(0);
  std::printf("targets compared: %d\n", tested);
  ASSERT_GE(tested, 1);
  // Every x86-64 CPU runs at least AVX2 (on machines that have it) and the fallback.
  if (tested >= 2) EXPECT_EQ(invariant_differs, tested - 1) << "the invariant policy should differ between widths";
}

// ---------------------------------------------------------------------------------------------
// End to end: the digest of a greedy run's logits and ids, per family and dtype, on every target,
// both cache paths, 1 and 2 threads — and pinned (tests/portable_golden.h; the CUDA suite checks
// the GPU against the same digests).

using test::run_digest;
using test::kPortableGolden;
using test::simd_targets_here;

class PortableGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(PortableGolden, LogitsDigestIsTheSameOnEveryTargetCachePathAndThreadCount) {
  const std::string arch = GetParam();
  const auto targets = simd_targets_here();
  ASSERT_FALSE(targets.empty());
  for (DType dt : kAllTypes) {
    const std::string key = arch + " " + std::string(dtype_name(dt));
    auto model = Model::from_checkpoint(synthesize_checkpoint(synthetic_config(arch, "tiny"), dt), dt);
    const std::string want = run_digest(model, targets.front(), CacheMode::On, 1);
    std::printf("%s: %s\n", key.c_str(), want.c_str());
    for (SimdTarget t : targets) {
      EXPECT_EQ(run_digest(model, t, CacheMode::On, 2), want) << key << " simd " << simd_name(t) << " cache ON";
      EXPECT_EQ(run_digest(model, t, CacheMode::Off, 1), want) << key << " simd " << simd_name(t) << " cache OFF";
    }
    EXPECT_EQ(want, kPortableGolden.at(key)) << key << ": the golden digest";
  }
}

INSTANTIATE_TEST_SUITE_P(Families, PortableGolden,
                         ::testing::Values("llama", "mistral", "gemma2", "qwen2", "qwen3", "gemma3", "olmo2", "mixtral",
                                           "qwen2_moe", "qwen3_moe", "olmoe", "olmo3", "exaone4", "gpt_oss"));

}  // namespace
}  // namespace kvp
