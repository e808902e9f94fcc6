// Every GGUF block format decoded in SIMD registers, one struct per format, shared by the block
// dequantiser (dequant_simd.cpp) and the decode GEMV that multiplies the weights where they are
// decoded (quant_gemv_simd.cpp). Decoded values are core/quant.cpp's, bit for bit: each lane does
// the scalar decoder's operations in its order, and every product there is exact in fp32 (an
// 11-bit fp16 scale times codes and sub-scales of at most 13 bits; MXFP4's power of two times a
// level), so a multiply-add in one fused instruction (MulAdd/MulSub below; the build does not
// contract) rounds once, where the scalar decoder's add or subtract does.
// Highway -inl.h convention: included once per target after hwy/highway.h.
#if defined(KVP_KERNELS_QUANT_BLOCKS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVP_KERNELS_QUANT_BLOCKS_INL_H_
#undef KVP_KERNELS_QUANT_BLOCKS_INL_H_
#else
#define KVP_KERNELS_QUANT_BLOCKS_INL_H_
#endif

#include <bit>
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

// A block's codes are assembled in byte lanes (L bytes, a quarter of a vector's width, so the bit
// fiddling is cheap) and widened to int32 once.
using QVB = hn::Vec<QDU8>;
HWY_INLINE QVB LoadB(const uint8_t* p) { return hn::LoadU(QDU8(), p); }
HWY_INLINE hn::Vec<QDI> Widen(QVB v) { return hn::PromoteTo(QDI(), v); }
// Bytes holding a signed code (wrapped by an unsigned subtract) widened with their sign.
HWY_INLINE hn::Vec<QDI> WidenSigned(QVB v) { return hn::PromoteTo(QDI(), hn::BitCast(QDI8(), v)); }
HWY_INLINE QVB LowNibbles(QVB v) { return hn::And(v, hn::Set(QDU8(), 0x0F)); }
// The field at bit k of each byte (mask: its width), as the byte's value. x86 has no byte shifts:
// a 16-bit one moves the next byte's low k bits in at the top, where the mask drops them (every
// field here has mask < 1 << (8 - k)).
HWY_INLINE QVB BitsAt(QVB v, int k, uint8_t mask) {
#if HWY_TARGET == HWY_SCALAR
  return hn::And(hn::ShiftRightSame(v, k), hn::Set(QDU8(), mask));
#else
  const hn::Repartition<uint16_t, QDU8> d16;
  return hn::And(hn::BitCast(QDU8(), hn::ShiftRightSame(hn::BitCast(d16, v), k)), hn::Set(QDU8(), mask));
#endif
}
// A field below 1 << (8 - kBits) moved up kBits within its byte: as a 16-bit shift nothing
// crosses into the next byte, so no mask is needed.
template <int kBits>
HWY_INLINE QVB FieldUp(QVB v) {
#if HWY_TARGET == HWY_SCALAR
  return hn::ShiftLeft<kBits>(v);
#else
  const hn::Repartition<uint16_t, QDU8> d16;
  return hn::BitCast(QDU8(), hn::ShiftLeft<kBits>(hn::BitCast(d16, v)));
#endif
}

// IQ4_NL / IQ4_XS / MXFP4: the levels (core/quant.h's kIq4nlLevels or kMxfp4Levels, `table`) of
// weights [l, l + L) of a 32-weight group whose 16 code bytes start at qs (weight l < 16: low
// nibble of qs[l], else high nibble of qs[l - 16]), as int32 lanes. L divides 16, so the lanes never
// straddle the halves. A byte shuffle looks the 16 levels up; the one-lane scalar target reads the
// table.
HWY_INLINE hn::Vec<QDI> Levels16(const int8_t* table, const uint8_t* qs, size_t l) {
#if HWY_TARGET == HWY_SCALAR
  const uint8_t c = l < 16 ? (qs[l] & 0x0F) : (qs[l - 16] >> 4);
  return hn::Set(QDI(), table[c]);
#else
  const QDU8 du8;
  const auto bytes = hn::LoadU(du8, qs + l % 16);
  const auto codes = l < 16 ? hn::And(bytes, hn::Set(du8, 0x0F)) : hn::ShiftRight<4>(bytes);
  const hn::Full128<int8_t> dt;
  const auto levels = hn::TableLookupBytes(hn::LoadU(dt, table), codes);
  return hn::PromoteTo(QDI(), hn::BitCast(QDI8(), levels));
#endif
}
HWY_INLINE hn::Vec<QDI> Iq4Levels(const uint8_t* qs, size_t l) { return Levels16(kIq4nlLevels, qs, l); }

