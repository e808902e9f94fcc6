// Highway implementations of the `portable` primitives (portable_simd.h), compiled once per target
// by foreach_target.h. Every target runs the same arithmetic per output: the abstract 16-lane
// vector is kSub = 16 / (hardware lanes) registers, whose lane j of register s is abstract lane
// s * kL + j; tiles and packings exist only to use the registers well.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "kernels/portable_parts.h"
#include "kernels/portable_scalar.h"
#include "kernels/portable_simd.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/portable_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "kernels/portable_common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvp::psimd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

float ExpF32(float x) { return hn::GetLane(Exp(hn::Set(DF(), x))); }
float TanhF32(float x) { return hn::GetLane(Tanh(hn::Set(DF(), x))); }

void SiluMul(float* gate, const float* up, size_t n, DType act) {
  const DF d;
  const VF one = hn::Set(d, 1.0f);
  MapInPlace(gate, up, n, [&](VF g, VF u) {
    const VF s = RoundAct(d, hn::Div(g, hn::Add(one, Exp(hn::Neg(g)))), act);
    return RoundAct(d, hn::Mul(s, u), act);
  });
}

void GeluTanhMul(float* gate, const float* up, size_t n, DType act) {
  const DF d;
  // The same constants and operation order as elementwise.cpp's gelu_tanh_mul (PyTorch's kernel).
  const VF beta = hn::Set(d, float(M_SQRT2 * M_2_SQRTPI * 0.5));
  const VF kappa = hn::Set(d, 0.044715f);
  const VF half = hn::Set(d, 0.5f), one = hn::Set(d, 1.0f);
  MapInPlace(gate, up, n, [&](VF x, VF u) {
    const VF inner = hn::Mul(beta, hn::Add(x, hn::Mul(kappa, hn::Mul(hn::Mul(x, x), x))));
    const VF g = RoundAct(d, hn::Mul(hn::Mul(half, x), hn::Add(one, Tanh(inner))), act);
    return RoundAct(d, hn::Mul(g, u), act);
  });
}

HWY_INLINE VF SoftcapV(DF d, VF x, VF cap, DType act) {
  return RoundAct(d, hn::Mul(RoundAct(d, Tanh(RoundAct(d, hn::Div(x, cap), act)), act), cap), act);
}

void Softcap(float* x, size_t n, float cap, DType act) {
  const DF d;
  const VF c = hn::Set(d, cap);
  MapInPlace(x, nullptr, n, [&](VF v, VF) { return SoftcapV(d, v, c, act); });
}

template <int R, typename WT>
HWY_INLINE void DirectRows(const float* x, const float* xt, size_t m, const WT* W, size_t K, size_t N, size_t nb,
                           size_t ne, size_t nv, size_t tail, float* y) {
  const float* xs[R];
  const float* xts[R];
  for (int r = 0; r < R; ++r) {
    xs[r] = x + (m + size_t(r)) * K;
    xts[r] = xt != nullptr ? xt + (m + size_t(r)) * kLanes : nullptr;  // null: K has no tail
  }
  size_t n = nb;
  for (; n + kDC <= ne; n += kDC) {
    const WT* ws[kDC];
    for (int c = 0; c < kDC; ++c) ws[c] = W + (n + size_t(c)) * K;
    DirectTile<R, kDC>(xs, xts, ws, nv, tail, y + m * N + n, N);
  }
  for (; n < ne; ++n) {
    const WT* w = W + n * K;
    DirectTile<R, 1>(xs, xts, &w, nv, tail, y + m * N + n, N);
  }
}

