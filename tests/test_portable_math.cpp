// pmath's promise is the same bits everywhere at ~0.5 ulp. These tests hold it to libm (itself
// within ~0.5 ulp on glibc, so two faithful results may differ by 1 ulp but never by 2), to long
// double where it is wider than double, and to golden bit patterns that a machine or compiler
// computing differently would fail. Inputs come from splitmix64 so they are the same everywhere.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

#include "kernels/portable_math.h"

namespace kvp {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // fma: a contracting compiler must not change the inputs either.
  double uniform(double lo, double hi) { return std::fma(hi - lo, double(next() >> 11) * 0x1p-53, lo); }
  // Uniform over the bit patterns in [lo, hi] (both > 0): log-uniform, every binade equally likely.
  double bits_between(double lo, double hi) {
    const uint64_t a = std::bit_cast<uint64_t>(lo), b = std::bit_cast<uint64_t>(hi);
    return std::bit_cast<double>(a + next() % (b - a + 1));
  }
  double sign() { return (next() & 1) ? 1.0 : -1.0; }
};

// Distance in representable doubles (-0 == +0); huge when exactly one is NaN.
uint64_t ulp_diff(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : UINT64_MAX;
  auto ord = [](double x) {
    const int64_t i = std::bit_cast<int64_t>(x);
    return i < 0 ? -(i & INT64_MAX) : i;
  };
  const int64_t ia = ord(a), ib = ord(b);
  return ia > ib ? uint64_t(ia) - uint64_t(ib) : uint64_t(ib) - uint64_t(ia);
}

uint32_t ulp_diff_f(float a, float b) {
  auto ord = [](float x) {
    const int32_t i = std::bit_cast<int32_t>(x);
    return i < 0 ? -int64_t(i & INT32_MAX) : int64_t(i);
  };
  const int64_t d = ord(a) - ord(b);
  return uint32_t(d < 0 ? -d : d);
}

// Max ulp difference to libm over a sweep; prints it so the numbers can be quoted.
struct Sweep {
  const char* name;
  uint64_t n = 0, differ = 0, max_ulp = 0;
  double worst = 0;
  void add(double x, double got, double want) {
    ++n;
    const uint64_t d = ulp_diff(got, want);
    differ += d != 0;
    if (d > max_ulp) max_ulp = d, worst = x;
  }
  void report() const {
    std::printf("  %-4s vs libm: %llu points, %llu differ by 1 ulp, max %llu ulp (x = %a)\n", name,
                (unsigned long long)n, (unsigned long long)differ, (unsigned long long)max_ulp, worst);
  }
};

TEST(PortableMath, ExpMatchesLibm) {
  Rng rng{1};
  Sweep s{"exp"};
  auto check = [&](double x) { s.add(x, pmath::exp(x), std::exp(x)); };
  for (int i = 0; i < 150000; ++i) check(rng.uniform(-745.2, 709.8));
  for (int i = 0; i < 40000; ++i) check(rng.uniform(-1.0, 1.0));
  for (int i = 0; i < 20000; ++i) check(rng.sign() * rng.bits_between(0x1p-1074, 1.0));  // tiny |x|
  for (int i = 0; i < 20000; ++i) check(rng.uniform(-745.2, -708.3));                   // subnormal results
  for (int i = 0; i < 5000; ++i) check(rng.uniform(-88.0, 88.0));                       // softmax range
  s.report();
  EXPECT_LE(s.max_ulp, 1u) << "worst x = " << s.worst;
}

