// The element-wise ops round blocks with the vector rounding (simd::round_inplace); these tests pin
// them bit for bit to the per-value formulas of HF's eager order, written with scalar round_to().
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/elementwise.h"

namespace kvp {
namespace {

std::vector<float> random_values(size_t n, float scale, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = g(rng);
  return v;
}

void expect_bits(const std::vector<float>& got, const std::vector<float>& want, const char* what, DType t) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << what << " " << dtype_name(t) << " i=" << i;
}

constexpr DType kAll[] = {DType::F32, DType::F16, DType::BF16};

TEST(Elementwise, RopeMatchesScalarFormula) {
  for (DType t : kAll)
    for (int hd : {8, 64, 128}) {
      const int n_heads = 3, M = 5, start = 7;
      RopeTable table(hd, 64, 10000.0f);
      auto x = random_values(size_t(M) * n_heads * hd, 2.0f, 1);
      for (auto& v : x) v = round_to(t, v);
      auto want = x;
      const int half = hd / 2;
      for (int m = 0; m < M; ++m)
        for (int h = 0; h < n_heads; ++h) {
          float* v = want.data() + (size_t(m) * n_heads + h) * hd;
          for (int i = 0; i < half; ++i) {
            const float c = round_to(t, table.cos_row(start + m)[i]), s = round_to(t, table.sin_row(start + m)[i]);
            const float a = v[i], b = v[i + half];
            v[i] = round_to(t, round_to(t, a * c) + round_to(t, -b * s));
            v[i + half] = round_to(t, round_to(t, b * c) + round_to(t, a * s));
          }
        }
      apply_rope(x.data(), M, n_heads, start, table, t);
      expect_bits(x, want, "rope", t);
    }
}

TEST(Elementwise, GatedActivationsMatchScalarFormulas) {
  const float kBeta = float(M_SQRT2 * M_2_SQRTPI * 0.5), kKappa = 0.044715f;
  for (DType t : kAll)
    for (size_t n : {size_t(1), size_t(31), size_t(512), size_t(1500)}) {
      auto gate = random_values(n, 3.0f, 2), up = random_values(n, 3.0f, 3);
      auto silu = gate, gelu = gate;
      std::vector<float> want_silu(n), want_gelu(n);
      for (size_t i = 0; i < n; ++i) {
        const float g = gate[i];
        want_silu[i] = round_to(t, round_to(t, g / (1.0f + std::exp(-g))) * up[i]);
        const float inner = kBeta * (g + kKappa * (g * g * g));
        want_gelu[i] = round_to(t, round_to(t, 0.5f * g * (1.0f + std::tanh(inner))) * up[i]);
      }
      silu_mul(silu.data(), up.data(), n, t);
      gelu_tanh_mul(gelu.data(), up.data(), n, t);
      expect_bits(silu, want_silu, "silu_mul", t);
      expect_bits(gelu, want_gelu, "gelu_tanh_mul", t);
    }
}

TEST(Elementwise, ResidualAndScaleMatchScalarFormulas) {
  for (DType t : kAll) {
    const size_t n = 2051;
    auto x = random_values(n, 10.0f, 4), y = random_values(n, 10.0f, 5);
    auto added = x, scaled = x;
    std::vector<float> want_add(n), want_scale(n);
    const float s = round_to(t, 45.25f);
    for (size_t i = 0; i < n; ++i) {
      want_add[i] = round_to(t, x[i] + y[i]);
      want_scale[i] = round_to(t, x[i] * s);
    }
    add_inplace(added.data(), y.data(), n, t);
    scale_inplace(scaled.data(), n, 45.25f, t);
    expect_bits(added, want_add, "add_inplace", t);
    expect_bits(scaled, want_scale, "scale_inplace", t);
  }
}

}  // namespace
}  // namespace kvp
