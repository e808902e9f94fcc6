// The `standard` policy against the reference oracle: same semantics up to summation order, plus
// the property the project rests on — decode (M = 1) and recomputation (M > 1) really do sum in
// different orders.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "hwy/targets.h"
#include "kernels/kernels.h"
#include "kernels/policies.h"
#include "kernels/simd_ops.h"
#include "kernels/simd_target.h"
#include "test_util.h"

namespace kvp {
namespace {

constexpr DType kStandardTestTypes[] = {DType::F32, DType::F16, DType::BF16};

// A tensor stored in `t`, built from random normals rounded to `t`.
struct Stored {
  DType t = DType::F32;
  std::vector<float> f32;
  std::vector<uint16_t> half;
  std::vector<float> values;  // what the stored bits mean, as fp32

  Stored(DType type, size_t n, std::mt19937& rng, float scale = 1.0f) : t(type), values(n) {
    std::normal_distribution<float> nd(0.0f, scale);
    for (auto& v : values) v = round_to(t, nd(rng));
    if (t == DType::F32) {
      f32 = values;
    } else {
      half.resize(n);
      from_f32(t, values.data(), half.data(), n);
    }
  }
  void* data() { return t == DType::F32 ? static_cast<void*>(f32.data()) : static_cast<void*>(half.data()); }
  void set_nan(size_t i) {
    if (t == DType::F32)
      f32[i] = std::numeric_limits<float>::quiet_NaN();
    else
      half[i] = t == DType::F16 ? 0x7e00 : 0x7fc0;
  }
  void set_zero(size_t i) {
    if (t == DType::F32)
      f32[i] = 0.0f;
    else
      half[i] = 0;
  }
};

TensorView view_of(Stored& s, int64_t N, int64_t K) {
  TensorView v;
  v.name = "w";
  v.dtype = s.t;
  v.shape = {N, K};
  v.data = s.data();
  return v;
}

std::vector<float> random_x(size_t n, std::mt19937& rng, DType act = DType::F32) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = round_to(act, nd(rng));
  return x;
}

bool same_bits(float a, float b) { return f32_bits(a) == f32_bits(b); }

// Checks y against the reference with the error normalised by sum_k |x_k w_k| per output.
void expect_matmul_close(const std::vector<float>& x, int M, Stored& w, int N, int K, const std::vector<float>& got,
                         const std::vector<float>& want, double rel, const std::string& what) {
  int bad = 0;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double mag = 0.0;
      for (int k = 0; k < K; ++k) mag += std::fabs(double(x[size_t(m) * K + k]) * w.values[size_t(n) * K + k]);
      const double err = std::fabs(double(got[size_t(m) * N + n]) - want[size_t(m) * N + n]);
      if (!(err <= rel * mag + 1e-30) && bad++ < 5)
        ADD_FAILURE() << what << " m=" << m << " n=" << n << " got " << got[size_t(m) * N + n] << " want "
                      << want[size_t(m) * N + n] << " (sum|xw| " << mag << ")";
    }
  EXPECT_EQ(bad, 0) << what;
}

TEST(StandardKernels, PolicyIsStandard) {
  EXPECT_EQ(make_standard_kernels(nullptr)->policy(), KernelPolicy::Standard);
  EXPECT_EQ(make_kernels(KernelPolicy::Standard, nullptr)->policy(), KernelPolicy::Standard);
}

TEST(StandardKernels, MatmulMatchesReference) {
  auto ref = make_reference_kernels();
  ThreadPool pool2(2);
  const int Ms[] = {1, 2, 3, 7, 16, 64, 130};
  const std::pair<int, int> NKs[] = {{67, 131}, {131, 67}, {300, 64}, {5, 1000}, {1, 17}, {97, 3}};
  std::mt19937 rng(1234);
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
    auto std_k = make_standard_kernels(pool);
    for (DType wt : kStandardTestTypes)
      for (auto [N, K] : NKs)
        for (int M : Ms) {
          Stored w(wt, size_t(N) * K, rng);
          auto x = random_x(size_t(M) * K, rng);
          TensorView W = view_of(w, N, K);
          std::vector<float> want(size_t(M) * N), got(size_t(M) * N, -1.0f);
          ref->matmul(x.data(), M, W, DType::F32, want.data());
          std_k->matmul(x.data(), M, W, DType::F32, got.data());
          expect_matmul_close(x, M, w, N, K, got, want, 1e-5,
                              "M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                                  " w=" + std::string(dtype_name(wt)) + " threads=" + std::to_string(pool ? 2 : 1));
        }
  }
}