TEST(PortableMath, ExpSpecials) {
  EXPECT_TRUE(std::isnan(pmath::exp(std::numeric_limits<double>::quiet_NaN())));
  EXPECT_EQ(pmath::exp(kInf), kInf);
  EXPECT_EQ(std::bit_cast<uint64_t>(pmath::exp(-kInf)), 0u);  // +0
  EXPECT_EQ(pmath::exp(0.0), 1.0);
  EXPECT_EQ(pmath::exp(-0.0), 1.0);
  // ln(DBL_MAX) = 709.78271289338399673...: the double below still rounds to a finite result.
  EXPECT_EQ(pmath::exp(0x1.62e42fefa39efp+9), std::exp(0x1.62e42fefa39efp+9));
  EXPECT_LT(pmath::exp(0x1.62e42fefa39efp+9), kInf);
  EXPECT_EQ(pmath::exp(0x1.62e42fefa39f0p+9), kInf);
  EXPECT_EQ(pmath::exp(1e300), kInf);
  // ln(2^-1075) = -745.13321910194110842...: above it exp rounds to the smallest subnormal, below to 0.
  EXPECT_EQ(pmath::exp(-0x1.74910d52d3051p+9), 0x1p-1074);
  EXPECT_EQ(pmath::exp(-0x1.74910d52d3052p+9), 0.0);
  EXPECT_EQ(pmath::exp(-1e300), 0.0);
  for (double x : {-0x1.6232bdd7abcd2p+9, -0x1.6232bdd7abcd3p+9, -0x1.6232bdd7abcd1p+9})  // around ln 2^-1022
    EXPECT_EQ(pmath::exp(x), std::exp(x)) << std::hexfloat << x;
  EXPECT_EQ(pmath::exp(0x1p-60), 1.0);
  EXPECT_EQ(pmath::exp(-0x1p-60), 1.0);
  EXPECT_EQ(pmath::exp(-0x1p-53), 1.0 - 0x1p-53);
}

TEST(PortableMath, LogMatchesLibm) {
  Rng rng{2};
  Sweep s{"log"};
  auto check = [&](double x) { s.add(x, pmath::log(x), std::log(x)); };
  for (int i = 0; i < 150000; ++i) check(rng.bits_between(0x1p-1074, 1e300));
  for (int i = 0; i < 20000; ++i) check(rng.bits_between(0x1p-1074, 0x1p-1022));  // subnormals
  for (int i = 0; i < 30000; ++i) check(1.0 + rng.uniform(-0x1p-10, 0x1p-10));     // near 1
  for (int i = 0; i < 20000; ++i) check(rng.uniform(0.5, 2.0));
  for (int k = -200; k <= 200; ++k) check(1.0 + k * 0x1p-52);
  for (int k = -200; k <= 200; ++k) check(std::nextafter(std::sqrt(2.0), 0.0) + k * 0x1p-52);  // the m > sqrt2 split
  s.report();
  EXPECT_LE(s.max_ulp, 1u) << "worst x = " << s.worst;
}