HWY_INLINE uint32_t U32At(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
HWY_INLINE uint64_t U64At(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
// Block fields are unpacked several bytes at a time in integer words (byte k of a word is the
// block's byte k: little-endian only).
static_assert(std::endian::native == std::endian::little, "the block layouts are little-endian");
constexpr uint64_t kLowNibbles = 0x0F0F0F0F0F0F0F0Full;

// A block's 16 sub-block codes, one per byte (code i in byte i % 8 of word i / 8), as one 16-byte
// vector built from the two words in registers (a vector load of bytes just stored one word at a
// time would wait for the stores to drain).
#if HWY_TARGET == HWY_SCALAR
struct Codes16 {
  uint64_t w[2];
};
HWY_INLINE Codes16 CodesFromWords(uint64_t lo8, uint64_t hi8) { return {{lo8, hi8}}; }
#else
using Codes16 = hn::Vec<hn::Full128<uint8_t>>;
HWY_INLINE Codes16 CodesFromWords(uint64_t lo8, uint64_t hi8) {
  const hn::Full128<uint64_t> d64;
  return hn::BitCast(hn::Full128<uint8_t>(), hn::InterleaveLower(d64, hn::Set(d64, lo8), hn::Set(d64, hi8)));
}
#endif

// out[i] = (i < 8 ? lo : hi) * float(code i) for the 16 codes (kSigned: read as int8; then minus
// `offset`): the scalar decoders' one rounded multiply, lane by lane. Converted one at a time, a
// block's scales cost about as much as its weights.
template <bool kSigned>
HWY_INLINE void ScaleCodes(Codes16 codes, int offset, float lo, float hi, float* out) {
  const QDF df;
  const QDI di;
  const size_t L = hn::Lanes(df);
  const auto scaled = [&](QVB c, size_t i) {
    const auto q = hn::Sub(kSigned ? WidenSigned(c) : Widen(c), hn::Set(di, offset));
    const auto scale =
        L >= 16 ? hn::IfThenElse(hn::FirstN(df, 8), hn::Set(df, lo), hn::Set(df, hi)) : hn::Set(df, i < 8 ? lo : hi);
    hn::StoreU(hn::Mul(scale, hn::ConvertTo(df, q)), df, out + i);
  };
#if HWY_TARGET != HWY_SCALAR
  if constexpr (hn::MaxLanes(QDU8()) == 16) {
    return scaled(codes, 0);
  } else if constexpr (hn::MaxLanes(QDU8()) == 8) {
    scaled(hn::LowerHalf(codes), 0);
    return scaled(hn::UpperHalf(hn::Half<hn::Full128<uint8_t>>(), codes), 8);
  }
  alignas(16) uint8_t bytes[16];
  hn::Store(codes, hn::Full128<uint8_t>(), bytes);
#else
  uint8_t bytes[16];
  std::memcpy(bytes, codes.w, 16);
#endif
  for (size_t i = 0; i < 16; i += L) scaled(LoadB(bytes + i), i);
}

// A format: kBytes/kElems per block; Prepare(block, st) converts the block's scales once;
// Load(block, st, j) returns weights [j, j + L) of the block as fp32 lanes, j a multiple of L.
// L <= 16 (kMaxQuantLanes) keeps a vector inside one 16-weight sub-block of Q2_K, Q3_K and Q6_K.
constexpr size_t kMaxQuantLanes = 16;

struct Q8_0Fmt {
  static constexpr size_t kBytes = 34, kElems = 32;
  struct State {
    float d;
  };
  static HWY_INLINE void Prepare(const uint8_t* b, State& st) { st.d = Half(b); }
  static HWY_INLINE hn::Vec<QDF> Load(const uint8_t* b, const State& st, size_t j) {
    return hn::Mul(hn::ConvertTo(QDF(), SignedBytes(b + 2 + j)), hn::Set(QDF(), st.d));
  }
};

// The 32-weight legacy formats: weight j < 16 is the low nibble of qs[j], weight j >= 16 the high
// nibble of qs[j - 16]; Q5_0/Q5_1 add bit j of the 32-bit qh as the code's fifth bit.
HWY_INLINE QVB Nibbles(const uint8_t* qs, size_t j) {
  const QVB q = LoadB(qs + j % 16);
  return j < 16 ? LowNibbles(q) : hn::ShiftRight<4>(q);
}
// Bit j + l of qh as 16 or 0, lane l: a byte shuffle copies qh's byte (j + l) / 8 to lane l and a
// compare with 1 << (j + l) % 8 picks the bit.
HWY_INLINE QVB FifthBits(const uint8_t* qh, size_t j) {
  const QDU8 du8;
#if HWY_TARGET == HWY_SCALAR
  return hn::Set(du8, uint8_t(((U32At(qh) >> j) & 1u) << 4));
#else
  alignas(16) static constexpr uint8_t kByteOf[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                      2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
  alignas(16) static constexpr uint8_t kBitOf[32] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128,
                                                     1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const hn::Full128<uint8_t> d16;
  const auto qh4 = hn::BitCast(d16, hn::Set(hn::Full128<uint32_t>(), U32At(qh)));
  const QVB bit = hn::LoadU(du8, kBitOf + j);
  const QVB picked = hn::And(hn::TableLookupBytes(qh4, hn::LoadU(du8, kByteOf + j)), bit);
  return hn::And(hn::VecFromMask(du8, hn::Eq(picked, bit)), hn::Set(du8, 16));
#endif
}

struct Q4_0Fmt {
  static constexpr size_t kBytes = 18, kElems = 32;
  struct State {
    float d;
  };
  static HWY_INLINE void Prepare(const uint8_t* b, State& st) { st.d = Half(b); }
  static HWY_INLINE hn::Vec<QDF> Load(const uint8_t* b, const State& st, size_t j) {
    const auto q = WidenSigned(hn::Sub(Nibbles(b + 2, j), hn::Set(QDU8(), 8)));
    return hn::Mul(hn::ConvertTo(QDF(), q), hn::Set(QDF(), st.d));
  }
};

struct Q4_1Fmt {
  static constexpr size_t kBytes = 20, kElems = 32;
  struct State {
    float d, m;
  };
  static HWY_INLINE void Prepare(const uint8_t* b, State& st) { st.d = Half(b), st.m = Half(b + 2); }
  static HWY_INLINE hn::Vec<QDF> Load(const uint8_t* b, const State& st, size_t j) {
    const QDF df;
    return hn::MulAdd(hn::ConvertTo(df, Widen(Nibbles(b + 4, j))), hn::Set(df, st.d), hn::Set(df, st.m));
  }
};

struct Q5_0Fmt {
  static constexpr size_t kBytes = 22, kElems = 32;
  struct State {
    float d;
  };
  static HWY_INLINE void Prepare(const uint8_t* b, State& st) { st.d = Half(b); }
  static HWY_INLINE hn::Vec<QDF> Load(const uint8_t* b, const State& st, size_t j) {
    const auto q = WidenSigned(hn::Sub(hn::Or(Nibbles(b + 6, j), FifthBits(b + 2, j)), hn::Set(QDU8(), 16)));
    return hn::Mul(hn::ConvertTo(QDF(), q), hn::Set(QDF(), st.d));
  }
};

struct Q5_1Fmt {
  static constexpr size_t kBytes = 24, kElems = 32;
  struct State {
    float d, m;
  };
  static HWY_INLINE void Prepare(const uint8_t* b, State& st) { st.d = Half(b), st.m = Half(b + 2); }
  static HWY_INLINE hn::Vec<QDF> Load(const uint8_t* b, const State& st, size_t j) {
    const QDF df;
    const auto q = Widen(hn::Or(Nibbles(b + 8, j), FifthBits(b + 4, j)));
    return hn::MulAdd(hn::ConvertTo(df, q), hn::Set(df, st.d), hn::Set(df, st.m));
  }
};

// Q2_K / Q3_K: weight j = 128h + 32s + 16t + l takes bits 2s, 2s+1 of qs[32h + 16t + l] (Q3_K:
// qs at byte 32, and a third bit, bit 4h + s of hmask[16t + l]: set +0, clear -4); sub-block j/16
// has scale d * sc (Q2_K: minus dmin * mn).
HWY_INLINE QVB TwoBits(const uint8_t* qs, size_t j) {
  const size_t h = j / 128, s = j % 128 / 32, t = j % 32 / 16, l = j % 16;
  return BitsAt(LoadB(qs + 32 * h + 16 * t + l), int(2 * s), 3);
}

struct Q2_KFmt {
  static constexpr size_t kBytes = 84, kElems = 256;
  struct State {
    float d[16], m[16];
  };
  static HWY_INLINE void Prepare(const uint8_t* b, State& st) {
    const uint64_t w0 = U64At(b), w1 = U64At(b + 8);
    ScaleCodes<false>(CodesFromWords(w0 & kLowNibbles, w1 & kLowNibbles), 0, Half(b + 80), Half(b + 80), st.d);
    ScaleCodes<false>(CodesFromWords((w0 >> 4) & kLowNibbles, (w1 >> 4) & kLowNibbles), 0, Half(b + 82), Half(b + 82),
                      st.m);
  }
  static HWY_INLINE hn::Vec<QDF> Load(const uint8_t* b, const State& st, size_t j) {
    const QDF df;
    const auto q = Widen(TwoBits(b + 16, j));
    return hn::MulSub(hn::Set(df, st.d[j / 16]), hn::ConvertTo(df, q), hn::Set(df, st.m[j / 16]));
  }
};

struct Q3_KFmt {
  static constexpr size_t kBytes = 110, kElems = 256;
  struct State {
    float d[16];
  };
  // core/quant.cpp's q3_k_scale for all 16 at once: scales 4k..4k+3 take their low nibbles from bytes 0-3 (k even)
  // or 4-7 (k odd), low (k < 2) or high, and their top two bits from bits 2k, 2k+1 of bytes 8-11.
  static HWY_INLINE void Prepare(const uint8_t* b, State& st) {
    const float d = Half(b + 108);
    const uint64_t a0 = U32At(b + 96), a1 = U32At(b + 100), a2 = U32At(b + 104);
    const uint64_t lo = a0 | a1 << 32;
    // Bits 2k, 2k+1 of byte 8 + i % 4 for scales 4k..4k+3: k = 0, 1 in the first word, 2, 3 in the second.
    const uint64_t t0 = (a2 & 0x03030303u) | ((a2 >> 2) & 0x03030303u) << 32;
    const uint64_t t1 = ((a2 >> 4) & 0x03030303u) | ((a2 >> 6) & 0x03030303u) << 32;
    ScaleCodes<false>(CodesFromWords((lo & kLowNibbles) | t0 << 4, ((lo >> 4) & kLowNibbles) | t1 << 4), 32, d, d,
                      st.d);
  }
  static HWY_INLINE hn::Vec<QDF> Load(const uint8_t* b, const State& st, size_t j) {
    const QDF df;
    const size_t h = j / 128, s = j % 128 / 32, t = j % 32 / 16, l = j % 16;
    const QVB third = BitsAt(LoadB(b + 16 * t + l), int(4 * h + s), 1);
    const QVB q = hn::Sub(hn::Or(TwoBits(b + 32, j), FieldUp<2>(third)), hn::Set(QDU8(), 4));
    return hn::Mul(hn::Set(df, st.d[j / 16]), hn::ConvertTo(df, WidenSigned(q)));
  }
};

// Q4_K / Q5_K: sub-block t (32 weights) of a 256-weight block is weight = (d*sc_t) * q - (dmin*mn_t),
// q the low (t even) or high (t odd) nibbles of bytes [32*(t/2), +32) of qs (Q4_K: byte 16, Q5_K:
// byte 48); Q5_K adds bit t of qh[j % 32] (qh at byte 16) as the code's fifth bit.
template <bool kFifthBit>
struct Q45_KFmt {
  static constexpr size_t kBytes = kFifthBit ? 176 : 144, kElems = 256;
  struct State {
    float dm[16];  // d * sc_t at t, dmin * mn_t at 8 + t
  };
  // core/quant.cpp's k4_scale_min for all 8 pairs at once, four bytes at a time.
  static HWY_INLINE void Prepare(const uint8_t* b, State& st) {
    const uint64_t u0 = U32At(b + 4), u1 = U32At(b + 8), u2 = U32At(b + 12);
    const uint64_t sc = (u0 & 0x3F3F3F3Fu) | ((u2 & 0x0F0F0F0Fu) | ((u0 >> 6) & 0x03030303u) << 4) << 32;
    const uint64_t mn = (u1 & 0x3F3F3F3Fu) | (((u2 >> 4) & 0x0F0F0F0Fu) | ((u1 >> 6) & 0x03030303u) << 4) << 32;
    ScaleCodes<false>(CodesFromWords(sc, mn), 0, Half(b), Half(b + 2), st.dm);
  }
  static HWY_INLINE hn::Vec<QDF> Load(const uint8_t* b, const State& st, size_t j) {
    const QDF df;
    const size_t t = j / 32;
    const QVB q = LoadB(b + (kFifthBit ? 48 : 16) + 32 * (t / 2) + j % 32);
    QVB c = (t & 1) ? hn::ShiftRight<4>(q) : LowNibbles(q);
    if constexpr (kFifthBit) c = hn::Or(c, FieldUp<4>(BitsAt(LoadB(b + 16 + j % 32), int(t), 1)));
    return hn::MulSub(hn::Set(df, st.dm[t]), hn::ConvertTo(df, Widen(c)), hn::Set(df, st.dm[8 + t]));
  }
};
using Q4_KFmt = Q45_KFmt<false>;
using Q5_KFmt = Q45_KFmt<true>;

// Q6_K: weight 128*h + 32*u + l (u < 4, l < 32) is d*sc[8h + l/16 + 2u] * (q - 32), q's low four
// bits from ql[64h + 32*(u&1) + l] (low nibble for u < 2, high for u >= 2) and its top two from
// bits 2u, 2u+1 of qh[32h + l].
struct Q6_KFmt {
  static constexpr size_t kBytes = 210, kElems = 256;
  struct State {
    float s[16];
  };
  static HWY_INLINE void Prepare(const uint8_t* b, State& st) {
    const float d = Half(b + 208);
    ScaleCodes<true>(CodesFromWords(U64At(b + 192), U64At(b + 200)), 0, d, d, st.s);
  }
  static HWY_INLINE hn::Vec<QDF> Load(const uint8_t* b, const State& st, size_t j) {
    const QDF d;
    const size_t h = j / 128, u = j % 128 / 32, l = j % 32;
    const QVB a = LoadB(b + 64 * h + 32 * (u & 1) + l);
    const QVB lo = u < 2 ? LowNibbles(a) : hn::ShiftRight<4>(a);
    const QVB top = BitsAt(LoadB(b + 128 + 32 * h + l), int(2 * u), 3);
    const QVB q = hn::Sub(hn::Or(lo, FieldUp<4>(top)), hn::Set(QDU8(), 32));
    return hn::Mul(hn::Set(d, st.s[8 * h + l / 16 + 2 * u]), hn::ConvertTo(d, WidenSigned(q)));
  }
};

// IQ4_NL: one 32-weight group with scale d; IQ4_XS: 8 groups, group t with scale d * (s_t - 32)
// (core/quant.cpp), its codes at bytes [8 + 16t, +16). The level comes from Iq4Levels.
struct IQ4_NLFmt {
  static constexpr size_t kBytes = 18, kElems = 32;
  struct State {
    float d;
  };
  static HWY_INLINE void Prepare(const uint8_t* b, State& st) { st.d = Half(b); }
  static HWY_INLINE hn::Vec<QDF> Load(const uint8_t* b, const State& st, size_t j) {
    const QDF d;
    return hn::Mul(hn::Set(d, st.d), hn::ConvertTo(d, Iq4Levels(b + 2, j)));
  }
};

struct IQ4_XSFmt {
  static constexpr size_t kBytes = 136, kElems = 256;
  struct State {
    float d[16];  // the first 8
  };
  // core/quant.cpp's iq4_xs_scale for all 8 at once: the 4-bit halves of scales_l and the 2-bit fields of scales_h
  // spread to one per byte.
  static HWY_INLINE void Prepare(const uint8_t* b, State& st) {
    uint64_t lo = U32At(b + 4), hi = uint64_t(b[2]) | uint64_t(b[3]) << 8;
    lo = (lo | lo << 16) & 0x0000FFFF0000FFFFull;
    lo = (lo | lo << 8) & 0x00FF00FF00FF00FFull;
    lo = (lo | lo << 4) & 0x0F0F0F0F0F0F0F0Full;
    hi = (hi | hi << 24) & 0x000000FF000000FFull;
    hi = (hi | hi << 12) & 0x000F000F000F000Full;
    hi = (hi | hi << 6) & 0x0303030303030303ull;
    ScaleCodes<false>(CodesFromWords(lo | hi << 4, 0), 32, Half(b), Half(b), st.d);
  }
  static HWY_INLINE hn::Vec<QDF> Load(const uint8_t* b, const State& st, size_t j) {
    const QDF d;
    const size_t t = j / 32;
    return hn::Mul(hn::Set(d, st.d[t]), hn::ConvertTo(d, Iq4Levels(b + 8 + 16 * t, j % 32)));
  }
};

// MXFP4: one 32-weight group, its exponent byte first, then IQ4_NL's code order; the scale is a
// power of two (core/quant.h's mxfp4_scale), so the one multiply is exact as in the scalar decoder.
struct MXFP4Fmt {
  static constexpr size_t kBytes = 17, kElems = 32;
  struct State {
    float d;
  };
  static HWY_INLINE void Prepare(const uint8_t* b, State& st) { st.d = mxfp4_scale(b[0]); }
  static HWY_INLINE hn::Vec<QDF> Load(const uint8_t* b, const State& st, size_t j) {
    const QDF d;
    return hn::Mul(hn::Set(d, st.d), hn::ConvertTo(d, Levels16(kMxfp4Levels, b + 1, j)));
  }
};

// Calls f.template operator()<Fmt>() with the format struct of q; false for a type without one.
template <class F>
HWY_INLINE bool WithQuantFormat(QuantType q, F&& f) {
  switch (q) {
    case QuantType::Q8_0:
      f.template operator()<Q8_0Fmt>();
      return true;
    case QuantType::Q4_0:
      f.template operator()<Q4_0Fmt>();
      return true;
    case QuantType::Q4_1:
      f.template operator()<Q4_1Fmt>();
      return true;
    case QuantType::Q5_0:
      f.template operator()<Q5_0Fmt>();
      return true;
    case QuantType::Q5_1:
      f.template operator()<Q5_1Fmt>();
      return true;
    case QuantType::Q2_K:
      f.template operator()<Q2_KFmt>();
      return true;
    case QuantType::Q3_K:
      f.template operator()<Q3_KFmt>();
      return true;
    case QuantType::Q4_K:
      f.template operator()<Q4_KFmt>();
      return true;
    case QuantType::Q5_K:
      f.template operator()<Q5_KFmt>();
      return true;
    case QuantType::Q6_K:
      f.template operator()<Q6_KFmt>();
      return true;
    case QuantType::IQ4_NL:
      f.template operator()<IQ4_NLFmt>();
      return true;
    case QuantType::IQ4_XS:
      f.template operator()<IQ4_XSFmt>();
      return true;
    case QuantType::MXFP4:
      f.template operator()<MXFP4Fmt>();
      return true;
    default:
      return false;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kvp::simd_common
HWY_AFTER_NAMESPACE();

#endif  // KVP_KERNELS_QUANT_BLOCKS_INL_H_
