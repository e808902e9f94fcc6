// Per-target helpers for decoding quantised blocks in SIMD code (dequant_simd.cpp,
// quant_gemv_simd.cpp): the fp16 scale and byte widening. Decoded values are core/quant.h's:
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

}  // namespace HWY_NAMESPACE
}  // namespace kvp::simd_common
HWY_AFTER_NAMESPACE();

#endif  // KVP_KERNELS_QUANT_BLOCKS_INL_H_
