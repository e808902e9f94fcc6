#pragma once
// Elementary functions whose results are the same bits on every machine and compiler.
//
// libm's exp/log/sin/cos/pow differ between C libraries, versions and even CPU code paths (glibc
// picks FMA variants at run time), so a table built from them is not reproducible across hosts.
// These are built only from correctly rounded IEEE-754 operations (+ - * / fma, rint, exact
// power-of-two scaling) with fixed constants, so they are a pure function of their input bits.
// The `portable` kernel policy uses them for the RoPE tables, RoPE's inv_freq and the sampler.
//
// Requirements for the bit-for-bit promise: FLT_EVAL_METHOD == 0 (no x87 excess precision; checked
// at compile time), no -ffast-math, round-to-nearest mode, no flush-to-zero. The project builds
// with -ffp-contract=off; the code additionally never writes an inexact a*b+c as one expression,
// so a compiler that fuses within expressions (clang's default) produces the same bits too.
//
// Accuracy: all four double functions stay below 1 ulp of the exact value (typically ~0.5 ulp, see
// tests/test_portable_math.cpp), so float(f(double(x))) is almost always the correctly rounded float.

namespace kvp::pmath {

// Full range: NaN -> NaN, +inf -> +inf, -inf -> +0, x > ~709.78 -> +inf, results in the subnormal
// range rounded once (not twice) and x < ~-745.13 -> +0; the softmax needs exact zeros, not garbage.
double exp(double x);

// x > 0, subnormals included; +-0 -> -inf, x < 0 or NaN -> NaN, +inf -> +inf.
double log(double x);

// Accurate for all finite x: Cody-Waite reduction by pi/2 for |x| <= 2^20 (RoPE angles are
// pos * inv_freq with pos < 2^20), Payne-Hanek with 2/pi bits beyond. NaN and +-inf -> NaN.
double sin(double x);
double cos(double x);

// float(exp(double(x))): the one rounding to float happens last.
float expf_rounded(float x);

// base^exponent evaluated in double as exp(exponent * log(base)) with log and the product carried
// in double-double (so the double result is ~0.5 ulp), then rounded once to float. For RoPE's
// theta^(2i/d). Special cases: exponent == 0 or base == 1 -> 1; NaN -> NaN; base == +0 -> 0 or +inf;
// base == +inf -> +inf or 0; base < 0 -> NaN (even for integral exponents: no caller needs them).
float powf_rounded(float base, float exponent);

}  // namespace kvp::pmath