// Rows 2..15 use the GEMV dot kernel's per-output order, so their rows equal GEMV bitwise; threads
// only split rows. Shapes: every M up to 15 (x row tiles and their remainders), N leaving partial
// W row tiles, K with a vector and a scalar tail; on every SIMD target (their tiles differ).
TEST(StandardKernels, SmallBatchRowsEqualGemvBitwise) {
  ThreadPool pool2(2);
  auto k1 = make_standard_kernels(nullptr);
  auto k2 = make_standard_kernels(&pool2);
  std::mt19937 rng(7);
  struct AutoAfter {
    ~AutoAfter() { use_simd(SimdTarget::Auto); }
  } restore;
  for (SimdTarget target : test::simd_targets_here()) {
    use_simd(target);
    for (DType wt : kStandardTestTypes)
      for (auto [N, K] : {std::pair{301, 333}, std::pair{7, 1100}}) {
        Stored w(wt, size_t(N) * K, rng);
        TensorView W = view_of(w, N, K);
        for (int M = 2; M < 16; ++M) {
          auto x = random_x(size_t(M) * K, rng);
          std::vector<float> batch(size_t(M) * N), batch2(size_t(M) * N), row(N);
          k1->matmul(x.data(), M, W, DType::F32, batch.data());
          k2->matmul(x.data(), M, W, DType::F32, batch2.data());
          for (int m = 0; m < M; ++m) {
            k1->matmul(x.data() + size_t(m) * K, 1, W, DType::F32, row.data());
            for (int n = 0; n < N; ++n) {
              const std::string at = simd_name(target) + " w=" + std::string(dtype_name(wt)) +
                                     " M=" + std::to_string(M) + " N=" + std::to_string(N) +
                                     " m=" + std::to_string(m) + " n=" + std::to_string(n);
              ASSERT_TRUE(same_bits(row[n], batch[size_t(m) * N + n])) << at;
              ASSERT_TRUE(same_bits(row[n], batch2[size_t(m) * N + n])) << at;
            }
          }
        }
      }
  }
}

// The packed GEMM's contract (simd_ops.h): every output is one FMA chain in k order from zero,
// whatever the k slicing, the W blocking, the panel width or the thread split. K spans several
// k slices with a ragged last one; N leaves a partial micro-tile; M a half and a ragged panel.
TEST(StandardKernels, PackedGemmIsOneFmaChainPerOutput) {
  ThreadPool pool2(2);
  std::mt19937 rng(99);
  for (DType wt : kStandardTestTypes)
    for (auto [M, N, K] : {std::tuple{16, 29, 700}, std::tuple{45, 101, 1100}, std::tuple{70, 13, 300}}) {
      Stored w(wt, size_t(N) * K, rng);
      TensorView W = view_of(w, N, K);
      auto x = random_x(size_t(M) * K, rng);
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
        std::vector<float> y(size_t(M) * N);
        make_standard_kernels(pool)->matmul(x.data(), M, W, DType::F32, y.data());
        int bad = 0;
        for (int m = 0; m < M; ++m)
          for (int n = 0; n < N; ++n) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc = std::fma(x[size_t(m) * K + k], w.values[size_t(n) * K + k], acc);
            if (!same_bits(acc, y[size_t(m) * N + n]) && bad++ < 3)
              ADD_FAILURE() << "M=" << M << " N=" << N << " K=" << K << " w=" << dtype_name(wt) << " m=" << m
                            << " n=" << n << ": " << y[size_t(m) * N + n] << " vs chain " << acc;
          }
        ASSERT_EQ(bad, 0);
      }
    }
}

// The premise of the project: a decode step's GEMV and the same row inside a prefill GEMM sum in
// different orders, which shows up as differing fp16-rounded outputs for some elements.
TEST(StandardKernels, GemvAndGemmOrdersDifferInFp16) {
  auto k = make_standard_kernels(nullptr);
  std::mt19937 rng(99);
  const int N = 1024, K = 2048, M = 64;
  int fp32_diffs = 0, fp16_diffs = 0;
  for (int trial = 0; trial < 3; ++trial) {
    Stored w(DType::F16, size_t(N) * K, rng);
    TensorView W = view_of(w, N, K);
    auto x = random_x(size_t(M) * K, rng, DType::F16);
    std::vector<float> gemm(size_t(M) * N), gemv(N);
    k->matmul(x.data(), M, W, DType::F32, gemm.data());
    k->matmul(x.data(), 1, W, DType::F32, gemv.data());
    for (int n = 0; n < N; ++n) {
      fp32_diffs += !same_bits(gemv[n], gemm[n]);
      fp16_diffs += f32_to_f16(gemv[n]) != f32_to_f16(gemm[n]);
    }
  }
  EXPECT_GT(fp32_diffs, 0);
  EXPECT_GT(fp16_diffs, 0) << "GEMV and GEMM agree bitwise after fp16 rounding: the two paths are not different";
  RecordProperty("fp32_diffs", fp32_diffs);
  RecordProperty("fp16_diffs", fp16_diffs);
}

