// The `portable` policy's shared per-target pieces (portable_simd.h has the specification): the
// specification's fma, the 16-lane tree, exp, tanh and the direct matmul tile. Included once per
// Highway target, after hwy/highway.h, by the portable_*.cpp files (Highway's -inl.h toggle guard).
#if defined(KVP_KERNELS_PORTABLE_COMMON_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVP_KERNELS_PORTABLE_COMMON_INL_H_
#undef KVP_KERNELS_PORTABLE_COMMON_INL_H_
#else
#define KVP_KERNELS_PORTABLE_COMMON_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/dtype.h"
#include "hwy/highway.h"
#include "kernels/portable_simd.h"
#include "kernels/simd_common-inl.h"
#include "kernels/unroll.h"

HWY_BEFORE_NAMESPACE();
namespace kvp::psimd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
using DI = hn::RebindToSigned<DF>;

using simd_common::HWY_NAMESPACE::ForStreamRows;
using simd_common::HWY_NAMESPACE::kStreams;
using simd_common::HWY_NAMESPACE::LoadF;
using simd_common::HWY_NAMESPACE::RoundAct;
using simd_common::HWY_NAMESPACE::ScalarF;

constexpr size_t kL = hn::MaxLanes(DF());  // hardware lanes
static_assert(kLanes % kL == 0, "the abstract vector must be whole registers");
constexpr size_t kSub = kLanes / kL;       // registers per abstract vector

// Tiles: rows of x by rows of W, kSub accumulators each (direct), or one register per accumulator
// with the packed operands split by register (blocked, see PackX).
#if HWY_TARGET <= HWY_AVX3
constexpr int kDR = 4, kDC = 4;  // direct: 16 accumulators of 32 registers
constexpr int kBR = 4, kBC = 6;  // blocked: 24
#elif HWY_TARGET == HWY_AVX2
constexpr int kDR = 3, kDC = 2;  // 12 (two registers per output) of 16
constexpr int kBR = 3, kBC = 4;  // 12
#else
constexpr int kDR = 1, kDC = 1;
constexpr int kBR = 3, kBC = 4;
#endif

constexpr size_t kKC = 512;       // blocked GEMM: floats of K per block, a multiple of kLanes
constexpr size_t kNB = 48;        // W rows per block, a multiple of kBC
constexpr size_t kMB = 16 * kBR;  // x rows per block
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

HWY_INLINE size_t round_up(size_t a, size_t b) { return (a + b - 1) / b * b; }

// The specification's fma. Targets without an fma instruction would otherwise round the product.
HWY_INLINE VF Fma(VF a, VF b, VF c) {
#if HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR
  const DF d;
  HWY_ALIGN float ta[kL], tb[kL], tc[kL];
  hn::Store(a, d, ta);
  hn::Store(b, d, tb);
  hn::Store(c, d, tc);
  for (size_t i = 0; i < kL; ++i) tc[i] = std::fma(ta[i], tb[i], tc[i]);
  return hn::Load(d, tc);
#else
  return hn::MulAdd(a, b, c);
#endif
}

// The fixed tree over the 16 lane sums at t, folding halves. Spelled out rather than looped in
// place: the in-place loop made the blocked GEMM's final reductions wait on store forwarding.
HWY_INLINE float Tree(const float* t) {
  float h[8];
  for (size_t i = 0; i < 8; ++i) h[i] = t[i] + t[i + 8];
  const float q0 = h[0] + h[4], q1 = h[1] + h[5], q2 = h[2] + h[6], q3 = h[3] + h[7];
  const float p0 = q0 + q2, p1 = q1 + q3;
  return p0 + p1;
}

HWY_INLINE float Reduce(const VF* acc) {
  HWY_ALIGN float t[kLanes];
  for (size_t s = 0; s < kSub; ++s) hn::Store(acc[s], DF(), t + s * kL);
  return Tree(t);
}

// ---------------------------------------------------------------------------------------------
// exp and tanh from +, *, / and fma with fixed constants.

