// Portable elementary functions (see portable_math.h for why they exist).
//
// Written from the math; the constants were derived with 2000-bit mpmath and are given as hex
// literals so that no compiler converts a decimal string or folds a libm call differently.
// Rules that keep the results bit-identical everywhere:
//  - every product that feeds an addition is either exact (a power-of-two scale, or n times a
//    constant with few enough significant bits) or written as std::fma, so contraction cannot
//    change a result;
//  - std::rint rounds half-to-even in the default mode, like every IEEE implementation;
//  - error-free transforms (two_sum, fma products) carry the rounding errors that matter.
#include "kernels/portable_math.h"

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

static_assert(FLT_EVAL_METHOD == 0, "pmath needs double arithmetic without excess precision (x87)");
static_assert(std::numeric_limits<double>::is_iec559);

namespace kvp::pmath {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ln2 = kLn2Hi + kLn2Lo. kLn2Hi is ln2 truncated to 42 significant bits, so k * kLn2Hi is exact for
// |k| < 2^11 (exp and log only ever need |k| <= 1076); kLn2Lo = RN(ln2 - kLn2Hi).
constexpr double kInvLn2 = 0x1.71547652b82fep+0;  // RN(1/ln2)
constexpr double kLn2Hi = 0x1.62e42fefa3800p-1;
constexpr double kLn2Lo = 0x1.ef35793c76730p-45;
constexpr double kSqrt2 = 0x1.6a09e667f3bcdp+0;   // RN(sqrt 2)

// pi/2 = kPio2A + kPio2B + kPio2C + kPio2D + O(2^-160). A, B and C are successive 33-bit truncations
// (A has 31 significant bits, B 33, C 27), so n * part is exact for |n| < 2^20. Three parts are
// not enough: the double nearest 29*pi/2 is within 2^-60.5 of it (the worst case below 2^20, found
// by exhaustive search over n), so r = x - n*pi/2 loses ~60 bits to cancellation and pi/2 is
// needed to ~2^-135; the rounded fourth part D supplies that.
constexpr double kPio2A = 0x1.921fb54400000p+0;
constexpr double kPio2B = 0x1.0b4611a600000p-34;
constexpr double kPio2C = 0x1.3198a2e000000p-69;
constexpr double kPio2D = 0x1.b839a252049c1p-104;
constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;  // RN(2/pi)
constexpr double kPio2Hi = 0x1.921fb54442d18p+0;     // pi/2 = kPio2Hi + kPio2Lo + O(2^-107)
constexpr double kPio2Lo = 0x1.1a62633145c07p-54;
constexpr double kPio4 = 0x1.921fb54442d18p-1;       // RN(pi/4): no reduction below it

// The first 1280 bits of 2/pi after the binary point, for Payne-Hanek (|x| up to 2^1024 needs the
// bits up to 2^-1163: 971 for the exponent plus a 192-bit window).
constexpr uint32_t kTwoOverPiBits[40] = {
    0xA2F9836E, 0x4E441529, 0xFC2757D1, 0xF534DDC0, 0xDB629599, 0x3C439041, 0xFE5163AB, 0xDEBBC561,
    0xB7246E3A, 0x424DD2E0, 0x06492EEA, 0x09D1921C, 0xFE1DEB1C, 0xB129A73E, 0xE88235F5, 0x2EBB4484,
    0xE99C7026, 0xB45F7E41, 0x3991D639, 0x835339F4, 0x9C845F8B, 0xBDF9283B, 0x1FF897FF, 0xDE05980F,
    0xEF2F118B, 0x5A0A6D1F, 0x6D367ECF, 0x27CB09B7, 0x4F463F66, 0x9E5FEA2D, 0x7527BAC7, 0xEBE5F17B,
    0x3D0739F7, 0x8A5292EA, 0x6BFB5FB1, 0x1F8D5D08, 0x56033046, 0xFC7B6BAB, 0xF0CFBC20, 0x9AF4361D};

// Taylor coefficients RN(1/k!) with alternating signs where the series has them. Taylor rather than
// minimax: the coefficients are self-evidently right, and the truncation error stays below 2^-57
// relative on each reduced range (stated per table); the price is two or three extra terms.
// exp(r) = 1 + r + r^2/2 + r^3 * sum_{k=3..14} r^(k-3)/k!; |r| <= 0.347, first omitted term
// 0.347^15/15! < 2^-63.
constexpr double kExp[] = {0x1.5555555555555p-3,  0x1.5555555555555p-5,  0x1.1111111111111p-7,
                           0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-13, 0x1.a01a01a01a01ap-16,
                           0x1.71de3a556c734p-19, 0x1.27e4fb7789f5cp-22, 0x1.ae64567f544e4p-26,
                           0x1.1eed8eff8d898p-29, 0x1.6124613a86d09p-33, 0x1.93974a8c07c9dp-37};
// sin(r) = r - r^3/6 + r^5 * sum_{k=2..8} (-1)^k z^(k-2)/(2k+1)!, z = r^2, |r| <= pi/4: omitted
// r^19/19! < 2^-66. -1/6 = kSin3 + kSin3Lo: the r^3 term is carried in double-double.
constexpr double kSin3 = -0x1.5555555555555p-3;
constexpr double kSin3Lo = -0x1.5555555555555p-57;
constexpr double kSin[] = {0x1.1111111111111p-7,   -0x1.a01a01a01a01ap-13, 0x1.71de3a556c734p-19,
                           -0x1.ae64567f544e4p-26, 0x1.6124613a86d09p-33,  -0x1.ae7f3e733b81fp-41,
                           0x1.952c77030ad4ap-49};
// cos(r) = 1 - z/2 + z^2 * sum_{k=2..9} (-1)^k z^(k-2)/(2k)!, |r| <= pi/4: omitted r^20/20! < 2^-67.
constexpr double kCos[] = {0x1.5555555555555p-5,  -0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-16,
                           -0x1.27e4fb7789f5cp-22, 0x1.1eed8eff8d898p-29,  -0x1.93974a8c07c9dp-37,
                           0x1.ae7f3e733b81fp-45,  -0x1.6827863b97d97p-53};
// log(1+f) = 2 atanh(s), s = f/(2+f): 2s + s*R with R = sum_{j=1..11} 2 z^j/(2j+1), z = s^2 <= 0.0295;
// omitted 2 s^25/25 < 2^-65 relative to s.
constexpr double kLog[] = {0x1.5555555555555p-1, 0x1.999999999999ap-2, 0x1.2492492492492p-2,
                           0x1.c71c71c71c71cp-3, 0x1.745d1745d1746p-3, 0x1.3b13b13b13b14p-3,
                           0x1.1111111111111p-3, 0x1.e1e1e1e1e1e1ep-4, 0x1.af286bca1af28p-4,
                           0x1.8618618618618p-4, 0x1.642c8590b2164p-4};

// Horner in fma: one rounding per step, the same on every machine.
template <size_t N>
double horner(const double (&c)[N], double z) {
  double p = c[N - 1];
  for (size_t i = N - 1; i-- > 0;) p = std::fma(p, z, c[i]);
  return p;
}

// s + e == a + b exactly (Knuth's 2Sum, any magnitudes).
inline void two_sum(double a, double b, double& s, double& e) {
  s = a + b;
  const double bb = s - a;
  e = (a - (s - bb)) + (b - bb);
}

// Same, when |a| >= |b| (Dekker's Fast2Sum).
inline void fast_two_sum(double a, double b, double& s, double& e) {
  s = a + b;
  e = b - (s - a);
}

// 2^m for -1022 <= m <= 1023, built from bits so that no libm ldexp is involved.
inline double pow2(int m) { return std::bit_cast<double>(uint64_t(m + 1023) << 52); }

// exp(xh + xl), |xl| <= ulp(xh): powf_rounded passes its exponent as a double-double.
double exp_core(double xh, double xl) {
  if (xh > 710.0) return kInf;  // exp(709.79) already overflows; also +inf
  if (xh < -746.0) return 0.0;  // below ln(2^-1075) ~ -745.133 everything rounds to 0; also -inf
  // x = n ln2 + r, |r| <= ln2/2 (+ rounding). n * kLn2Hi is exact and so is the subtraction
  // (Sterbenz: x and n*kLn2Hi are within a factor 2 when n != 0), so r = rhi + rlo exactly up to
  // the tiny error of n * kLn2Lo.
  const double nd = std::rint(xh * kInvLn2);
  const double rhi = xh - nd * kLn2Hi;
  const double rlo = std::fma(-nd, kLn2Lo, xl);
  double r, rr;
  two_sum(rhi, rlo, r, rr);
  // exp(r + rr) = 1 + r + r^2/2 + [rr (1 + r) + r^3 Q(r)]. 1 + r and r^2/2 (up to 0.06) are
  // summed with their rounding errors kept, so the bracket (< 0.008) is the only part rounded
  // before the final addition: ~0.5 ulp in total.
  const double r2 = r * r;
  const double half_r2 = 0.5 * r2;
  const double half_r2_lo = 0.5 * std::fma(r, r, -r2);
  double hi1, e1, hi, e2;
  fast_two_sum(1.0, r, hi1, e1);
  fast_two_sum(hi1, half_r2, hi, e2);  // hi1 >= 0.65 > half_r2
  const double r3 = r2 * r;
  const double lo = std::fma(r3, horner(kExp, r), half_r2_lo + std::fma(r, rr, rr));
  const double tail = (e1 + e2) + lo;
  const int n = int(nd);
  if (n >= -1021) {
    const double y = hi + tail;  // in [0.70, 1.42], so y * 2^n is exact or overflows
    return n > 1023 ? (y * 2.0) * pow2(1023) : y * pow2(n);
  }
  // The result may be subnormal: scaling a rounded y would round twice. Instead round
  // (y + ye) * 2^(n+1074) (y + ye = hi + tail exactly) to an integer count of 2^-1074 directly.
  double y, ye;
  fast_two_sum(hi, tail, y, ye);
  const double sc = pow2(n + 1074);  // n + 1074 >= -2 since x >= -746
  const double z = y * sc, zl = ye * sc;
  const double i = std::rint(z);
  const double f = (z - i) + zl;  // z - i is exact, |f| <= 0.75
  const double k = f > 0.5 ? i + 1.0 : (f < -0.5 ? i - 1.0 : i);
  return k * 0x1p-1074;  // k < 2^53: exact
}

// log(x) = hi + lo (not normalized, |lo| <~ ulp(hi)) for finite x > 0.
void log_core(double x, double& hi, double& lo) {
  int k = 0;
  if (x < 0x1p-1022) {  // subnormal: make it normal so the exponent field is the exponent
    x *= 0x1p54;
    k = -54;
  }
  const uint64_t bits = std::bit_cast<uint64_t>(x);
  k += int(bits >> 52) - 1023;
  double m = std::bit_cast<double>((bits & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull);  // [1, 2)
  if (m > kSqrt2) {  // centre the range on 1: m in (0.707, 1.414], so |log m| <= ln2/2
    m *= 0.5;
    ++k;
  }
  // log(1+f) = f - f^2/2 + s (f^2/2 + R(s^2)), s = f/(2+f). f is exact (Sterbenz), f^2/2 is kept
  // exactly as hf + hfl; only the small s(...) term carries rounding errors of its own.
  const double f = m - 1.0;
  // s = f / (2 + f) to within ~1/2 ulp: the rounding of 2 + f is corrected with one Newton step.
  double d, de;
  fast_two_sum(2.0, f, d, de);
  const double s0 = f / d;
  const double s = s0 + std::fma(-s0, de, std::fma(-s0, d, f)) / d;
  const double z = s * s;
  const double fsq = f * f;
  const double hf = 0.5 * fsq;
  const double hfl = 0.5 * std::fma(f, f, -fsq);
  const double u = hf + std::fma(z, horner(kLog, z), hfl);  // f^2/2 + R, rounded once
  double t1, e1;
  fast_two_sum(f, -hf, t1, e1);  // |hf| <= 0.21 |f|
  double e2;
  two_sum(double(k) * kLn2Hi, t1, hi, e2);  // k * kLn2Hi exact
  const double small = std::fma(s, u, e1 - hfl);
  lo = e2 + std::fma(double(k), kLn2Lo, small);
}

// r = rh + rl with |r| <~ pi/4 and x = r + q*pi/2 (mod 2pi); returns q mod 4.
// Payne-Hanek for |x| > 2^20: x = M 2^E with M < 2^53 an integer, so x * 2/pi mod 4 only needs the
// 2/pi bits from 2^-(E-1) down (higher ones add multiples of 4); a 192-bit window W of them, times
// M, gives 2 quadrant bits and >= 128 fraction bits. Truncating W errs by < 2^-137 quadrants, tiny
// next to the smallest fraction any double can produce (~2^-62).
int reduce_large(double ax, double& rh, double& rl) {
  constexpr int kWinWords = 6;  // 192 bits
  const uint64_t bits = std::bit_cast<uint64_t>(ax);
  const uint64_t mant = (bits & 0x000FFFFFFFFFFFFFull) | 0x0010000000000000ull;
  const int e = int(bits >> 52) - 1075;              // ax = mant * 2^e, e >= -32 here
  const int first = e > 2 ? e - 2 : 0;               // 0-based index of the first 2/pi bit kept
  const int point = kWinWords * 32 + first - e;      // binary point of mant * W, in [190, 224]
  uint32_t w[kWinWords];                             // little-endian limbs of W
  const int word = first / 32, sh = first % 32;
  for (int j = 0; j < kWinWords; ++j) {
    const int t = word + kWinWords - 1 - j;
    w[j] = (kTwoOverPiBits[t] << sh) | (sh ? kTwoOverPiBits[t + 1] >> (32 - sh) : 0u);
  }
  uint32_t p[kWinWords + 2] = {};  // mant * W, schoolbook in 32-bit limbs
  const uint64_t m32[2] = {mant & 0xFFFFFFFFu, mant >> 32};
  for (int i = 0; i < 2; ++i) {
    uint64_t carry = 0;
    for (int j = 0; j < kWinWords; ++j) {
      const uint64_t t = m32[i] * w[j] + p[i + j] + carry;
      p[i + j] = uint32_t(t);
      carry = t >> 32;
    }
    p[i + kWinWords] = uint32_t(carry);
  }
  auto bits64 = [&p](int pos) {  // bits [pos, pos + 64) of the product
    const int i = pos / 32, s = pos % 32;
    const uint64_t lo = (uint64_t(p[i + 1]) << 32) | p[i];
    return s ? (lo >> s) | (uint64_t(p[i + 2]) << (64 - s)) : lo;
  };
  int q = int(bits64(point - 62) >> 62);
  const uint64_t fhi = bits64(point - 64), flo = bits64(point - 128);
  // The fraction as three exact doubles; round to the nearest quadrant so |r| <= pi/4.
  double c1 = double(fhi >> 11) * 0x1p-53;
  const double c2 = double(((fhi & 0x7FF) << 42) | (flo >> 22)) * 0x1p-106;
  const double c3 = double(flo & 0x3FFFFF) * 0x1p-128;
  if (fhi >> 63) {
    c1 -= 1.0;  // exact
    ++q;
  }
  double t, e1, fh, e2;
  two_sum(c2, c3, t, e1);
  two_sum(c1, t, fh, e2);
  const double fl = e1 + e2;
  // r = (fh + fl) * pi/2 in double-double.
  const double ph = fh * kPio2Hi;
  double pl = std::fma(fh, kPio2Hi, -ph);
  pl = std::fma(fh, kPio2Lo, pl);
  pl = std::fma(fl, kPio2Hi, pl);
  fast_two_sum(ph, pl, rh, rl);
  return q & 3;
}

int reduce(double x, double& rh, double& rl) {
  const double ax = std::fabs(x);
  if (ax <= kPio4) {
    rh = x;
    rl = 0.0;
    return 0;
  }
  if (ax <= 0x1p20) {
    // Cody-Waite: |n| <= 667544 < 2^20, so every n * part product is exact except n * kPio2D (the
    // last, 2^-100-sized term) and x - n * kPio2A is exact (Sterbenz); the two_sums keep the rest.
    const double n = std::rint(x * kTwoOverPi);
    const double a = x - n * kPio2A;
    double s1, e1, s2, e2;
    two_sum(a, -(n * kPio2B), s1, e1);
    two_sum(s1, -(n * kPio2C), s2, e2);
    two_sum(s2, std::fma(-n, kPio2D, e1 + e2), rh, rl);
    return int(int64_t(n) & 3);
  }
  const int q = reduce_large(ax, rh, rl);
  if (x > 0) return q;
  rh = -rh;
  rl = -rl;
  return (4 - q) & 3;
}

// sin(rh + rl) = rh - r^3/6 + [r^5 S(z) + rl cos(rh)]. The r^3/6 term (up to 0.08 |rh|) is formed
// in double-double and added to rh with its error kept; rounding it as a double would add up to
// 0.25 ulp. The bracket is < 0.003 |rh|, so its own rounding errors are negligible.
double sin_kernel(double rh, double rl) {
  const double zh = rh * rh;
  const double zl = std::fma(rh, rh, -zh);
  const double r3 = rh * zh;
  const double r3l = std::fma(rh, zl, std::fma(rh, zh, -r3));  // rh^3 = r3 + r3l
  const double t = r3 * kSin3;
  const double tl = std::fma(r3, kSin3Lo, std::fma(r3l, kSin3, std::fma(r3, kSin3, -t)));
  double s, e;
  fast_two_sum(rh, t, s, e);
  const double r5 = r3 * zh;
  const double rl_cos = std::fma(-0.5 * zh, rl, rl);
  return s + (e + std::fma(r5, horner(kSin, zh), tl + rl_cos));
}

// cos(rh + rl) = 1 - zh/2 + [err(1 - zh/2) - zl/2 - rl sin(rh) + z^2 C(z)], with zh + zl = rh^2 exactly:
// a rounded z alone would cost up to 0.3 ulp next to the leading 1.
double cos_kernel(double rh, double rl) {
  const double zh = rh * rh;
  const double zl = std::fma(rh, rh, -zh);
  const double hz = 0.5 * zh;
  double w, e;
  fast_two_sum(1.0, -hz, w, e);
  const double zz = std::fma(zh, zh, 2.0 * zh * zl);  // r^4 with one rounding: a rounded z costs 0.06 ulp here
  double lo = std::fma(zz, horner(kCos, zh), -0.5 * zl);
  const double sin_rh = std::fma(rh * zh, kSin3, rh);  // rl * rh alone would be 0.04 ulp off
  lo = std::fma(-sin_rh, rl, lo);
  return w + (e + lo);
}

}  // namespace

double exp(double x) {
  if (x != x) return x + x;
  return exp_core(x, 0.0);
}

double log(double x) {
  if (x != x) return x + x;
  if (x < 0.0) return kNaN;
  if (x == 0.0) return -kInf;
  if (x == kInf) return x;
  double hi, lo;
  log_core(x, hi, lo);
  return hi + lo;
}

double sin(double x) {
  if (!std::isfinite(x)) return x - x;  // NaN for NaN and +-inf
  if (x == 0.0) return x;               // keep the sign of -0
  double rh, rl;
  switch (reduce(x, rh, rl)) {
    case 0: return sin_kernel(rh, rl);
    case 1: return cos_kernel(rh, rl);
    case 2: return -sin_kernel(rh, rl);
    default: return -cos_kernel(rh, rl);
  }
}

double cos(double x) {
  if (!std::isfinite(x)) return x - x;
  double rh, rl;
  switch (reduce(x, rh, rl)) {
    case 0: return cos_kernel(rh, rl);
    case 1: return -sin_kernel(rh, rl);
    case 2: return -cos_kernel(rh, rl);
    default: return sin_kernel(rh, rl);
  }
}

float expf_rounded(float x) { return float(pmath::exp(double(x))); }

float powf_rounded(float base, float exponent) {
  if (exponent == 0.0f || base == 1.0f) return 1.0f;
  if (base != base || exponent != exponent || base < 0.0f) return std::numeric_limits<float>::quiet_NaN();
  if (base == 0.0f) return exponent > 0.0f ? 0.0f : std::numeric_limits<float>::infinity();
  if (std::isinf(base)) return exponent > 0.0f ? std::numeric_limits<float>::infinity() : 0.0f;
  // y = e * log(b) in double-double: a rounded y would carry an error of up to |y| 2^-53 (|y| is up
  // to ~104 for a finite nonzero float result), i.e. as much relative error in the result. With it
  // the double result is ~0.5 ulp, so the one rounding to float can only differ from the correctly
  // rounded float for values within ~2^-53 (relative) of a float midpoint.
  double lh, ll;
  log_core(double(base), lh, ll);
  const double e = double(exponent);
  const double yh = e * lh;
  const double yl = std::fma(e, ll, std::fma(e, lh, -yh));
  return float(exp_core(yh, yl));
}

}  // namespace kvp::pmath