// Rows m.. of x in groups of at most kDR (R counts down to the remainder).
template <int R, typename WT>
HWY_INLINE void DirectRowGroups(const float* x, const float* xt, size_t M, const WT* W, size_t K, size_t N,
                                size_t nb, size_t ne, size_t nv, size_t tail, float* y) {
  size_t m = 0;
  for (; m + R <= M; m += R) DirectRows<R>(x, xt, m, W, K, N, nb, ne, nv, tail, y);
  if constexpr (R > 1) {
    if (m < M)
      DirectRowGroups<R - 1>(x + m * K, xt != nullptr ? xt + m * kLanes : nullptr, M - m, W, K, N, nb, ne, nv, tail,
                             y + m * N);
  }
}

template <typename WT>
void MatmulDirectT(const float* x, size_t M, const WT* W, size_t K, size_t N, size_t n0, size_t n1, float* y) {
  const size_t nv = K / kLanes, tail = K % kLanes;
  // Zero-padded K tails of the x rows; null when K has none. Decode-sized M stays off the heap.
  HWY_ALIGN float xt_small[4 * kLanes];
  std::vector<float> xt_big;
  float* xt = nullptr;
  if (tail > 0) {
    if (M > 4) xt_big.resize(M * kLanes);
    xt = M > 4 ? xt_big.data() : xt_small;
    FillXTails(x, M, K, nv, tail, xt);
  }
  if (M == 1) {
    // kStreams sequential streams side by side, as the invariant policy's GEMV (and for the same
    // reasons: the hardware prefetchers, and independent chains).
    const float* xtp = xt;
    ForStreamRows(
        n0, n1,
        [&](const size_t* rows) {
          const WT* ws[kStreams];
          for (size_t s = 0; s < kStreams; ++s) ws[s] = W + rows[s] * K;
          float out[kStreams];
          DirectTile<1, kStreams>(&x, &xtp, ws, nv, tail, out, 0);
          for (size_t s = 0; s < kStreams; ++s) y[rows[s]] = out[s];
        },
        [&](size_t n) {
          const WT* w = W + n * K;
          DirectTile<1, 1>(&x, &xtp, &w, nv, tail, y + n, 0);
        });
    return;
  }
  // A block of W rows small enough to stay in L2 is reused by every group of x rows.
  const size_t block = std::max<size_t>(kDC, (256u << 10) / (K * sizeof(WT)) / kDC * kDC);
  for (size_t nb = n0; nb < n1; nb += block)
    DirectRowGroups<kDR>(x, xt, M, W, K, N, nb, std::min(n1, nb + block), nv, tail, y);
}

void MatmulDirect(const float* x, size_t M, const void* W, DType wt, size_t K, size_t N, size_t n0, size_t n1,
                  float* y) {
  switch (wt) {
    case DType::F32: return MatmulDirectT(x, M, static_cast<const float*>(W), K, N, n0, n1, y);
    case DType::F16: return MatmulDirectT(x, M, static_cast<const hwy::float16_t*>(W), K, N, n0, n1, y);
    case DType::BF16: return MatmulDirectT(x, M, static_cast<const hwy::bfloat16_t*>(W), K, N, n0, n1, y);
  }
}

// ---------------------------------------------------------------------------------------------
float SumSquares(const float* x, size_t dim) {
  const DF d;
  VF acc[kSub];
  for (size_t s = 0; s < kSub; ++s) acc[s] = hn::Zero(d);
  size_t i = 0;
  for (; i + kLanes <= dim; i += kLanes)
    for (size_t s = 0; s < kSub; ++s) {
      const VF v = hn::LoadU(d, x + i + s * kL);
      acc[s] = Fma(v, v, acc[s]);
    }
  if (i < dim) {
    HWY_ALIGN float t[kLanes] = {};
    std::copy(x + i, x + dim, t);
    for (size_t s = 0; s < kSub; ++s) {
      const VF v = hn::Load(d, t + s * kL);
      acc[s] = Fma(v, v, acc[s]);
    }
  }
  return Reduce(acc);
}

float InvRms(const float* x, size_t dim, float eps) {
  const float mean = SumSquares(x, dim) / float(dim);
  return 1.0f / std::sqrt(mean + eps);
}

