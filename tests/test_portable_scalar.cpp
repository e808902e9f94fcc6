// The `portable` policy's one-value-at-a-time arithmetic (kernels/portable_scalar.h), which the
// CUDA portable kernels run on the GPU, held against the CPU's Highway kernels bit for bit on
// every SIMD target this machine has — so that the GPU side's arithmetic is checked on every CI
// run, GPU or not. And the specification's orders written out with it (matmul chains and tree,
// RMSNorm, the tile-anchored attention row as the GPU kernel splits it over a warp) against the
// CPU portable kernels: what the CUDA suite then checks on a GPU is only that the kernels run
// these orders.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/kv_type.h"
#include "kernels/kernels.h"
#include "kernels/portable_scalar.h"
#include "kernels/portable_simd.h"
#include "kernels/simd_target.h"
#include "test_util.h"

namespace kvp {
namespace {

namespace ps = pscalar;
using test::normals;

constexpr DType kEveryDtype[] = {DType::F32, DType::F16, DType::BF16};

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Bitwise equal, NaN equal to any NaN (payloads are not part of the specification: CUDA returns
// a canonical NaN where x86 propagates an operand's).
bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || bits(a) == bits(b); }

struct RoundAct {
  DType t;
  float operator()(float v) const { return round_to(t, v); }
};

// Inputs that reach every branch: a stride through all bit patterns, dense sweeps where the
// functions switch method, and the special values. NaN only where asked: Highway's 128-bit
// emulation converts a NaN lane to int inside its own header (undefined behaviour, which the
// sanitizer CI stage stops on), so the scalar target never gets one.
std::vector<float> probe_inputs(bool with_nan) {
  std::vector<float> v;
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 40009)
    if (with_nan || !std::isnan(from(uint32_t(u)))) v.push_back(from(uint32_t(u)));
  for (float x = -110.0f; x < 95.0f; x += 0.0131f) v.push_back(x);
  for (float x = -1.0f; x < 1.0f; x += 0.00037f) v.push_back(x);
  const float inf = std::numeric_limits<float>::infinity();
  if (with_nan) v.push_back(std::numeric_limits<float>::quiet_NaN());
  for (float x : {0.0f, -0.0f, inf, -inf, 0.5f, -0.5f,
                  std::nextafter(0.5f, 0.0f), std::nextafter(0.5f, 1.0f), -104.0f, 89.0f, 88.72f, -87.33f, -103.97f,
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(), 1e-30f, -1e-30f})
    v.push_back(x);
  return v;
}

// Runs f(target) once per SIMD target this machine has, then restores auto.
template <class F>
void on_every_target(F&& f) {
  for (SimdTarget t : test::simd_targets_here()) {
    use_simd(t);
    SCOPED_TRACE("simd " + simd_name(t));
    f(t);
  }
  use_simd(SimdTarget::Auto);
}

TEST(PortableScalar, ExpAndTanhAreTheSimdKernelsBits) {
  on_every_target([&](SimdTarget t) {
    for (float x : probe_inputs(t != SimdTarget::Scalar)) {
      ASSERT_TRUE(same(ps::exp(x), psimd::exp_f32(x)))
          << "exp(" << x << "): " << ps::exp(x) << " vs " << psimd::exp_f32(x);
      ASSERT_TRUE(same(ps::tanh(x), psimd::tanh_f32(x))) << "tanh(" << x << "): " << ps::tanh(x) << " vs "
                                                        << psimd::tanh_f32(x);
    }
  });
  EXPECT_EQ(ps::exp(-std::numeric_limits<float>::infinity()), 0.0f);  // padding keys weigh nothing
  EXPECT_TRUE(std::signbit(ps::tanh(-0.0f)));
}

TEST(PortableScalar, ActivationsAreTheSimdKernelsBits) {
  auto k = make_kernels(KernelPolicy::Portable, nullptr);
  std::mt19937 rng(7);
  std::vector<float> g = normals(3001, rng, DType::F32, 6.0f), u = normals(3001, rng, DType::F32, 2.0f);
  const auto extra = probe_inputs(false);
  for (size_t i = 0; i < 600; ++i) g.push_back(extra[i * 17 % extra.size()]), u.push_back(0.75f);
  on_every_target([&](SimdTarget) {
    for (DType act : kEveryDtype) {
      std::vector<float> gr(g.size()), ur(u.size());
      for (size_t i = 0; i < g.size(); ++i) gr[i] = round_to(act, g[i]), ur[i] = round_to(act, u[i]);
      const RoundAct round{act};
      std::vector<float> silu = gr, gelu = gr, cap = gr;
      k->silu_mul(silu.data(), ur.data(), silu.size(), act);
      k->gelu_tanh_mul(gelu.data(), ur.data(), gelu.size(), act);
      k->softcap(cap.data(), cap.size(), 30.0f, act);
      for (size_t i = 0; i < gr.size(); ++i) {
        ASSERT_TRUE(same(silu[i], ps::silu_mul(gr[i], ur[i], round))) << dtype_name(act) << " silu " << gr[i];
        ASSERT_TRUE(same(gelu[i], ps::gelu_tanh_mul(gr[i], ur[i], round))) << dtype_name(act) << " gelu " << gr[i];
        ASSERT_TRUE(same(cap[i], ps::softcap(gr[i], 30.0f, round))) << dtype_name(act) << " softcap " << gr[i];
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// The specification's orders, written with pscalar alone.

// One matmul output: lane l holds k = l, l + 16, ... (the last group zero-padded), then the tree.
float spec_dot(const float* x, const float* w, int K) {
  float t[ps::kLanes] = {};
  for (int g = 0; g < (K + 15) / 16; ++g)
    for (int l = 0; l < ps::kLanes; ++l) {
      const int k = 16 * g + l;
      t[l] = ps::fma(k < K ? x[k] : 0.0f, k < K ? w[k] : 0.0f, t[l]);
    }
  return ps::tree16(t);
}

TEST(PortableScalar, MatmulOrderIsTheCpuKernels) {
  auto k = make_kernels(KernelPolicy::Portable, nullptr);
  std::mt19937 rng(11);
  on_every_target([&](SimdTarget) {
    for (DType wt : kEveryDtype)
      for (auto [N, K] : {std::pair{7, 16}, std::pair{9, 37}, std::pair{5, 300}, std::pair{3, 1040}})
        for (int M : {1, 3, 17, 40}) {  // the direct and the blocked CPU GEMMs
          const auto wf = normals(size_t(N) * K, rng, wt);
          std::vector<uint8_t> wb(wf.size() * dtype_size(wt));
          from_f32(wt, wf.data(), wb.data(), wf.size());
          const auto x = normals(size_t(M) * K, rng, DType::F16);
          std::vector<float> y(size_t(M) * N);
          k->matmul(x.data(), M, test::weight_view(wb, wt, N, K), DType::F16, y.data());
          for (int m = 0; m < M; ++m)
            for (int n = 0; n < N; ++n)
              ASSERT_TRUE(same(y[size_t(m) * N + n], spec_dot(x.data() + size_t(m) * K, wf.data() + size_t(n) * K, K)))
                  << dtype_name(wt) << " M " << M << " N " << N << " K " << K << " at " << m << "," << n;
        }
  });
}

// A chain that rounds to -0 stays -0: the padded group is the last one. A kernel that ran another
// all-zero group (fma(0, 0, -0) = +0) would give +0 here — the GPU's tiled GEMM must not.
TEST(PortableScalar, NegativeZeroChainsSurviveOnlyWithoutExtraPaddedGroups) {
  auto k = make_kernels(KernelPolicy::Portable, nullptr);
  for (int M : {1, 20}) {
    const int K = 16, N = 2;
    std::vector<float> x(size_t(M) * K, -1e-30f), w(size_t(N) * K, 1e-30f);
    std::vector<uint8_t> wb(w.size() * 4);
    std::memcpy(wb.data(), w.data(), wb.size());
    std::vector<float> y(size_t(M) * N);
    k->matmul(x.data(), M, test::weight_view(wb, DType::F32, N, K), DType::F32, y.data());
    for (float v : y) EXPECT_TRUE(v == 0.0f && std::signbit(v)) << "M " << M << ": " << v;
    float t[ps::kLanes];
    for (float& l : t) l = ps::fma(0.0f, 0.0f, ps::fma(-1e-30f, 1e-30f, 0.0f));  // one extra padded group
    EXPECT_FALSE(std::signbit(ps::tree16(t)));
  }
}

TEST(PortableScalar, RmsnormOrderIsTheCpuKernels) {
  auto k = make_kernels(KernelPolicy::Portable, nullptr);
  std::mt19937 rng(13);
  on_every_target([&](SimdTarget) {
    for (DType act : kEveryDtype)
      for (int dim : {16, 50, 2048}) {
        const int M = 3;
        const auto x = normals(size_t(M) * dim, rng, act, 3.0f);
        const auto w = normals(size_t(dim), rng, DType::F32);
        std::vector<float> y(x.size()), y32(x.size());
        k->rmsnorm(x.data(), M, dim, w.data(), 1e-5f, act, y.data());
        k->rmsnorm_fp32_gain(x.data(), M, dim, w.data(), 1e-6f, act, y32.data());
        for (int m = 0; m < M; ++m) {
          const float* xr = x.data() + size_t(m) * dim;
          const float inv = ps::inv_rms(spec_dot(xr, xr, dim), dim, 1e-5f);
          const float inv32 = ps::inv_rms(spec_dot(xr, xr, dim), dim, 1e-6f);
          for (int i = 0; i < dim; ++i) {
            const size_t at = size_t(m) * dim + i;
            ASSERT_TRUE(same(y[at], round_to(act, ps::mul(w[i], round_to(act, ps::mul(xr[i], inv))))))
                << dtype_name(act) << " dim " << dim;
            ASSERT_TRUE(same(y32[at], round_to(act, ps::mul(ps::mul(xr[i], inv32), w[i])))) << dtype_name(act);
          }
        }
      }
  });
}

// One attention row as the GPU kernel computes it: keys in 64-key tiles anchored at 0; the
// exp-sum as 16 lanes (lane l: keys l, l + 16, l + 32, l + 48 of the tile) and the tree; P.V one
// fma chain per dimension with the rounded probabilities.
void spec_attention_row(const AttentionParams& p, const std::vector<float>& kf, const std::vector<float>& vf, int row,
                        int h, float* out) {
  const int hd = p.head_dim, pos = p.start_pos + row;
  const int kvh = h / (p.n_heads / p.n_kv_heads);
  const int first = p.sliding_window > 0 ? std::max(0, pos - p.sliding_window + 1) : 0;
  const float* q = p.q + size_t(row) * p.n_heads * hd + size_t(h) * hd;
  const RoundAct round{p.act};
  const float ninf = -std::numeric_limits<float>::infinity();
  float m = ninf, l = 0.0f;
  std::vector<float> acc(size_t(hd), 0.0f), e(64), pr(64), sc(64);
  for (int c = first / 64; c <= pos / 64; ++c) {
    const int js = std::max(first, c * 64), je = std::min(pos + 1, (c + 1) * 64), n = je - js;
    float tmax = ninf;
    for (int j = 0; j < n; ++j) {
      const float* kr = kf.data() + (size_t(kvh) * p.capacity + size_t(js + j)) * hd;
      sc[j] = ps::attention_score(spec_dot(q, kr, hd), p.score_divisor, p.score_scale, p.softcap, round);
      tmax = std::max(tmax, sc[j]);
    }
    const float m_new = std::max(m, tmax);
    const float scale = m == ninf ? 0.0f : ps::exp(ps::sub(m, m_new));
    float lanes[ps::kLanes] = {};
    for (int j = 0; j < n; ++j) {
      e[j] = ps::exp(ps::sub(sc[j], m_new));
      pr[j] = round(e[j]);
      lanes[j % 16] = ps::add(lanes[j % 16], e[j]);
    }
    l = ps::add(ps::mul(l, scale), ps::tree16(lanes));
    m = m_new;
    for (int d = 0; d < hd; ++d) {
      acc[d] = ps::mul(acc[d], scale);
      for (int j = 0; j < n; ++j)
        acc[d] = ps::fma(pr[j], vf[(size_t(kvh) * p.capacity + size_t(js + j)) * hd + d], acc[d]);
    }
  }
  for (int d = 0; d < hd; ++d) out[d] = ps::div(acc[d], l);
}

struct AttnCase {
  int hd, start_pos, rows, window;
  bool gemma;  // score_scale and soft-capping instead of the divisor
};

TEST(PortableScalar, AttentionOrderIsTheCpuKernels) {
  auto k = make_kernels(KernelPolicy::Portable, nullptr);
  std::mt19937 rng(17);
  const AttnCase cases[] = {{16, 0, 150, 0, false}, {40, 149, 1, 0, false}, {64, 70, 5, 50, true},
                            {128, 200, 1, 0, true}, {128, 0, 65, 0, false}};
  on_every_target([&](SimdTarget) {
    for (const AttnCase& cs : cases)
      for (DType act : kEveryDtype)
        for (DType kvt : kEveryDtype) {
          AttentionParams p;
          p.n_rows = cs.rows;
          p.start_pos = cs.start_pos;
          p.n_heads = 4;
          p.n_kv_heads = 2;
          p.head_dim = cs.hd;
          p.capacity = cs.start_pos + cs.rows + 3;
          p.kv = KvType::of(kvt);
          p.act = act;
          p.sliding_window = cs.window;
          if (cs.gemma) {
            p.score_scale = round_to(DType::F32, 1.0f / std::sqrt(float(cs.hd)));
            p.softcap = 5.0f;
          } else {
            p.score_divisor = std::sqrt(float(cs.hd));
          }
          const size_t cache_n = size_t(p.n_kv_heads) * p.capacity * cs.hd;
          const auto kf = normals(cache_n, rng, kvt, 2.0f), vf = normals(cache_n, rng, kvt);
          std::vector<uint8_t> kb(cache_n * dtype_size(kvt)), vb(kb.size());
          from_f32(kvt, kf.data(), kb.data(), cache_n);
          from_f32(kvt, vf.data(), vb.data(), cache_n);
          const auto q = normals(size_t(cs.rows) * p.n_heads * cs.hd, rng, act, 2.0f);
          std::vector<float> out(q.size()), want(size_t(cs.hd));
          p.q = q.data();
          p.k_cache = kb.data();
          p.v_cache = vb.data();
          p.out = out.data();
          k->attention(p);
          for (int r = 0; r < cs.rows; ++r)
            for (int h = 0; h < p.n_heads; ++h) {
              spec_attention_row(p, kf, vf, r, h, want.data());
              const float* got = out.data() + (size_t(r) * p.n_heads + h) * cs.hd;
              for (int d = 0; d < cs.hd; ++d)
                ASSERT_TRUE(same(got[d], want[d]))
                    << "hd " << cs.hd << " start " << cs.start_pos << " row " << r << " head " << h << " dim " << d
                    << " act " << dtype_name(act) << " kv " << dtype_name(kvt) << ": " << got[d] << " vs " << want[d];
            }
        }
  });
}

}  // namespace
}  // namespace kvp
