// Vectorised block dequantisation for the formats decode time is spent on (Q8_0, Q4_0, Q4_K, Q5_K,
// Q6_K, IQ4_NL, IQ4_XS); the rest use core/quant.cpp's scalar decoders. Each lane performs the scalar decoder's
// operations in the same order (integer code -> exact float conversion -> one rounded multiply ->
// one rounded subtract), so the values are bitwise core/quant.h's (tests/test_quant.cpp checks).
// Compiled once per SIMD target like the other kernel files.
#include <cstring>

#include "core/dtype.h"
#include "core/kv_type.h"
#include "core/quant.h"
#include "kernels/dequant_rows.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/dequant_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "kernels/quant_blocks-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvp::dq {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using simd_common::HWY_NAMESPACE::Bytes;
using simd_common::HWY_NAMESPACE::Half;
using simd_common::HWY_NAMESPACE::Iq4Levels;
using simd_common::HWY_NAMESPACE::SignedBytes;

constexpr size_t kPrefetchBytes = 1024;

void Q8_0(const uint8_t* b, float* y) {
  const DF df;
  const size_t L = hn::Lanes(df);
  const auto d = hn::Set(df, Half(b));
  for (size_t j = 0; j < 32; j += L) hn::StoreU(hn::Mul(hn::ConvertTo(df, SignedBytes(b + 2 + j)), d), df, y + j);
}

void Q4_0(const uint8_t* b, float* y) {
  const DF df;
  const DI di;
  const size_t L = hn::Lanes(df);
  const auto d = hn::Set(df, Half(b));
  const auto eight = hn::Set(di, 8), lo = hn::Set(di, 0x0F);
  for (size_t j = 0; j < 16; j += L) {
    const auto q = Bytes(b + 2 + j);
    hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::Sub(hn::And(q, lo), eight)), d), df, y + j);
    hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::Sub(hn::ShiftRight<4>(q), eight)), d), df, y + 16 + j);
  }
}

// Q4_K (qh == nullptr) and Q5_K.
HWY_INLINE void Q45K(const uint8_t* b, const uint8_t* qh, const uint8_t* qs, float* y) {
  const DF df;
  const DI di;
  const size_t L = hn::Lanes(df);
  const float d = Half(b), dmin = Half(b + 2);
  const uint8_t* sp = b + 4;
  const auto lo = hn::Set(di, 0x0F), one = hn::Set(di, 1);
  for (int h = 0; h < 4; ++h, qs += 32, y += 64) {
    int sc, mn;
    k4_scale_min(2 * h, sp, &sc, &mn);
    const auto d1 = hn::Set(df, d * float(sc)), m1 = hn::Set(df, dmin * float(mn));
    k4_scale_min(2 * h + 1, sp, &sc, &mn);
    const auto d2 = hn::Set(df, d * float(sc)), m2 = hn::Set(df, dmin * float(mn));
    for (size_t l = 0; l < 32; l += L) {
      const auto q = Bytes(qs + l);
      auto c1 = hn::And(q, lo), c2 = hn::ShiftRight<4>(q);
      if (qh != nullptr) {
        const auto hb = Bytes(qh + l);
        c1 = hn::Add(c1, hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(hb, 2 * h), one)));
        c2 = hn::Add(c2, hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(hb, 2 * h + 1), one)));
      }
      hn::StoreU(hn::Sub(hn::Mul(d1, hn::ConvertTo(df, c1)), m1), df, y + l);
      hn::StoreU(hn::Sub(hn::Mul(d2, hn::ConvertTo(df, c2)), m2), df, y + 32 + l);
    }
  }
}

void Q4K(const uint8_t* b, float* y) { Q45K(b, nullptr, b + 16, y); }
void Q5K(const uint8_t* b, float* y) { Q45K(b, b + 16, b + 48, y); }

