// Per-target helpers for decoding quantised blocks in SIMD code (dequant_simd.cpp,
// quant_gemv_simd.cpp): the fp16 scale, byte widening and the IQ4 level lookup. Decoded values are core/quant.h's:
// every product there is exact in fp32 (an 11-bit fp16 scale times codes and sub-scales of at
// most 13 bits), so contraction into FMAs, which the compiler may apply, cannot change them.
// Highway -inl.h convention: included once per target after hwy/highway.h.
#if defined(KVP_KERNELS_QUANT_BLOCKS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVP_KERNELS_QUANT_BLOCKS_INL_H_
#undef KVP_KERNELS_QUANT_BLOCKS_INL_H_
#else
#define KVP_KERNELS_QUANT_BLOCKS_INL_H_
#endif

#include <cstring>

#include "core/dtype.h"
#include "core/quant.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace kvp::simd_common {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using QDF = hn::ScalableTag<float>;
using QDI = hn::RebindToSigned<QDF>;
using QDU8 = hn::Rebind<uint8_t, QDI>;
using QDI8 = hn::Rebind<int8_t, QDI>;

// fp16 scales through F16C where the target has it, else core's converter; the same value either way.
HWY_INLINE float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  return _cvtsh_ss(h);
#else
  return f16_to_f32(h);
#endif
}

// L bytes widened to int32 lanes.
HWY_INLINE hn::Vec<QDI> Bytes(const uint8_t* p) { return hn::PromoteTo(QDI(), hn::LoadU(QDU8(), p)); }
HWY_INLINE hn::Vec<QDI> SignedBytes(const uint8_t* p) {
  return hn::PromoteTo(QDI(), hn::LoadU(QDI8(), reinterpret_cast<const int8_t*>(p)));
}

// IQ4_NL / IQ4_XS: the levels (core/quant.h's kIq4nlLevels) of weights [l, l + L) of a 32-weight
// group whose 16 code bytes start at qs (weight l < 16: low nibble of qs[l], else high nibble of
// qs[l - 16]), as int32 lanes. L divides 16, so the lanes never straddle the halves. A byte shuffle
// looks the 16 levels up; the one-lane scalar target reads the table.
HWY_INLINE hn::Vec<QDI> Iq4Levels(const uint8_t* qs, size_t l) {
#if HWY_TARGET == HWY_SCALAR
  const uint8_t c = l < 16 ? (qs[l] & 0x0F) : (qs[l - 16] >> 4);
  return hn::Set(QDI(), kIq4nlLevels[c]);
#else
  const QDU8 du8;
  const auto bytes = hn::LoadU(du8, qs + l % 16);
  const auto codes = l < 16 ? hn::And(bytes, hn::Set(du8, 0x0F)) : hn::ShiftRight<4>(bytes);
  const hn::Full128<int8_t> dt;
  const auto levels = hn::TableLookupBytes(hn::LoadU(dt, kIq4nlLevels), codes);
  return hn::PromoteTo(QDI(), hn::BitCast(QDI8(), levels));
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace kvp::simd_common
HWY_AFTER_NAMESPACE();

#endif  // KVP_KERNELS_QUANT_BLOCKS_INL_H_
