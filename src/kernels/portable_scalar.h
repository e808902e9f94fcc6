#pragma once
// The `portable` policy's arithmetic one value at a time (portable_simd.h has the specification,
// portable_common-inl.h the Highway code): what a device without Highway computes — the CUDA
// portable kernels (src/cuda/cuda_portable*.cu) call these functions on the GPU — and what the CPU
// suite holds against the Highway code bit for bit (tests/test_portable_scalar.cpp), so that a
// change to either side that moves one bit fails on every machine, GPU or not.
//
// Every operation is spelled as the correctly rounded IEEE-754 operation it has to be: on the GPU
// the _rn intrinsics, which nvcc never contracts into an fma nor approximates (whatever --fmad or
// --use_fast_math say); on the host the plain operators (the project builds with
// -ffp-contract=off) and std::fma. No libm function and no CUDA math-library function enters a
// result. Denormals are kept on both (no flush-to-zero: kvparity never builds with -ftz=true).
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KVP_PORTABLE_FN __host__ __device__ __forceinline__
#else
#define KVP_PORTABLE_FN inline
#endif

namespace kvp::pscalar {

constexpr int kLanes = 16;  // the abstract vector of every reduction (portable_simd.h)

KVP_PORTABLE_FN float add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
KVP_PORTABLE_FN float sub(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
KVP_PORTABLE_FN float mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
KVP_PORTABLE_FN float div(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
KVP_PORTABLE_FN float fma(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
KVP_PORTABLE_FN float sqrt(float a) {
#ifdef __CUDA_ARCH__
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}
KVP_PORTABLE_FN bool is_nan(float a) { return a != a; }
KVP_PORTABLE_FN float from_bits(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
KVP_PORTABLE_FN uint32_t to_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
// |x| and sign transplants are bit operations: exact on every machine.
KVP_PORTABLE_FN float abs(float x) { return from_bits(to_bits(x) & 0x7fffffffu); }
KVP_PORTABLE_FN float copy_sign(float mag, float sign) {
  return from_bits((to_bits(mag) & 0x7fffffffu) | (to_bits(sign) & 0x80000000u));
}
// Clamps as the Highway code's Min(Max(x, lo), hi); x is not NaN where these are used.
KVP_PORTABLE_FN float clamp(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

// The fixed tree over 16 lane sums, folding halves: t[i] + t[i + 8], then + 4, + 2, + 1 (Tree in
// portable_common-inl.h; a GPU spreads the same additions over the lanes of a warp).
KVP_PORTABLE_FN float tree16(const float* t) {
  float h[8];
  for (int i = 0; i < 8; ++i) h[i] = add(t[i], t[i + 8]);
  const float q0 = add(h[0], h[4]), q1 = add(h[1], h[5]), q2 = add(h[2], h[6]), q3 = add(h[3], h[7]);
  return add(add(q0, q2), add(q1, q3));
}

// exp (Exp in portable_common-inl.h): 2^n e^r, n = round(x / ln 2) by the 1.5 * 2^23 trick, r in
// two fma steps against ln 2 split in 16 + 24 bits, e^r by a degree-7 Taylor polynomial, 2^n as two
// exact power-of-two factors so that subnormal results round once. NaN in, the same NaN out.
KVP_PORTABLE_FN float exp(float x) {
  if (is_nan(x)) return x;
  const float xc = clamp(x, -104.0f, 89.0f);
  const float magic = 12582912.0f;
  const float n = sub(add(mul(xc, 1.44269504088896341f), magic), magic);
  float r = fma(n, -0.693145751953125f, xc);
  r = fma(n, -1.42860682030941723212e-6f, r);
  float p = float(1.0 / 5040.0);
  p = fma(p, r, float(1.0 / 720.0));
  p = fma(p, r, float(1.0 / 120.0));
  p = fma(p, r, float(1.0 / 24.0));
  p = fma(p, r, float(1.0 / 6.0));
  p = fma(p, r, 0.5f);
  p = fma(p, r, 1.0f);
  p = fma(p, r, 1.0f);
  const int32_t ni = int32_t(n);           // n is an integer in [-150, 128]
  const int32_t n1 = ni >> 1;               // floor(n / 2) (arithmetic shift, C++20)
  const int32_t n2 = ni - n1;
  const float s1 = from_bits(uint32_t(n1 + 127) << 23);
  const float s2 = from_bits(uint32_t(n2 + 127) << 23);
  return mul(mul(p, s1), s2);
}

// tanh (Tanh in portable_common-inl.h): below |x| = 0.5 the odd Taylor series to x^17, above it
// 1 - 2 / (e^2|x| + 1); the sign of x on both.
KVP_PORTABLE_FN float tanh(float x) {
  const float a = abs(x);
  const float z = mul(x, x);
  float q = float(6404582.0 / 10854718875.0);
  q = fma(q, z, float(-929569.0 / 638512875.0));
  q = fma(q, z, float(21844.0 / 6081075.0));
  q = fma(q, z, float(-1382.0 / 155925.0));
  q = fma(q, z, float(62.0 / 2835.0));
  q = fma(q, z, float(-17.0 / 315.0));
  q = fma(q, z, float(2.0 / 15.0));
  q = fma(q, z, float(-1.0 / 3.0));
  const float small = fma(mul(x, z), q, x);
  const float large = sub(1.0f, div(2.0f, add(exp(add(a, a)), 1.0f)));
  return copy_sign(a < 0.5f ? small : large, x);
}

// The element-wise operations with elementary functions. `round` rounds to the compute dtype
// (round_to on the host, round_act on the GPU).
template <class Round>
KVP_PORTABLE_FN float silu_mul(float g, float u, Round round) {
  const float s = round(div(g, add(1.0f, exp(-g))));
  return round(mul(s, u));
}
template <class Round>
KVP_PORTABLE_FN float gelu_tanh_mul(float x, float u, Round round) {
  // PyTorch's GeluKernel (approximate="tanh") constants, in elementwise.cpp's order.
  const float beta = float(1.4142135623730950488 * 1.1283791670955125739 * 0.5);
  const float inner = mul(beta, add(x, mul(0.044715f, mul(mul(x, x), x))));
  const float g = round(mul(mul(0.5f, x), add(1.0f, tanh(inner))));
  return round(mul(g, u));
}
template <class Round>
KVP_PORTABLE_FN float clamped_swiglu(float g, float u, float alpha, float limit, Round round) {
  // elementwise.cpp's order; comparisons keep a NaN as torch.clamp does.
  g = g > limit ? limit : g;
  u = u > limit ? limit : u < -limit ? -limit : u;
  const float s = round(div(1.0f, add(1.0f, exp(-round(mul(g, alpha))))));
  return round(mul(round(add(u, 1.0f)), round(mul(g, s))));
}
template <class Round>
KVP_PORTABLE_FN float softcap(float x, float cap, Round round) {
  return round(mul(round(tanh(round(div(x, cap)))), cap));
}

// An attention score from its dot product, rounded where attention_score() rounds (kernels.h),
// with this policy's tanh for Gemma-2's soft-capping.
template <class Round>
KVP_PORTABLE_FN float attention_score(float dot, float divisor, float scale, float cap, Round round) {
  float v = round(dot);
  v = scale > 0.0f ? round(mul(v, scale)) : round(div(v, divisor));
  if (cap > 0.0f) v = round(mul(round(tanh(round(div(v, cap)))), cap));
  return v;
}

// RMSNorm's 1 / sqrt(mean + eps) from the tree's sum of squares.
KVP_PORTABLE_FN float inv_rms(float sum_squares, int dim, float eps) {
  return div(1.0f, sqrt(add(div(sum_squares, float(dim)), eps)));
}

}  // namespace kvp::pscalar
