// Per-target SIMD helpers shared by the standard, invariant and portable kernels: exact widening
// loads of fp32/fp16/bf16 and of KV cache rows, the vector RNE rounding that matches round_to()
// bit for bit, the P.V step of an attention tile, and the parts of an RMSNorm row that standard and
// invariant share.
// Included once per Highway target (the toggle guard below is Highway's -inl.h convention), after
// hwy/highway.h, by files that go through foreach_target.h.
#if defined(KVP_KERNELS_SIMD_COMMON_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVP_KERNELS_SIMD_COMMON_INL_H_
#undef KVP_KERNELS_SIMD_COMMON_INL_H_
#else
#define KVP_KERNELS_SIMD_COMMON_INL_H_
#endif

#include <cmath>

#include "core/dtype.h"
#include "core/kv_type.h"
#include "hwy/highway.h"
#include "kernels/dequant_rows.h"

HWY_BEFORE_NAMESPACE();
namespace kvp::simd_common {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Highway emulates fp16 conversion on targets without F16C, and that emulation truncates on the
// way down and mishandles inf/NaN on the way up; those targets convert through scalar code instead.
#undef KVP_SCALAR_F16
#if HWY_TARGET >= HWY_SSE4
#define KVP_SCALAR_F16 1
#else
#define KVP_SCALAR_F16 0
#endif

// Decode GEMVs walk their W rows as this many sequential streams side by side (see DotRowsT in
// standard_simd.cpp).
constexpr size_t kStreams = 4;

// Cuts rows [n0, n1) into kStreams contiguous parts and walks them side by side: tile(rows) gets
// one row index from each part per call, in order; single(n) then takes the rows left over.
template <class Tile, class Single>
HWY_INLINE void ForStreamRows(size_t n0, size_t n1, Tile&& tile, Single&& single) {
  const size_t per = (n1 - n0) / kStreams;
  for (size_t i = 0; i < per; ++i) {
    size_t rows[kStreams];
    for (size_t s = 0; s < kStreams; ++s) rows[s] = n0 + s * per + i;
    tile(rows);
  }
  for (size_t n = n0 + kStreams * per; n < n1; ++n) single(n);
}

constexpr size_t kMaxLanes = 64;  // upper bound on float lanes for any x86 target, for stack buffers

HWY_INLINE VF LoadF(DF d, const float* p) { return hn::LoadU(d, p); }

HWY_INLINE VF LoadF(DF d, const hwy::float16_t* p) {
#if KVP_SCALAR_F16
  HWY_ALIGN float tmp[kMaxLanes];
  const auto* bits = reinterpret_cast<const uint16_t*>(p);
  for (size_t i = 0; i < hn::Lanes(d); ++i) tmp[i] = f16_to_f32(bits[i]);
  return hn::Load(d, tmp);
#else
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(d, hn::LoadU(dh, p));
#endif
}

HWY_INLINE VF LoadF(DF d, const hwy::bfloat16_t* p) {
  const hn::Rebind<hwy::bfloat16_t, DF> db;
  return hn::PromoteTo(d, hn::LoadU(db, p));  // a shift: exact on every target
}

HWY_INLINE float ScalarF(const float* p) { return *p; }
HWY_INLINE float ScalarF(const hwy::float16_t* p) { return f16_to_f32(*reinterpret_cast<const uint16_t*>(p)); }
HWY_INLINE float ScalarF(const hwy::bfloat16_t* p) { return bf16_to_f32(*reinterpret_cast<const uint16_t*>(p)); }

// RNE rounding of each lane to `t`, bit-identical to round_to().
HWY_INLINE VF RoundAct(DF d, VF v, DType t) {
  if (t == DType::F32) return v;
  if (t == DType::F16) {
#if KVP_SCALAR_F16
    HWY_ALIGN float tmp[kMaxLanes];
    hn::Store(v, d, tmp);
    for (size_t i = 0; i < hn::Lanes(d); ++i) tmp[i] = round_to(DType::F16, tmp[i]);
    return hn::Load(d, tmp);
#else
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(d, hn::DemoteTo(dh, v));  // vcvtps2ph rounds to nearest even
#endif
  }
  // bf16: Highway's DemoteTo truncates, so round the fp32 bit pattern by hand.
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const auto bits = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  const auto rounded = hn::And(hn::Add(hn::Add(bits, hn::Set(du, 0x7fffu)), lsb), hn::Set(du, 0xffff0000u));
  const auto quiet = hn::And(hn::Or(bits, hn::Set(du, 0x00400000u)), hn::Set(du, 0xffff0000u));
  const auto abs = hn::BitCast(di, hn::And(bits, hn::Set(du, 0x7fffffffu)));
  const auto is_nan = hn::RebindMask(du, hn::Gt(abs, hn::Set(di, 0x7f800000)));
  return hn::BitCast(d, hn::IfThenElse(is_nan, quiet, rounded));
}

// n cache elements from `offset` on (a KV head's rows are contiguous) to fp32: exact widening of
// fp32/fp16/bf16, or the KV type's decoder.
template <typename KT>
HWY_INLINE void WidenSpan(const KT* src, size_t n, float* dst) {
  const DF d;
  const size_t L = hn::Lanes(d);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(LoadF(d, src + i), d, dst + i);
  for (; i < n; ++i) dst[i] = ScalarF(src + i);
}

HWY_INLINE void WidenKv(const void* src, const KvType& kv, size_t offset, size_t n, float* dst) {
  if (!kv.is_dtype()) return decode_kv_span(kv, src, offset, n, dst);
  switch (kv.dtype()) {
    case DType::F32: return WidenSpan(static_cast<const float*>(src) + offset, n, dst);
    case DType::F16: return WidenSpan(static_cast<const hwy::float16_t*>(src) + offset, n, dst);
    case DType::BF16: return WidenSpan(static_cast<const hwy::bfloat16_t*>(src) + offset, n, dst);
  }
}

// One attention tile's P.V into the running output (online softmax): acc = acc * scale, then per
// element d one chain acc[d] = fma(p[j], v[j, d], acc[d]) over the tile's keys j in order. Registers
// only group elements (four output vectors at a time keep four chains in flight), so every element
// sees the same operations whatever the vector width. `fma` is the policy's fused multiply-add.
template <class Fma>
HWY_INLINE void ScaleAccumulatePV(float* acc, const float* p, const float* v, size_t n, size_t hd, float scale,
                                  Fma fma) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const VF vscale = hn::Set(d, scale);
  size_t dv = 0;
  for (; dv + 4 * L <= hd; dv += 4 * L) {
    VF a0 = hn::Mul(hn::LoadU(d, acc + dv), vscale);
    VF a1 = hn::Mul(hn::LoadU(d, acc + dv + L), vscale);
    VF a2 = hn::Mul(hn::LoadU(d, acc + dv + 2 * L), vscale);
    VF a3 = hn::Mul(hn::LoadU(d, acc + dv + 3 * L), vscale);
    for (size_t j = 0; j < n; ++j) {
      const VF pj = hn::Set(d, p[j]);
      const float* vr = v + j * hd + dv;
      a0 = fma(pj, hn::LoadU(d, vr), a0);
      a1 = fma(pj, hn::LoadU(d, vr + L), a1);
      a2 = fma(pj, hn::LoadU(d, vr + 2 * L), a2);
      a3 = fma(pj, hn::LoadU(d, vr + 3 * L), a3);
    }
    hn::StoreU(a0, d, acc + dv);
    hn::StoreU(a1, d, acc + dv + L);
    hn::StoreU(a2, d, acc + dv + 2 * L);
    hn::StoreU(a3, d, acc + dv + 3 * L);
  }
  for (; dv + L <= hd; dv += L) {
    VF av = hn::Mul(hn::LoadU(d, acc + dv), vscale);
    for (size_t j = 0; j < n; ++j) av = fma(hn::Set(d, p[j]), hn::LoadU(d, v + j * hd + dv), av);
    hn::StoreU(av, d, acc + dv);
  }
  for (; dv < hd; ++dv) {
    float av = acc[dv] * scale;
    for (size_t j = 0; j < n; ++j) av = std::fma(p[j], v[j * hd + dv], av);
    acc[dv] = av;
  }
}

