// Vectorised block dequantisation, every format through quant_blocks-inl.h's decoders. Each lane
// computes the scalar decoder's value the same way (integer code -> exact float conversion ->
// exact product with the scale -> one rounding when an offset is added or subtracted), so the
// values are bitwise core/quant.h's (tests/test_quant.cpp checks).
// Compiled once per SIMD target like the other kernel files.
#include <cstring>

#include "core/dtype.h"
#include "core/kv_type.h"
#include "core/quant.h"
#include "kernels/dequant_rows.h"
#include "kernels/unroll.h"

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
using simd_common::HWY_NAMESPACE::kMaxQuantLanes;
using simd_common::HWY_NAMESPACE::WithQuantFormat;

constexpr size_t kPrefetchBytes = 1024;

// One row is a single sequential stream interleaved with compute: without prefetching ahead
// the loads wait on DRAM latency instead of streaming (measured 6 GB/s of 26 on 2 cores). The
// format is a template argument so that its decoder inlines into the loop: a call per 32-weight
// block cost about as much as the decoding.
template <class Fmt>
void Blocks(const uint8_t* b, size_t n_blocks, float* out) {
  const DF df;
  const size_t L = hn::Lanes(df);
  // Every cache line ahead is asked for once: a K-quant block spans 2-4 lines.
  const uint8_t* next = b + kPrefetchBytes;
  for (size_t i = 0; i < n_blocks; ++i, out += Fmt::kElems) {
    const uint8_t* blk = b + i * Fmt::kBytes;
    for (const uint8_t* end = blk + Fmt::kBytes + kPrefetchBytes; next < end; next += 64) __builtin_prefetch(next);
    typename Fmt::State st;
    Fmt::Prepare(blk, st);
    KVP_UNROLL(32)
    for (size_t j = 0; j < Fmt::kElems; j += L) hn::StoreU(Fmt::Load(blk, st, j), df, out + j);
  }
}

void DequantizeBlocks(QuantType q, const void* blocks, size_t n_blocks, float* out) {
  const auto* b = static_cast<const uint8_t*>(blocks);
  if (hn::Lanes(DF()) > kMaxQuantLanes || !WithQuantFormat(q, [&]<class Fmt>() { Blocks<Fmt>(b, n_blocks, out); }))
    dequantize_blocks(q, blocks, n_blocks, out);
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
