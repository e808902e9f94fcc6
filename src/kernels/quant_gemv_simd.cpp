// Decode GEMV on Q8_0, Q4_K, Q6_K, IQ4_NL and IQ4_XS weights (what Q8_0, the Q4_K_M/Q5_K_M mixes
// and IQ4 files spend decode on) with each vector of weights decoded in registers and multiplied at once, in exactly
// dot_rows' per-output order (simd_ops.h): vector i of the k range goes to accumulator i % 2, the
// two are added lane-wise and tree-summed. A block is a whole number of vector pairs and the range
// starts on a block, so the block-at-a-time walk below feeds each accumulator the same products
// in the same order as dot_rows on the dequantised matrix: the results are bitwise equal
// (tests/test_quant.cpp). Compared with dequantising rows into scratch first, no weight is stored
// and reloaded, and a block's scales are converted once.
// Compiled once per SIMD target like the other kernel files.
#include <cstring>

#include "core/dtype.h"
#include "core/quant.h"
#include "kernels/simd_ops.h"
#include "kernels/unroll.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/quant_gemv_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "kernels/quant_blocks-inl.h"
#include "kernels/simd_common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvp::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
using simd_common::HWY_NAMESPACE::ForStreamRows;
using simd_common::HWY_NAMESPACE::Half;
using simd_common::HWY_NAMESPACE::Iq4Levels;
using simd_common::HWY_NAMESPACE::kStreams;
using simd_common::HWY_NAMESPACE::SignedBytes;

using DI = hn::RebindToSigned<DF>;
using simd_common::HWY_NAMESPACE::Bytes;

// A format: kBytes/kElems per block; Prepare(block, st) converts the block's scales once;
// Load(block, st, j) returns weights [j, j + L) of the block, j a multiple of L, the values of
// core/quant.h's decoder (the same operations as dequant_simd.cpp's, lane by lane).
struct Q8_0Fmt {
  static constexpr size_t kBytes = 34, kElems = 32;
  struct State { float d; };
  static HWY_INLINE void Prepare(const uint8_t* b, State& st) { st.d = Half(b); }
  static HWY_INLINE VF Load(const uint8_t* b, const State& st, size_t j) {
    const DF d;
    return hn::Mul(hn::ConvertTo(d, SignedBytes(b + 2 + j)), hn::Set(d, st.d));
  }
};

// Q4_K: sub-block t (32 weights) of a 256-weight block is weight = (d*sc_t) * q - (dmin*mn_t),
// q the low (t even) or high (t odd) nibbles of bytes [32*(t/2), +32) of qs.
struct Q4_KFmt {
  static constexpr size_t kBytes = 144, kElems = 256;
  struct State { float d[8], m[8]; };
  static HWY_INLINE void Prepare(const uint8_t* b, State& st) {
    const float d = Half(b), dmin = Half(b + 2);
    for (int t = 0; t < 8; ++t) {
      int sc, mn;
      k4_scale_min(t, b + 4, &sc, &mn);
      st.d[t] = d * float(sc);
      st.m[t] = dmin * float(mn);
    }
  }
  static HWY_INLINE VF Load(const uint8_t* b, const State& st, size_t j) {
    const DF d;
    const size_t t = j / 32;
    const auto q = Bytes(b + 16 + 32 * (t / 2) + j % 32);
    const auto c = (t & 1) ? hn::ShiftRight<4>(q) : hn::And(q, hn::Set(DI(), 0x0F));
    return hn::Sub(hn::Mul(hn::Set(d, st.d[t]), hn::ConvertTo(d, c)), hn::Set(d, st.m[t]));
  }
};