void Q6K(const uint8_t* b, float* y) {
  const DF df;
  const DI di;
  const size_t L = hn::Lanes(df);
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = Half(b + 208);
  const auto lo = hn::Set(di, 0x0F), three = hn::Set(di, 3), off = hn::Set(di, 32);
  for (int h = 0; h < 2; ++h, ql += 64, qh += 32, sc += 8, y += 128) {
    // A vector of L <= 16 lanes starting at a multiple of L never straddles a 16-weight sub-block.
    for (size_t l = 0; l < 32; l += L) {
      const size_t is = l / 16;
      const auto a = Bytes(ql + l), c = Bytes(ql + 32 + l), hb = Bytes(qh + l);
      const auto q1 = hn::Sub(hn::Or(hn::And(a, lo), hn::ShiftLeft<4>(hn::And(hb, three))), off);
      const auto q2 = hn::Sub(hn::Or(hn::And(c, lo), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<2>(hb), three))), off);
      const auto q3 = hn::Sub(hn::Or(hn::ShiftRight<4>(a), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<4>(hb), three))), off);
      const auto q4 = hn::Sub(hn::Or(hn::ShiftRight<4>(c), hn::ShiftLeft<4>(hn::ShiftRight<6>(hb))), off);
      hn::StoreU(hn::Mul(hn::Set(df, d * float(sc[is])), hn::ConvertTo(df, q1)), df, y + l);
      hn::StoreU(hn::Mul(hn::Set(df, d * float(sc[is + 2])), hn::ConvertTo(df, q2)), df, y + 32 + l);
      hn::StoreU(hn::Mul(hn::Set(df, d * float(sc[is + 4])), hn::ConvertTo(df, q3)), df, y + 64 + l);
      hn::StoreU(hn::Mul(hn::Set(df, d * float(sc[is + 6])), hn::ConvertTo(df, q4)), df, y + 96 + l);
    }
  }
}

// IQ4_NL (one 32-weight group, scale d) and IQ4_XS (8 groups, scale d * (s - 32)): levels looked
// up in registers, times the group's scale, as core/quant.cpp's one multiply.
void IQ4_NL(const uint8_t* b, float* y) {
  const DF df;
  const size_t L = hn::Lanes(df);
  const auto d = hn::Set(df, Half(b));
  for (size_t l = 0; l < 32; l += L) hn::StoreU(hn::Mul(d, hn::ConvertTo(df, Iq4Levels(b + 2, l))), df, y + l);
}

void IQ4_XS(const uint8_t* b, float* y) {
  const DF df;
  const size_t L = hn::Lanes(df);
  const float d = Half(b);
  for (int i = 0; i < 8; ++i, y += 32) {
    const auto dl = hn::Set(df, d * float(iq4_xs_scale(b, i) - 32));
    for (size_t l = 0; l < 32; l += L)
      hn::StoreU(hn::Mul(dl, hn::ConvertTo(df, Iq4Levels(b + 8 + 16 * i, l))), df, y + l);
  }
}

// One row is a single sequential stream interleaved with compute: without prefetching ahead
// the loads wait on DRAM latency instead of streaming (measured 6 GB/s of 26 on 2 cores). The
// decoder is a template argument so that it inlines into the loop: a call per 32-weight block
// cost about as much as the decoding.
template <void (*F)(const uint8_t*, float*), size_t kBytes, size_t kElems>
void Blocks(const uint8_t* b, size_t n_blocks, float* out) {
  // Every cache line ahead is asked for once: a K-quant block spans 2-4 lines.
  const uint8_t* next = b + kPrefetchBytes;
  for (size_t i = 0; i < n_blocks; ++i) {
    for (const uint8_t* end = b + (i + 1) * kBytes + kPrefetchBytes; next < end; next += 64) __builtin_prefetch(next);
    F(b + i * kBytes, out + i * kElems);
  }
}

void DequantizeBlocks(QuantType q, const void* blocks, size_t n_blocks, float* out) {
  const auto* b = static_cast<const uint8_t*>(blocks);
  switch (q) {
    case QuantType::Q8_0: return Blocks<Q8_0, 34, 32>(b, n_blocks, out);
    case QuantType::Q4_0: return Blocks<Q4_0, 18, 32>(b, n_blocks, out);
    case QuantType::Q4_K: return Blocks<Q4K, 144, 256>(b, n_blocks, out);
    case QuantType::Q5_K: return Blocks<Q5K, 176, 256>(b, n_blocks, out);
    case QuantType::Q6_K: return Blocks<Q6K, 210, 256>(b, n_blocks, out);
    case QuantType::IQ4_NL:
      return Blocks<IQ4_NL, 18, 32>(b, n_blocks, out);
    case QuantType::IQ4_XS:
      return Blocks<IQ4_XS, 136, 256>(b, n_blocks, out);
    default: return dequantize_blocks(q, blocks, n_blocks, out);
  }
}