// Split-K (few rows per thread) is a third order: it must still be accurate.
TEST(StandardKernels, SplitKGemvAgreesAcrossThreads) {
  ThreadPool pool2(2), pool3(3);
  std::mt19937 rng(5);
  const int N = 40, K = 1500;
  Stored w(DType::BF16, size_t(N) * K, rng);
  TensorView W = view_of(w, N, K);
  auto x = random_x(K, rng);
  std::vector<float> want(N), y1(N), y2(N), y3(N);
  make_reference_kernels()->matmul(x.data(), 1, W, DType::F32, want.data());
  make_standard_kernels(nullptr)->matmul(x.data(), 1, W, DType::F32, y1.data());
  make_standard_kernels(&pool2)->matmul(x.data(), 1, W, DType::F32, y2.data());
  make_standard_kernels(&pool3)->matmul(x.data(), 1, W, DType::F32, y3.data());
  expect_matmul_close(x, 1, w, N, K, y1, want, 1e-5, "threads=1");
  expect_matmul_close(x, 1, w, N, K, y2, want, 1e-5, "threads=2");
  expect_matmul_close(x, 1, w, N, K, y3, want, 1e-5, "threads=3");
}

struct StandardAttnCase {
  int n_rows, start_pos, n_heads, n_kv_heads, head_dim, window;
  DType kv, act;
};

std::string describe(const StandardAttnCase& c) {
  return "rows=" + std::to_string(c.n_rows) + " start=" + std::to_string(c.start_pos) +
         " heads=" + std::to_string(c.n_heads) + "/" + std::to_string(c.n_kv_heads) +
         " hd=" + std::to_string(c.head_dim) + " window=" + std::to_string(c.window) + " kv=" +
         std::string(dtype_name(c.kv)) + " act=" + std::string(dtype_name(c.act));
}

struct StandardAttnData {
  StandardAttnCase c;
  int capacity;
  std::vector<float> q;
  Stored k, v;
  StandardAttnData(const StandardAttnCase& cc, std::mt19937& rng)
      : c(cc),
        capacity(cc.start_pos + cc.n_rows + 9),
        q(random_x(size_t(cc.n_rows) * cc.n_heads * cc.head_dim, rng, cc.act)),
        k(cc.kv, size_t(cc.n_kv_heads) * capacity * cc.head_dim, rng, 0.5f),
        v(cc.kv, size_t(cc.n_kv_heads) * capacity * cc.head_dim, rng) {}
  // Positions the call must never read get NaN (or zero, to show the output does not change).
  void poison(bool nan) {
    for (int h = 0; h < c.n_kv_heads; ++h)
      for (int j = c.start_pos + c.n_rows; j < capacity; ++j)
        for (int d = 0; d < c.head_dim; ++d) {
          const size_t i = (size_t(h) * capacity + j) * c.head_dim + d;
          if (nan) {
            k.set_nan(i);
            v.set_nan(i);
          } else {
            k.set_zero(i);
            v.set_zero(i);
          }
        }
  }
  std::vector<float> run(Kernels& kern) {
    AttentionParams p;
    p.n_rows = c.n_rows;
    p.start_pos = c.start_pos;
    p.n_heads = c.n_heads;
    p.n_kv_heads = c.n_kv_heads;
    p.head_dim = c.head_dim;
    p.q = q.data();
    p.k_cache = k.data();
    p.v_cache = v.data();
    p.kv = c.kv;
    p.capacity = capacity;
    p.score_divisor = std::sqrt(float(c.head_dim));
    p.sliding_window = c.window;
    p.act = c.act;
    std::vector<float> out(size_t(c.n_rows) * c.n_heads * c.head_dim, -7.0f);
    p.out = out.data();
    kern.attention(p);
    return out;
  }
  float max_abs_v() const {
    float m = 0.0f;
    for (float x : v.values) m = std::max(m, std::fabs(x));
    return m;
  }
};

double attn_tolerance(DType act) {
  switch (act) {
    case DType::F32: return 1e-5;
    case DType::F16: return 1e-2;
    case DType::BF16: return 6e-2;
  }
  return 0.0;
}