// Q6_K: weight 128*h + 32*u + l (u < 4, l < 32) is d*sc[8h + l/16 + 2u] * (q - 32), q's low four
// bits from ql[64h + 32*(u&1) + l] (low nibble for u < 2, high for u >= 2) and its top two from
// bits 2u, 2u+1 of qh[32h + l].
struct Q6_KFmt {
  static constexpr size_t kBytes = 210, kElems = 256;
  struct State { float s[16]; };
  static HWY_INLINE void Prepare(const uint8_t* b, State& st) {
    const float d = Half(b + 208);
    for (int i = 0; i < 16; ++i) st.s[i] = d * float(int8_t(b[192 + i]));
  }
  static HWY_INLINE VF Load(const uint8_t* b, const State& st, size_t j) {
    const DF d;
    const DI di;
    const size_t h = j / 128, u = j % 128 / 32, l = j % 32;
    const auto a = Bytes(b + 64 * h + 32 * (u & 1) + l), hb = Bytes(b + 128 + 32 * h + l);
    const auto lo = u < 2 ? hn::And(a, hn::Set(di, 0x0F)) : hn::ShiftRight<4>(a);
    const auto top = hn::And(hn::ShiftRightSame(hb, int(2 * u)), hn::Set(di, 3));
    const auto q = hn::Sub(hn::Or(lo, hn::ShiftLeft<4>(top)), hn::Set(di, 32));
    return hn::Mul(hn::Set(d, st.s[8 * h + l / 16 + 2 * u]), hn::ConvertTo(d, q));
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
  static HWY_INLINE VF Load(const uint8_t* b, const State& st, size_t j) {
    const DF d;
    return hn::Mul(hn::Set(d, st.d), hn::ConvertTo(d, Iq4Levels(b + 2, j)));
  }
};

struct IQ4_XSFmt {
  static constexpr size_t kBytes = 136, kElems = 256;
  struct State {
    float d[8];
  };
  static HWY_INLINE void Prepare(const uint8_t* b, State& st) {
    const float d = Half(b);
    for (int t = 0; t < 8; ++t) st.d[t] = d * float(iq4_xs_scale(b, t) - 32);
  }
  static HWY_INLINE VF Load(const uint8_t* b, const State& st, size_t j) {
    const DF d;
    const size_t t = j / 32;
    return hn::Mul(hn::Set(d, st.d[t]), hn::ConvertTo(d, Iq4Levels(b + 8 + 16 * t, j % 32)));
  }
};

// S rows (one per stream) over blocks [b0, b1): in each block, vector pair p of the k range
// feeds accumulators 0 and 1, as dot_rows does.
template <class Fmt, size_t S>
HWY_INLINE void Tile(const float* x, const uint8_t* const* rows, size_t b0, size_t b1, float* out) {
  const DF d;
  const size_t L = hn::Lanes(d);
  VF acc0[S], acc1[S];
  for (size_t s = 0; s < S; ++s) acc0[s] = acc1[s] = hn::Zero(d);
  typename Fmt::State st[S];
  for (size_t b = b0; b < b1; ++b) {
    const float* xb = x + b * Fmt::kElems;
    for (size_t s = 0; s < S; ++s) Fmt::Prepare(rows[s] + b * Fmt::kBytes, st[s]);
    KVP_UNROLL(32)
    for (size_t j = 0; j < Fmt::kElems; j += 2 * L) {
      const VF x0 = hn::LoadU(d, xb + j), x1 = hn::LoadU(d, xb + j + L);
      KVP_UNROLL(4)
      for (size_t s = 0; s < S; ++s) {
        const uint8_t* blk = rows[s] + b * Fmt::kBytes;
        acc0[s] = hn::MulAdd(x0, Fmt::Load(blk, st[s], j), acc0[s]);
        acc1[s] = hn::MulAdd(x1, Fmt::Load(blk, st[s], j + L), acc1[s]);
      }
    }
  }
  for (size_t s = 0; s < S; ++s) out[s] = hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0[s], acc1[s])));
}

template <class Fmt>
void Rows(const float* x, const uint8_t* base, size_t K, size_t n0, size_t n1, size_t k0, size_t k1, float* y) {
  const size_t row_bytes = K / Fmt::kElems * Fmt::kBytes, b0 = k0 / Fmt::kElems, b1 = k1 / Fmt::kElems;
  // Rows walked as kStreams sequential streams side by side, as dot_rows does (see DotRowsT).
  ForStreamRows(
      n0, n1,
      [&](const size_t* rows) {
        const uint8_t* rs[kStreams];
        for (size_t s = 0; s < kStreams; ++s) rs[s] = base + rows[s] * row_bytes;
        float out[kStreams];
        Tile<Fmt, kStreams>(x, rs, b0, b1, out);
        for (size_t s = 0; s < kStreams; ++s) y[rows[s]] = out[s];
      },
      [&](size_t n) {
        const uint8_t* r = base + n * row_bytes;
        Tile<Fmt, 1>(x, &r, b0, b1, y + n);
      });
}

bool DotRowsQuant(const float* x, const void* W, QuantType q, size_t K, size_t n0, size_t n1, size_t k0, size_t k1,
                  float* y) {
  const size_t L = hn::Lanes(DF());
  const size_t be = block_elems(q);
  // Blocks must be whole vector pairs, and the range whole blocks.
  if (be % (2 * L) != 0 || k0 % be != 0 || k1 % be != 0 || K % be != 0) return false;
  const auto* base = static_cast<const uint8_t*>(W);
  switch (q) {
    case QuantType::Q8_0: Rows<Q8_0Fmt>(x, base, K, n0, n1, k0, k1, y); return true;
    case QuantType::Q4_K: Rows<Q4_KFmt>(x, base, K, n0, n1, k0, k1, y); return true;
    case QuantType::Q6_K: Rows<Q6_KFmt>(x, base, K, n0, n1, k0, k1, y); return true;
    case QuantType::IQ4_NL:
      Rows<IQ4_NLFmt>(x, base, K, n0, n1, k0, k1, y);
      return true;
    case QuantType::IQ4_XS:
      Rows<IQ4_XSFmt>(x, base, K, n0, n1, k0, k1, y);
      return true;
    default: return false;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kvp::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvp::simd {
HWY_EXPORT(DotRowsQuant);

bool dot_rows_quant(const float* x, const void* W, QuantType q, size_t K, size_t n0, size_t n1, size_t k0,
                    size_t k1, float* y) {
  return HWY_DYNAMIC_DISPATCH(DotRowsQuant)(x, W, q, K, n0, n1, k0, k1, y);
}
}  // namespace kvp::simd
#endif