// exp(x) = 2^n e^r with n = round(x / ln 2) and |r| <= ln2 / 2; e^r by its Taylor polynomial of
// degree 7 (truncation below 6e-9 relative), 2^n applied as two exact power-of-two factors so that
// results down to the subnormals round once.
HWY_INLINE VF Exp(VF x) {
  const DF d;
  const DI di;
  // Beyond these the result is 0 or +inf anyway; the clamp keeps n within [-150, 128]. (A NaN
  // lane becomes a bound here and is restored below.)
  const VF xc = hn::Min(hn::Max(x, hn::Set(d, -104.0f)), hn::Set(d, 89.0f));
  const VF magic = hn::Set(d, 12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer (RNE)
  const VF n = hn::Sub(hn::Add(hn::Mul(xc, hn::Set(d, 1.44269504088896341f)), magic), magic);
  // ln 2 = kLn2Hi + kLn2Lo, kLn2Hi with 16 significant bits: n * kLn2Hi is exact.
  VF r = Fma(n, hn::Set(d, -0.693145751953125f), xc);
  r = Fma(n, hn::Set(d, -1.42860682030941723212e-6f), r);
  VF p = hn::Set(d, float(1.0 / 5040.0));
  p = Fma(p, r, hn::Set(d, float(1.0 / 720.0)));
  p = Fma(p, r, hn::Set(d, float(1.0 / 120.0)));
  p = Fma(p, r, hn::Set(d, float(1.0 / 24.0)));
  p = Fma(p, r, hn::Set(d, float(1.0 / 6.0)));
  p = Fma(p, r, hn::Set(d, 0.5f));
  p = Fma(p, r, hn::Set(d, 1.0f));
  p = Fma(p, r, hn::Set(d, 1.0f));
  const auto ni = hn::ConvertTo(di, n);
  const auto n1 = hn::ShiftRight<1>(ni);  // floor(n / 2): both halves within [-75, 64]
  const auto n2 = hn::Sub(ni, n1);
  const VF s1 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(n1, hn::Set(di, 127))));
  const VF s2 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(n2, hn::Set(di, 127))));
  const VF y = hn::Mul(hn::Mul(p, s1), s2);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// tanh: below |x| = 0.5 the odd Taylor series to x^17 (terms shrink by <= (2x/pi)^2 ~ 0.1), above
// it 1 - 2 / (e^2|x| + 1) with the sign of x (cancellation costs at most ~1 ulp there).
HWY_INLINE VF Tanh(VF x) {
  const DF d;
  const VF a = hn::Abs(x);
  const VF z = hn::Mul(x, x);
  VF q = hn::Set(d, float(6404582.0 / 10854718875.0));
  q = Fma(q, z, hn::Set(d, float(-929569.0 / 638512875.0)));
  q = Fma(q, z, hn::Set(d, float(21844.0 / 6081075.0)));
  q = Fma(q, z, hn::Set(d, float(-1382.0 / 155925.0)));
  q = Fma(q, z, hn::Set(d, float(62.0 / 2835.0)));
  q = Fma(q, z, hn::Set(d, float(-17.0 / 315.0)));
  q = Fma(q, z, hn::Set(d, float(2.0 / 15.0)));
  q = Fma(q, z, hn::Set(d, float(-1.0 / 3.0)));
  const VF small = Fma(hn::Mul(x, z), q, x);
  const VF one = hn::Set(d, 1.0f);
  const VF e = Exp(hn::Add(a, a));
  const VF large = hn::Sub(one, hn::Div(hn::Set(d, 2.0f), hn::Add(e, one)));
  // The sign of x on both branches (the series loses it at -0: -0 + (+0) is +0).
  return hn::CopySign(hn::IfThenElse(hn::Lt(a, hn::Set(d, 0.5f)), small, large), x);
}