void check_attention(const StandardAttnCase& c, Kernels& ref, Kernels& std1, Kernels& std2, std::mt19937& rng) {
  StandardAttnData data(c, rng);
  data.poison(false);
  const auto want = data.run(ref);
  const auto got1 = data.run(std1);
  const auto got2 = data.run(std2);
  data.poison(true);
  const auto nan1 = data.run(std1);
  const auto nan2 = data.run(std2);
  const double tol = attn_tolerance(c.act) * std::max(1.0f, data.max_abs_v());
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const bool ok = std::fabs(got1[i] - want[i]) <= tol && std::fabs(got2[i] - want[i]) <= tol &&
                    std::isfinite(nan1[i]) && same_bits(nan1[i], got1[i]) && same_bits(nan2[i], got2[i]);
    if (!ok && bad++ < 3)
      ADD_FAILURE() << describe(c) << " i=" << i << " ref " << want[i] << " std(1t) " << got1[i] << " std(2t) "
                    << got2[i] << " poisoned " << nan1[i] << "/" << nan2[i];
  }
  EXPECT_EQ(bad, 0) << describe(c);
}

TEST(StandardKernels, AttentionMatchesReference) {
  auto ref = make_reference_kernels();
  ThreadPool pool2(2);
  auto s1 = make_standard_kernels(nullptr);
  auto s2 = make_standard_kernels(&pool2);
  std::mt19937 rng(42);
  int cases = 0;
  for (DType kv : kStandardTestTypes)
    for (int hd : {8, 16, 64})
      for (int group : {1, 2, 4})
        for (int window : {0, 5})
          for (auto [rows, start] : {std::pair{1, 0}, {1, 6}, {1, 130}, {1, 300}, {2, 0}, {7, 3}, {70, 0}, {5, 125}}) {
            StandardAttnCase c{rows, start, 2 * group, 2, hd, window, kv, DType::F32};
            check_attention(c, *ref, *s1, *s2, rng);
            ++cases;
          }
  EXPECT_GT(cases, 100);
}

TEST(StandardKernels, AttentionReducedPrecisionActs) {
  auto ref = make_reference_kernels();
  ThreadPool pool2(2);
  auto s1 = make_standard_kernels(nullptr);
  auto s2 = make_standard_kernels(&pool2);
  std::mt19937 rng(43);
  for (DType act : {DType::F16, DType::BF16})
    for (DType kv : {DType::F16, DType::BF16})
      for (int window : {0, 5})
        for (auto [rows, start] : {std::pair{1, 0}, {1, 200}, {9, 0}, {40, 100}}) {
          StandardAttnCase c{rows, start, 8, 2, 64, window, kv, act};
          check_attention(c, *ref, *s1, *s2, rng);
        }
}

TEST(StandardKernels, RmsnormMatchesReference) {
  auto ref = make_reference_kernels();
  ThreadPool pool2(2);
  std::mt19937 rng(11);
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
    auto s = make_standard_kernels(pool);
    for (DType act : kStandardTestTypes)
      for (int dim : {1, 7, 64, 67, 2048})
        for (int M : {1, 3, 8}) {
          auto x = random_x(size_t(M) * dim, rng, act);
          auto w = random_x(dim, rng, act);
          std::vector<float> want(x.size()), got(x.size());
          ref->rmsnorm(x.data(), M, dim, w.data(), 1e-5f, act, want.data());
          s->rmsnorm(x.data(), M, dim, w.data(), 1e-5f, act, got.data());
          // Only the sum of squares is reordered; at most a rounding flip in each of the two roundings.
          const double rel = act == DType::F32 ? 1e-5 : act == DType::F16 ? 2.5e-3 : 2e-2;
          for (size_t i = 0; i < x.size(); ++i)
            ASSERT_NEAR(got[i], want[i], rel * std::fabs(want[i]) + 1e-30)
                << "dim=" << dim << " M=" << M << " act=" << dtype_name(act) << " i=" << i;
        }
  }
}

