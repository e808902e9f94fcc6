// Per-target SIMD helpers shared by standard_simd.cpp and invariant_simd.cpp: exact widening
// loads of fp32/fp16/bf16 and the vector RNE rounding that matches round_to() bit for bit.
// Included once per Highway target (the toggle guard below is Highway's -inl.h convention), after
// hwy/highway.h, by files that go through foreach_target.h.
#if defined(KVP_KERNELS_SIMD_COMMON_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVP_KERNELS_SIMD_COMMON_INL_H_
#undef KVP_KERNELS_SIMD_COMMON_INL_H_
#else
#define KVP_KERNELS_SIMD_COMMON_INL_H_
#endif

#include "core/dtype.h"
#include "hwy/highway.h"

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

}  // namespace HWY_NAMESPACE
}  // namespace kvp::simd_common
HWY_AFTER_NAMESPACE();

#endif  // KVP_KERNELS_SIMD_COMMON_INL_H_