TEST(PortableMath, LogSpecials) {
  EXPECT_TRUE(std::isnan(pmath::log(std::numeric_limits<double>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(pmath::log(-1.0)));
  EXPECT_TRUE(std::isnan(pmath::log(-kInf)));
  EXPECT_TRUE(std::isnan(pmath::log(-0x1p-1074)));
  EXPECT_EQ(pmath::log(0.0), -kInf);
  EXPECT_EQ(pmath::log(-0.0), -kInf);
  EXPECT_EQ(pmath::log(kInf), kInf);
  EXPECT_EQ(std::bit_cast<uint64_t>(pmath::log(1.0)), 0u);  // +0
  EXPECT_EQ(pmath::log(2.0), 0x1.62e42fefa39efp-1);         // RN(ln 2)
  EXPECT_EQ(pmath::log(0x1p-1074), -0x1.74385446d71c3p+9);   // RN(-1074 ln 2)
  EXPECT_EQ(pmath::log(DBL_MAX), 0x1.62e42fefa39efp+9);
  for (int k = -1074; k <= 1023; ++k) EXPECT_EQ(pmath::log(std::ldexp(1.0, k)), std::log(std::ldexp(1.0, k))) << k;
}

TEST(PortableMath, SinCosMatchLibm) {
  Rng rng{3};
  Sweep ss{"sin"}, sc{"cos"};
  auto check = [&](double x) {
    ss.add(x, pmath::sin(x), std::sin(x));
    sc.add(x, pmath::cos(x), std::cos(x));
  };
  for (int i = 0; i < 100000; ++i) check(rng.uniform(-0x1p20, 0x1p20));
  for (int i = 0; i < 30000; ++i) check(rng.uniform(-4.0, 4.0));
  for (int i = 0; i < 10000; ++i) check(rng.sign() * rng.bits_between(0x1p-1074, 1.0));
  // Next to multiples of pi/2, where the reduction cancels most bits (for |x| <= 2^20 the worst is
  // the double nearest 29 pi/2, 2^-60.5 away, found by exhaustive search).
  for (int i = 0; i < 20000; ++i) {
    const double m = double(int64_t(rng.next() % 1335089) - 667544) * 0x1.921fb54442d18p+0;
    const int step = int(rng.next() % 9) - 4;
    check(m + step * (std::nextafter(std::fabs(m), kInf) - std::fabs(m)));
  }
  for (int i = 0; i < 10000; ++i) check(rng.sign() * rng.bits_between(0x1p20, DBL_MAX));  // Payne-Hanek
  check(0x1.6c6cbc45dc8dep+5);
  check(0x1.7be8d5b2adbfdp+1023);
  check(-0x1p20);
  check(std::nextafter(0x1p20, kInf));
  ss.report();
  sc.report();
  EXPECT_LE(ss.max_ulp, 1u) << "worst x = " << ss.worst;
  EXPECT_LE(sc.max_ulp, 1u) << "worst x = " << sc.worst;
}

TEST(PortableMath, SinCosSpecials) {
  for (double x : {kInf, -kInf, std::numeric_limits<double>::quiet_NaN()}) {
    EXPECT_TRUE(std::isnan(pmath::sin(x)));
    EXPECT_TRUE(std::isnan(pmath::cos(x)));
  }
  EXPECT_EQ(std::bit_cast<uint64_t>(pmath::sin(0.0)), 0u);
  EXPECT_EQ(std::bit_cast<uint64_t>(pmath::sin(-0.0)), std::bit_cast<uint64_t>(-0.0));
  EXPECT_EQ(pmath::cos(0.0), 1.0);
  EXPECT_EQ(pmath::cos(-0.0), 1.0);
  EXPECT_EQ(pmath::sin(0x1p-1074), 0x1p-1074);
  EXPECT_EQ(pmath::sin(0x1p-30), 0x1p-30);
  EXPECT_EQ(pmath::cos(0x1p-30), 1.0);
  for (double x : {0.5, 1.0, 3.0, 1e5, 1e6, 1e22, 1e300}) {  // odd / even, bit for bit
    EXPECT_EQ(pmath::sin(-x), -pmath::sin(x)) << x;
    EXPECT_EQ(pmath::cos(-x), pmath::cos(x)) << x;
  }
}

// Error in fractions of an ulp against long double (x86's 64-bit significand or wider); skipped where
// long double is just double. Catches a drift from ~0.5 ulp toward 1 that the libm check allows.
TEST(PortableMath, AccuracyVsLongDouble) {
  if (LDBL_MANT_DIG < 64) GTEST_SKIP() << "long double has no more precision than double here";
  Rng rng{4};
  auto err = [](double got, long double want) {
    const double w = double(want);
    const long double ulp = std::nextafter(std::fabs(w), kInf) - std::fabs(w);
    return double(std::fabs((long double)got - want) / ulp);
  };
  double e_exp = 0, e_log = 0, e_sin = 0, e_cos = 0;
  for (int i = 0; i < 20000; ++i) {
    const double x = rng.uniform(-700.0, 700.0);
    e_exp = std::max(e_exp, err(pmath::exp(x), std::exp((long double)x)));
    const double y = rng.bits_between(0x1p-1022, 1e300);
    e_log = std::max(e_log, err(pmath::log(y), std::log((long double)y)));
    const double z = (i & 1) ? rng.uniform(-0x1p20, 0x1p20) : rng.uniform(-4.0, 4.0);
    e_sin = std::max(e_sin, err(pmath::sin(z), std::sin((long double)z)));
    e_cos = std::max(e_cos, err(pmath::cos(z), std::cos((long double)z)));
  }
  double e_sub = 0;  // subnormal results: rounded once at the fixed 2^-1074 granularity
  for (int i = 0; i < 5000; ++i) {
    const double x = rng.uniform(-745.1, -708.4);
    e_sub = std::max(e_sub, err(pmath::exp(x), std::exp((long double)x)));
  }
  std::printf("  max error vs long double (ulp): exp %.3f (subnormal results %.3f) log %.3f sin %.3f cos %.3f\n",
              e_exp, e_sub, e_log, e_sin, e_cos);
  for (double e : {e_exp, e_sub, e_log, e_sin, e_cos}) EXPECT_LT(e, 0.6);
}

// What the RoPE table does: float(cos(double(angle))) with float angles.
TEST(PortableMath, FloatRoundingOfSinCos) {
  Rng rng{5};
  uint64_t n = 0, same_sin = 0, same_cos = 0;
  uint32_t max_sin = 0, max_cos = 0;
  auto check = [&](float a) {
    const float ps = float(pmath::sin(double(a))), ls = float(std::sin(double(a)));
    const float pc = float(pmath::cos(double(a))), lc = float(std::cos(double(a)));
    ++n;
    same_sin += ps == ls;
    same_cos += pc == lc;
    max_sin = std::max(max_sin, ulp_diff_f(ps, ls));
    max_cos = std::max(max_cos, ulp_diff_f(pc, lc));
  };
  for (int i = 0; i < 60000; ++i) check(float(rng.uniform(-0x1p20, 0x1p20)));
  for (int i = 0; i < 20000; ++i) check(float(rng.uniform(-8.0, 8.0)));
  for (float theta : {10000.0f, 500000.0f}) {  // angles pos * inv_freq of a 128-wide head
    for (int i = 0; i < 64; ++i) {
      const float inv_freq = 1.0f / pmath::powf_rounded(theta, float(2 * i) / 128.0f);
      for (int k = 0; k < 400; ++k) check(float(int(rng.next() % 131072)) * inv_freq);
    }
  }
  std::printf("  float(sin) == libm's in %llu / %llu, float(cos) in %llu / %llu\n", (unsigned long long)same_sin,
              (unsigned long long)n, (unsigned long long)same_cos, (unsigned long long)n);
  EXPECT_GE(double(same_sin), 0.9999 * double(n));
  EXPECT_GE(double(same_cos), 0.9999 * double(n));
  EXPECT_LE(max_sin, 1u);
  EXPECT_LE(max_cos, 1u);
}

TEST(PortableMath, PowfRoundedMatchesLibm) {
  int n = 0, differ = 0;
  uint32_t max_ulp = 0;
  auto check = [&](float b, float e) {
    const float got = pmath::powf_rounded(b, e), want = float(std::pow(double(b), double(e)));
    ++n;
    differ += got != want;
    max_ulp = std::max(max_ulp, ulp_diff_f(got, want));
  };
  for (float theta : {10000.0f, 500000.0f, 1e6f, 10000.5f})
    for (int d : {64, 80, 96, 128, 256})
      for (int i = 0; i < d / 2; ++i) check(theta, float(2 * i) / float(d));  // as rope_inv_freq does
  const int rope_differ = differ;
  Rng rng{6};
  for (int i = 0; i < 30000; ++i) check(float(rng.bits_between(1e-30, 1e30)), float(rng.uniform(-3.0, 3.0)));
  std::printf("  powf_rounded vs float(libm pow): RoPE grid %d differ, all %d / %d differ, max %u ulp\n",
              rope_differ, differ, n, max_ulp);
  EXPECT_LE(rope_differ, 2);
  EXPECT_LE(differ, 5);
  EXPECT_LE(max_ulp, 1u);
  EXPECT_EQ(pmath::powf_rounded(10000.0f, 0.5f), 100.0f);
  EXPECT_EQ(pmath::powf_rounded(2.0f, 10.0f), 1024.0f);
  EXPECT_EQ(pmath::powf_rounded(7.0f, 0.0f), 1.0f);
  EXPECT_EQ(pmath::powf_rounded(1.0f, std::numeric_limits<float>::quiet_NaN()), 1.0f);
  EXPECT_TRUE(std::isnan(pmath::powf_rounded(-2.0f, 2.0f)));
  EXPECT_TRUE(std::isnan(pmath::powf_rounded(std::numeric_limits<float>::quiet_NaN(), 2.0f)));
  EXPECT_EQ(pmath::powf_rounded(0.0f, 2.0f), 0.0f);
  EXPECT_EQ(pmath::powf_rounded(0.0f, -2.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(pmath::powf_rounded(1e30f, 2.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(pmath::powf_rounded(1e30f, -2.0f), 0.0f);
  EXPECT_EQ(pmath::expf_rounded(1.0f), float(std::exp(1.0)));
}

// Exact bits, computed once with this implementation and checked to be the correctly rounded
// value (2000-bit mpmath) in every case; another machine or compiler must reproduce them.
TEST(PortableMath, GoldenBits) {
  struct Case {
    double (*f)(double);
    double x;
    uint64_t bits;
  };
  const Case cases[] = {
      {pmath::exp, 1.0, 0x4005BF0A8B145769ull},
      {pmath::exp, -0.5, 0x3FE368B2FC6F960Aull},
      {pmath::exp, 700.0, 0x7F0D945DF4F8EC8Eull},
      {pmath::exp, -740.0, 0x0000000000000055ull},              // subnormal result, rounded once
      {pmath::exp, -0x1.6232bdd7abcd2p+9, 0x001000000000007Cull},  // just above the smallest normal
      {pmath::exp, 0x1.5p-20, 0x3FF0000150000DC8ull},
      {pmath::exp, 0x1.62e42fefa39efp+9, 0x7FEFFFFFFFFFFF2Aull},   // largest finite result
      {pmath::log, 10.0, 0x40026BB1BBB55516ull},
      {pmath::log, 1e-310, 0xC0864E69394D9508ull},  // subnormal input
      {pmath::log, 0.9999999, 0xBE7AD7F2B1049B9Full},
      {pmath::log, 12345.678, 0x4022D79559791E31ull},
      {pmath::sin, 1.0, 0x3FEAED548F090CEEull},
      {pmath::cos, 1.0, 0x3FE14A280FB5068Cull},
      {pmath::cos, 0x1.6c6cbc45dc8dep+5, 0xBC26D61B58C99C43ull},  // RN(29 pi/2): the hardest reduction
      {pmath::cos, 1e6, 0x3FEDF9DF9906D32Cull},
      {pmath::sin, 131071.0 * 0.0001, 0x3FE078ED03EEEB66ull},
      {pmath::sin, 1e22, 0xBFEB453AB76BF397ull},  // Payne-Hanek
      {pmath::cos, 1e300, 0xBFE2699022ADC4C1ull},
  };
  for (const Case& c : cases)
    EXPECT_EQ(std::bit_cast<uint64_t>(c.f(c.x)), c.bits) << std::hexfloat << "x = " << c.x;
  EXPECT_EQ(std::bit_cast<uint32_t>(pmath::powf_rounded(500000.0f, 62.0f / 128.0f)), 0x4410015Eu);
  EXPECT_EQ(std::bit_cast<uint32_t>(pmath::powf_rounded(10000.5f, 0.34375f)), 0x41BDB691u);
  EXPECT_EQ(std::bit_cast<uint32_t>(pmath::expf_rounded(-3.5f)), 0x3CF76081u);
}

}  // namespace
}  // namespace kvp