// The vector part of a row's sum of squares, shared by standard and invariant (which differ only in
// how they finish it: their horizontal sums and scalar tails): four chains of x*x over whole groups
// of four vectors, one more chain over single vectors, then (a0 + a1) + (a2 + a3). *end is the first
// element the vectors left out.
HWY_INLINE VF SquaresByLane(const float* x, size_t dim, size_t* end) {
  const DF d;
  const size_t L = hn::Lanes(d);
  VF a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  size_t i = 0;
  for (; i + 4 * L <= dim; i += 4 * L) {
    const VF x0 = hn::LoadU(d, x + i), x1 = hn::LoadU(d, x + i + L);
    const VF x2 = hn::LoadU(d, x + i + 2 * L), x3 = hn::LoadU(d, x + i + 3 * L);
    a0 = hn::MulAdd(x0, x0, a0);
    a1 = hn::MulAdd(x1, x1, a1);
    a2 = hn::MulAdd(x2, x2, a2);
    a3 = hn::MulAdd(x3, x3, a3);
  }
  for (; i + L <= dim; i += L) {
    const VF v = hn::LoadU(d, x + i);
    a0 = hn::MulAdd(v, v, a0);
  }
  *end = i;
  return hn::Add(hn::Add(a0, a1), hn::Add(a2, a3));
}

// RMSNorm of one row from its sum of squares `ss`: HF Llama's two roundings to act (x * inv, then
// w * that) or, with fp32_gain, Gemma-2's one ((x * inv) * g, the gain already 1 + weight in fp32).
// Element-wise, so the lane width does not change the bits.
HWY_INLINE void NormRowFromSquares(const float* x, size_t dim, const float* w, bool fp32_gain, float ss, float eps,
                                   DType act, float* y) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const float inv = 1.0f / std::sqrt(ss / float(dim) + eps);
  const VF vinv = hn::Set(d, inv);
  size_t k = 0;
  if (fp32_gain) {
    for (; k + L <= dim; k += L)
      hn::StoreU(RoundAct(d, hn::Mul(hn::Mul(hn::LoadU(d, x + k), vinv), hn::LoadU(d, w + k)), act), d, y + k);
    for (; k < dim; ++k) y[k] = round_to(act, (x[k] * inv) * w[k]);
    return;
  }
  for (; k + L <= dim; k += L) {
    const VF n = RoundAct(d, hn::Mul(hn::LoadU(d, x + k), vinv), act);
    hn::StoreU(RoundAct(d, hn::Mul(hn::LoadU(d, w + k), n), act), d, y + k);
  }
  for (; k < dim; ++k) y[k] = round_to(act, w[k] * round_to(act, x[k] * inv));
}

}  // namespace HWY_NAMESPACE
}  // namespace kvp::simd_common
HWY_AFTER_NAMESPACE();

#endif  // KVP_KERNELS_SIMD_COMMON_INL_H_