void RmsnormRow(const float* x, size_t dim, const float* w, float eps, DType act, float* y) {
  const DF d;
  const VF vinv = hn::Set(d, InvRms(x, dim, eps));
  std::copy(x, x + dim, y);
  MapInPlace(y, w, dim, [&](VF v, VF g) { return RoundAct(d, hn::Mul(g, RoundAct(d, hn::Mul(v, vinv), act)), act); });
}

void RmsnormRowFp32Gain(const float* x, size_t dim, const float* g, float eps, DType act, float* y) {
  const DF d;
  const VF vinv = hn::Set(d, InvRms(x, dim, eps));
  std::copy(x, x + dim, y);
  MapInPlace(y, g, dim, [&](VF v, VF gv) { return RoundAct(d, hn::Mul(hn::Mul(v, vinv), gv), act); });
}

}  // namespace HWY_NAMESPACE
}  // namespace kvp::psimd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvp::psimd {

HWY_EXPORT(MatmulDirect);
HWY_EXPORT(RmsnormRow);
HWY_EXPORT(RmsnormRowFp32Gain);
HWY_EXPORT(SiluMul);
HWY_EXPORT(GeluTanhMul);
HWY_EXPORT(Softcap);
HWY_EXPORT(ExpF32);
HWY_EXPORT(TanhF32);

float exp_f32(float x) { return HWY_DYNAMIC_DISPATCH(ExpF32)(x); }
float tanh_f32(float x) { return HWY_DYNAMIC_DISPATCH(TanhF32)(x); }

namespace {
void matmul_direct(const float* x, size_t M, const void* W, DType wt, size_t K, size_t N, size_t n0, size_t n1,
                   float* y) {
  HWY_DYNAMIC_DISPATCH(MatmulDirect)(x, M, W, wt, K, N, n0, n1, y);
}
void rmsnorm_row(const float* x, size_t dim, const float* w, float eps, DType act, float* y) {
  HWY_DYNAMIC_DISPATCH(RmsnormRow)(x, dim, w, eps, act, y);
}
void rmsnorm_row_fp32_gain(const float* x, size_t dim, const float* g, float eps, DType act, float* y) {
  HWY_DYNAMIC_DISPATCH(RmsnormRowFp32Gain)(x, dim, g, eps, act, y);
}
void silu_mul(float* gate, const float* up, size_t n, DType act) { HWY_DYNAMIC_DISPATCH(SiluMul)(gate, up, n, act); }
void gelu_tanh_mul(float* gate, const float* up, size_t n, DType act) {
  HWY_DYNAMIC_DISPATCH(GeluTanhMul)(gate, up, n, act);
}
void softcap(float* x, size_t n, float cap, DType act) { HWY_DYNAMIC_DISPATCH(Softcap)(x, n, cap, act); }
// One value at a time through pscalar, whose exp is Exp's bits (tests/test_portable_scalar.cpp):
// only GPT-OSS's experts run it, a few thousand values a token.
void clamped_swiglu(float* gate, const float* up, size_t n, float alpha, float limit, DType act) {
  const auto round = [act](float v) { return round_to(act, v); };
  for (size_t i = 0; i < n; ++i) gate[i] = pscalar::clamped_swiglu(gate[i], up[i], alpha, limit, round);
}
}  // namespace

const FixedOrderSimd& ops() {
  static const FixedOrderSimd table{matmul_direct,
                                    packed_x_floats,
                                    packed_x_blocks,
                                    pack_x,
                                    matmul_blocked_scratch_floats,
                                    matmul_blocked,
                                    attn_row_scratch_floats,
                                    attn_row,
                                    rmsnorm_row,
                                    rmsnorm_row_fp32_gain,
                                    silu_mul,
                                    gelu_tanh_mul,
                                    softcap,
                                    clamped_swiglu,
                                    /*portable_rope=*/true};
  return table;
}

}  // namespace kvp::psimd
#endif  // HWY_ONCE