// OCP FP8 codes to fp32, the values of core/kv_type.cpp's table times the scale, bit for bit:
// a code is sign, exponent field e and mantissa m; its magnitude is the integer (m, with the
// implicit bit when e > 0) times 2^(max(e, 1) - bias - mantissa bits), both exact in fp32 and so
// is their product (no fp32 subnormals: the smallest code is 2^-9 or 2^-16). The specials (E4M3:
// S.1111.111 is NaN; E5M2: exponent all ones is inf or NaN) take the table's quiet NaN and inf.
// One rounded multiply by the scale follows, as in the table path.
template <int kMantBits, int kBias, bool kHasInf>
void Fp8(const uint8_t* src, size_t n, float scale, float* out) {
  const DF df;
  const DI di;
  const size_t L = hn::Lanes(df);
  constexpr int kExpMax = (1 << (7 - kMantBits)) - 1, kMantMax = (1 << kMantBits) - 1;
  const auto vscale = hn::Set(df, scale);
  const auto mant_mask = hn::Set(di, kMantMax), exp_mask = hn::Set(di, kExpMax), one = hn::Set(di, 1);
  const auto implicit = hn::Set(di, 1 << kMantBits), zero = hn::Zero(di);
  const auto exp_offset = hn::Set(di, 127 - kBias - kMantBits), sign_mask = hn::Set(di, 0x80);
  const auto qnan = hn::Set(di, 0x7FC00000), inf = hn::Set(di, 0x7F800000);
  size_t i = 0;
  for (; i + L <= n; i += L) {
    const auto x = Bytes(src + i);
    const auto e = hn::And(hn::ShiftRight<kMantBits>(x), exp_mask);
    const auto m = hn::And(x, mant_mask);
    const auto full = hn::IfThenElse(hn::Eq(e, zero), m, hn::Or(m, implicit));
    const auto pow2 = hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(hn::Max(e, one), exp_offset)));
    auto bits = hn::BitCast(di, hn::Mul(hn::ConvertTo(df, full), pow2));
    const auto special = kHasInf ? hn::Eq(e, exp_mask) : hn::And(hn::Eq(e, exp_mask), hn::Eq(m, mant_mask));
    bits = hn::IfThenElse(special, kHasInf ? hn::IfThenElse(hn::Eq(m, zero), inf, qnan) : qnan, bits);
    bits = hn::Or(bits, hn::ShiftLeft<24>(hn::And(x, sign_mask)));
    hn::StoreU(hn::Mul(hn::BitCast(df, bits), vscale), df, out + i);
  }
  for (; i < n; ++i) out[i] = fp8_to_f32(kHasInf ? KvFormat::FP8_E5M2 : KvFormat::FP8_E4M3, src[i]) * scale;
}

void DecodeFp8(KvFormat f, const uint8_t* src, size_t n, float scale, float* out) {
  if (f == KvFormat::FP8_E4M3) return Fp8<3, 7, false>(src, n, scale, out);
  return Fp8<2, 15, true>(src, n, scale, out);
}

}  // namespace HWY_NAMESPACE
}  // namespace kvp::dq
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvp {
namespace dq {
HWY_EXPORT(DequantizeBlocks);
HWY_EXPORT(DecodeFp8);
}  // namespace dq

void decode_fp8_fast(const KvType& t, const void* src, size_t n, float* out) {
  if (t.format != KvFormat::FP8_E4M3 && t.format != KvFormat::FP8_E5M2)
    return kv_decode(t, src, 0, n, out);
  HWY_DYNAMIC_DISPATCH(dq::DecodeFp8)(t.format, static_cast<const uint8_t*>(src), n, t.scale, out);
}

void dequantize_blocks_fast(QuantType q, const void* blocks, size_t n_blocks, float* out) {
  HWY_DYNAMIC_DISPATCH(dq::DequantizeBlocks)(q, blocks, n_blocks, out);
}
}  // namespace kvp
#endif