// f over n floats in place, a register at a time; the tail goes through a padded register (every
// lane is computed on its own, so where a value sits does not matter).
template <class F>
HWY_INLINE void MapInPlace(float* x, const float* y, size_t n, F f) {
  const DF d;
  size_t i = 0;
  for (; i + kL <= n; i += kL) {
    const VF yv = y != nullptr ? hn::LoadU(d, y + i) : hn::Zero(d);
    hn::StoreU(f(hn::LoadU(d, x + i), yv), d, x + i);
  }
  if (i < n) {
    HWY_ALIGN float tx[kL] = {}, ty[kL] = {};
    std::copy(x + i, x + n, tx);
    if (y != nullptr) std::copy(y + i, y + n, ty);
    hn::Store(f(hn::Load(d, tx), hn::Load(d, ty)), d, tx);
    std::copy(tx, tx + (n - i), x + i);
  }
}

// Four outputs' trees at once in registers, where the target has the shuffles: the additions of
// Tree, in its order (halves first: lane i + lane i+8, then i + i+4, ...), four outputs per vector.
// Level1 does what the register split has already made a plain add; Tree4 takes it from there.
#undef KVP_PORTABLE_TREE4
#if HWY_TARGET <= HWY_AVX3
#define KVP_PORTABLE_TREE4 1
HWY_INLINE VF Level1(const VF* a) { return a[0]; }  // all 16 lanes in one register

HWY_INLINE void Tree4(VF a0, VF a1, VF a2, VF a3, float* out) {
  const DF d;
  // [a0's 8 half sums | a1's], [a2's | a3's]
  const VF x01 = hn::Add(hn::ConcatLowerLower(d, a1, a0), hn::ConcatUpperUpper(d, a1, a0));
  const VF x23 = hn::Add(hn::ConcatLowerLower(d, a3, a2), hn::ConcatUpperUpper(d, a3, a2));
  // 128-bit blocks: the even ones (each output's lanes 0..3) plus the odd ones (4..7).
  const VF even{_mm512_shuffle_f32x4(x01.raw, x23.raw, _MM_SHUFFLE(2, 0, 2, 0))};
  const VF odd{_mm512_shuffle_f32x4(x01.raw, x23.raw, _MM_SHUFFLE(3, 1, 3, 1))};
  const VF y = hn::Add(even, odd);
  const VF z = hn::Add(y, hn::Shuffle1032(y));
  const VF w = hn::Add(z, hn::Shuffle2301(z));
  HWY_ALIGN float t[kL];
  hn::Store(w, d, t);
  out[0] = t[0];
  out[1] = t[4];
  out[2] = t[8];
  out[3] = t[12];
}
#elif HWY_TARGET == HWY_AVX2
#define KVP_PORTABLE_TREE4 1
HWY_INLINE VF Level1(const VF* a) { return hn::Add(a[0], a[1]); }  // lanes 0..7 + lanes 8..15

HWY_INLINE void Tree4(VF v0, VF v1, VF v2, VF v3, float* out) {
  const DF d;
  const VF x01 = hn::Add(hn::ConcatLowerLower(d, v1, v0), hn::ConcatUpperUpper(d, v1, v0));
  const VF x23 = hn::Add(hn::ConcatLowerLower(d, v3, v2), hn::ConcatUpperUpper(d, v3, v2));
  const VF z01 = hn::Add(x01, hn::Shuffle1032(x01)), z23 = hn::Add(x23, hn::Shuffle1032(x23));
  const VF w01 = hn::Add(z01, hn::Shuffle2301(z01)), w23 = hn::Add(z23, hn::Shuffle2301(z23));
  HWY_ALIGN float t[2 * kL];
  hn::Store(w01, d, t);
  hn::Store(w23, d, t + kL);
  out[0] = t[0];
  out[1] = t[4];
  out[2] = t[8];
  out[3] = t[12];
}
#else
#define KVP_PORTABLE_TREE4 0
#endif