// The vector rounding must be the scalar round_to() bit for bit, specials and subnormals included.
void check_rounding_bits() {
  std::mt19937 rng(3);
  std::vector<float> v;
  for (uint32_t bits : {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7f7fffffu, 0x477fefffu, 0x477ff000u,
                        0x33000000u, 0x33000001u, 0x38800000u, 0x387fffffu, 0x3f808000u, 0x3f818000u, 0x3f800001u})
    v.push_back(bits_f32(bits));
  std::uniform_int_distribution<uint32_t> any;
  std::uniform_real_distribution<float> small(-70000.0f, 70000.0f);
  for (int i = 0; i < 4000; ++i) {
    uint32_t b = any(rng);
    if ((b & 0x7f800000u) == 0x7f800000u) b &= ~0x00800000u;  // keep NaN handling out of the value comparison
    v.push_back(bits_f32(b));
    v.push_back(small(rng) * std::ldexp(1.0f, -int(i % 40)));
  }
  for (DType t : {DType::F16, DType::BF16}) {
    auto r = v;
    simd::round_inplace(t, r.data(), r.size());
    for (size_t i = 0; i < v.size(); ++i)
      ASSERT_EQ(f32_bits(r[i]), f32_bits(round_to(t, v[i])))
          << dtype_name(t) << " input bits " << std::hex << f32_bits(v[i]);
  }
}

// round_find_nonfinite is what the forward pass calls at every rounding point: the same bits as
// round_to() per value, and the index round_span() reports for the first NaN/Inf (or -1).
void check_round_find_nonfinite() {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> val(-80000.0f, 80000.0f);
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (size_t n : {size_t(0), size_t(1), size_t(15), size_t(16), size_t(17), size_t(100), size_t(5632)})
      for (int bad_kind = 0; bad_kind < 4; ++bad_kind) {
        std::vector<float> v(n);
        for (auto& x : v) x = val(rng) * 0.5f;
        // 0: none; 1: an fp32 Inf; 2: a NaN; 3: a finite fp32 value that overflows fp16 — each at a
        // random place, plus a second bad value later (the first must be reported).
        if (n > 0 && bad_kind > 0) {
          const size_t at = std::uniform_int_distribution<size_t>(0, n - 1)(rng);
          const float bad = bad_kind == 1 ? std::numeric_limits<float>::infinity()
                            : bad_kind == 2 ? std::numeric_limits<float>::quiet_NaN()
                                            : 1e6f;
          v[at] = bad;
          if (at + 3 < n) v[at + 3] = -std::numeric_limits<float>::infinity();
        }
        auto want = v, got = v;
        const long want_bad = round_span(t, want.data(), want.size());
        const long got_bad = simd::round_find_nonfinite(t, got.data(), got.size());
        ASSERT_EQ(got_bad, want_bad) << dtype_name(t) << " n=" << n << " kind=" << bad_kind;
        for (size_t i = 0; i < n; ++i)
          if (!std::isnan(want[i])) ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << dtype_name(t) << " i=" << i;
          else ASSERT_TRUE(std::isnan(got[i]));
      }
}

TEST(StandardKernels, VectorRoundingIsBitExact) { check_rounding_bits(); }
TEST(StandardKernels, RoundFindNonfiniteMatchesRoundSpan) { check_round_find_nonfinite(); }

// Every compiled SIMD target (AVX-512, AVX2, SSE4, SSSE3, emulated) must be correct, not only the
// one this machine picks.
TEST(StandardKernels, EveryCompiledTargetMatchesReference) {
  auto ref = make_reference_kernels();
  ThreadPool pool2(2);
  int tested = 0;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    ++tested;
    check_rounding_bits();
    check_round_find_nonfinite();
    auto s1 = make_standard_kernels(nullptr);
    auto s2 = make_standard_kernels(&pool2);
    std::mt19937 rng(77);
    for (DType wt : kStandardTestTypes)
      for (int M : {1, 3, 40}) {
        const int N = 45, K = 77;
        Stored w(wt, size_t(N) * K, rng);
        auto x = random_x(size_t(M) * K, rng);
        TensorView W = view_of(w, N, K);
        std::vector<float> want(size_t(M) * N), got(size_t(M) * N), got2(size_t(M) * N);
        ref->matmul(x.data(), M, W, DType::F32, want.data());
        s1->matmul(x.data(), M, W, DType::F32, got.data());
        s2->matmul(x.data(), M, W, DType::F32, got2.data());
        expect_matmul_close(x, M, w, N, K, got, want, 1e-5, "target matmul 1t");
        expect_matmul_close(x, M, w, N, K, got2, want, 1e-5, "target matmul 2t");
      }
    for (DType kv : kStandardTestTypes)
      for (auto [rows, start] : {std::pair{1, 140}, {6, 60}}) {
        check_attention(StandardAttnCase{rows, start, 4, 2, 24, 0, kv, DType::F32}, *ref, *s1, *s2, rng);
        check_attention(StandardAttnCase{rows, start, 4, 2, 64, 0, kv, DType::F16}, *ref, *s1, *s2, rng);
      }
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_GE(tested, 1);
}

}  // namespace
}  // namespace kvp
