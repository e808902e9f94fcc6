// fp16/bf16 conversions: every one of the 65,536 fp16 bit patterns and a sweep of fp32 values,
// checked against the CPU's F16C instructions (vcvtps2ph with round-to-nearest-even).
#include <cpuid.h>
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <limits>
#include <random>

#include "core/dtype.h"

namespace {

__attribute__((target("f16c"))) uint16_t hw_f32_to_f16(float f) {
  return uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
__attribute__((target("f16c"))) float hw_f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }

// CPUID leaf 1, ECX bit 29 (clang 14 has no __builtin_cpu_supports("f16c")).
bool have_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}

uint32_t bits(float f) { return kvp::f32_bits(f); }

TEST(DType, AllFp16PatternsDecodeLikeF16C) {
  if (!have_f16c()) GTEST_SKIP() << "CPU without F16C: cannot compare against hardware";
  for (uint32_t h = 0; h < 65536; ++h) {
    const float sw = kvp::f16_to_f32(uint16_t(h));
    const float hw = hw_f16_to_f32(uint16_t(h));
    ASSERT_EQ(bits(sw), bits(hw)) << "pattern 0x" << std::hex << h;
  }
}

TEST(DType, AllFp16PatternsRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const bool nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
    const uint16_t back = kvp::f32_to_f16(kvp::f16_to_f32(uint16_t(h)));
    if (nan)
      ASSERT_TRUE((back & 0x7c00u) == 0x7c00u && (back & 0x3ffu) != 0) << std::hex << h;
    else
      ASSERT_EQ(back, h) << std::hex << h;
  }
}

TEST(DType, Fp32ToFp16MatchesF16CIncludingTiesAndEdges) {
  if (!have_f16c()) GTEST_SKIP() << "CPU without F16C: cannot compare against hardware";
  // Every fp16 value, the midpoints between neighbours (ties) and one ulp either side of them.
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    for (uint32_t sign : {0u, 0x8000u}) {
      const float a = kvp::f16_to_f32(uint16_t(h | sign));
      const float b = kvp::f16_to_f32(uint16_t((h + 1) | sign));
      const float mid = float((double(a) + double(b)) / 2.0);
      for (float f : {a, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f * (sign ? -1.f : 1.f))}) {
        ASSERT_EQ(kvp::f32_to_f16(f), hw_f32_to_f16(f)) << "value " << f << " bits 0x" << std::hex << bits(f);
      }
    }
  }
  // Random fp32 bit patterns, including NaNs, infinities, subnormals.
  std::mt19937 rng(42);
  for (int i = 0; i < 2000000; ++i) {
    const float f = kvp::bits_f32(rng());
    ASSERT_EQ(kvp::f32_to_f16(f), hw_f32_to_f16(f)) << "bits 0x" << std::hex << bits(f);
  }
}

TEST(DType, Fp16EdgeCases) {
  EXPECT_EQ(kvp::f32_to_f16(65504.0f), 0x7bffu);
  EXPECT_EQ(kvp::f32_to_f16(65519.99f), 0x7bffu);
  EXPECT_EQ(kvp::f32_to_f16(65520.0f), 0x7c00u);  // ties to even -> overflow to inf
  EXPECT_EQ(kvp::f32_to_f16(-1e6f), 0xfc00u);
  EXPECT_EQ(kvp::f32_to_f16(std::numeric_limits<float>::infinity()), 0x7c00u);
  EXPECT_EQ(kvp::f32_to_f16(std::ldexp(1.0f, -24)), 0x0001u);   // smallest subnormal
  EXPECT_EQ(kvp::f32_to_f16(std::ldexp(1.0f, -25)), 0x0000u);   // tie -> even (zero)
  EXPECT_EQ(kvp::f32_to_f16(std::ldexp(1.5f, -25)), 0x0001u);
  EXPECT_EQ(kvp::f32_to_f16(-0.0f), 0x8000u);
  EXPECT_TRUE(std::isnan(kvp::f16_to_f32(kvp::f32_to_f16(std::nanf("")))));
  EXPECT_EQ(kvp::f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00u);  // tie to even: stays 1.0
  EXPECT_EQ(kvp::f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02u);
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(kvp::f32_to_bf16(1.0f), 0x3f80u);
  EXPECT_EQ(kvp::f32_to_bf16(kvp::bits_f32(0x3f808000u)), 0x3f80u);  // tie -> even
  EXPECT_EQ(kvp::f32_to_bf16(kvp::bits_f32(0x3f818000u)), 0x3f82u);  // tie -> even (up)
  EXPECT_EQ(kvp::f32_to_bf16(kvp::bits_f32(0x3f808001u)), 0x3f81u);
  EXPECT_EQ(kvp::f32_to_bf16(kvp::bits_f32(0x7f7fffffu)), 0x7f80u);  // max float rounds to inf
  EXPECT_TRUE(std::isnan(kvp::bf16_to_f32(kvp::f32_to_bf16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(kvp::bf16_to_f32(kvp::f32_to_bf16(kvp::bits_f32(0x7f800001u)))));  // NaN stays NaN
  for (uint32_t b = 0; b < 65536; ++b) {
    const bool nan = (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0;
    if (!nan) {
      ASSERT_EQ(kvp::f32_to_bf16(kvp::bf16_to_f32(uint16_t(b))), b);
    }
  }
}

TEST(DType, RoundSpanReportsFirstNonFinite) {
  float x[4] = {1.0f, 70000.0f, 2.0f, -1e9f};
  EXPECT_EQ(kvp::round_span(kvp::DType::F16, x, 4), 1);
  EXPECT_TRUE(std::isinf(x[1]));
  float y[3] = {1.0f, 70000.0f, 3.0f};
  EXPECT_EQ(kvp::round_span(kvp::DType::BF16, y, 3), -1);  // bf16 has fp32's range
  EXPECT_EQ(kvp::parse_dtype("bf16"), kvp::DType::BF16);
  EXPECT_THROW(kvp::parse_dtype("int8"), std::exception);
}

}  // namespace