// ---------------------------------------------------------------------------------------------
// Direct tile: R rows of x by C rows of W over the whole K, W widened in registers; kSub
// accumulators per output. `xtails[r]` is row r's zero-padded last 16 (used when tail > 0).
template <int R, int C, typename WT>
HWY_INLINE void DirectTile(const float* const* xs, const float* const* xtails, const WT* const* ws, size_t nv,
                           size_t tail, float* out, size_t out_stride) {
  const DF d;
  // Widened before the accumulators come alive (a scalar fp16 conversion is a call).
  HWY_ALIGN float wtails[C * kLanes] = {};
  if (tail > 0) {
    for (int c = 0; c < C; ++c)
      for (size_t i = 0; i < tail; ++i) wtails[size_t(c) * kLanes + i] = ScalarF(ws[c] + nv * kLanes + i);
  }
  VF acc[R][C][kSub];
  KVP_UNROLL(16)
  for (int r = 0; r < R; ++r) {
    KVP_UNROLL(16)
    for (int c = 0; c < C; ++c) {
      KVP_UNROLL(16)
      for (size_t s = 0; s < kSub; ++s) acc[r][c][s] = hn::Zero(d);
    }
  }
  for (size_t v = 0; v < nv; ++v) {
    const size_t k = v * kLanes;
    KVP_UNROLL(16)
    for (size_t s = 0; s < kSub; ++s) {
      VF xv[R];
      KVP_UNROLL(16)
      for (int r = 0; r < R; ++r) xv[r] = hn::LoadU(d, xs[r] + k + s * kL);
      KVP_UNROLL(16)
      for (int c = 0; c < C; ++c) {
        const VF w = LoadF(d, ws[c] + k + s * kL);
        KVP_UNROLL(16)
        for (int r = 0; r < R; ++r) acc[r][c][s] = Fma(xv[r], w, acc[r][c][s]);
      }
    }
  }
  if (tail > 0) {
    KVP_UNROLL(16)
    for (size_t s = 0; s < kSub; ++s) {
      VF xv[R];
      KVP_UNROLL(16)
      for (int r = 0; r < R; ++r) xv[r] = hn::LoadU(d, xtails[r] + s * kL);
      KVP_UNROLL(16)
      for (int c = 0; c < C; ++c) {
        const VF w = hn::Load(d, wtails + size_t(c) * kLanes + s * kL);
        KVP_UNROLL(16)
        for (int r = 0; r < R; ++r) acc[r][c][s] = Fma(xv[r], w, acc[r][c][s]);
      }
    }
  }
#if KVP_PORTABLE_TREE4
  if constexpr (C % 4 == 0) {
    KVP_UNROLL(16)
    for (int r = 0; r < R; ++r) {
      KVP_UNROLL(16)
      for (int c = 0; c < C; c += 4)
        Tree4(Level1(acc[r][c]), Level1(acc[r][c + 1]), Level1(acc[r][c + 2]), Level1(acc[r][c + 3]),
              out + size_t(r) * out_stride + size_t(c));
    }
    return;
  }
#endif
  // Through memory, so that no accumulator's address is taken while the loop above runs.
  HWY_ALIGN float spill[R * C * kLanes];
  KVP_UNROLL(16)
  for (int r = 0; r < R; ++r) {
    KVP_UNROLL(16)
    for (int c = 0; c < C; ++c) {
      KVP_UNROLL(16)
      for (size_t s = 0; s < kSub; ++s) hn::Store(acc[r][c][s], d, spill + size_t(r * C + c) * kLanes + s * kL);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) out[size_t(r) * out_stride + size_t(c)] = Tree(spill + size_t(r * C + c) * kLanes);
}

// The last K % 16 elements of rows [0, M) of x, zero-padded to 16 floats per row.
HWY_INLINE void FillXTails(const float* x, size_t M, size_t K, size_t nv, size_t tail, float* xt) {
  for (size_t m = 0; m < M; ++m) {
    float* dst = xt + m * kLanes;
    std::fill(dst, dst + kLanes, 0.0f);
    std::copy(x + m * K + nv * kLanes, x + m * K + nv * kLanes + tail, dst);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kvp::psimd
HWY_AFTER_NAMESPACE();

#endif  // KVP_KERNELS_PORTABLE_COMMON_INL_H_
