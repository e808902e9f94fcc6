// Quantised weights (issue 16): block decoders against blocks built here from the ggml layout
// description, quantiser round trips, and whole models whose on-the-fly dequantisation must give
// the bits of the same model dequantised to F32 first, for every kernel policy and thread count.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <iostream>
#include <random>
#include <vector>

#include "checking_build.h"
#include "core/dtype.h"
#include "core/quant.h"
#include "core/quantize.h"
#include "io/checkpoint.h"
#include "io/gguf.h"
#include "kernels/dequant_rows.h"
#include "kernels/simd_ops.h"
#include "kernels/simd_target.h"
#include "model/checkpoint_export.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/generator.h"
#include "prefill_decode_logits.h"
#include "test_util.h"

namespace kvp {
namespace {

// The test's own encoder: per-weight codes and per-sub-block scales placed where the ggml block
// description says, so the decoder is checked against an independent reading of the layout.
struct Block {
  std::vector<uint8_t> b;
  explicit Block(size_t n) : b(n, 0) {}
  void half(size_t at, float v) {
    const uint16_t h = f32_to_f16(v);
    b[at] = uint8_t(h & 0xFF);
    b[at + 1] = uint8_t(h >> 8);
  }
  void bit(size_t byte, int bit, bool on) {
    if (on) b[byte] |= uint8_t(1u << bit);
  }
  void bits(size_t byte, int shift, int width, int v) { b[byte] |= uint8_t((v & ((1 << width) - 1)) << shift); }
};

float h(float v) { return f16_to_f32(f32_to_f16(v)); }

std::vector<float> decode(QuantType q, const Block& blk) {
  std::vector<float> out(block_elems(q));
  EXPECT_EQ(blk.b.size(), block_bytes(q));
  dequantize_blocks(q, blk.b.data(), 1, out.data());
  return out;
}

void expect_bits(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << what << " weight " << i << ": " << got[i] << " vs " << want[i];
}

TEST(QuantBlocks, Q8_0) {
  for (float d : {0.5f, -0.013f, 0.0f}) {
    Block blk(34);
    blk.half(0, d);
    std::vector<float> want(32);
    for (int j = 0; j < 32; ++j) {
      const int q = j == 0 ? -128 : j == 1 ? 127 : j - 16;
      blk.b[2 + j] = uint8_t(int8_t(q));
      want[j] = float(q) * h(d);
    }
    expect_bits(decode(QuantType::Q8_0, blk), want, "Q8_0");
  }
}

// Legacy 4/5-bit formats: weight j < 16 is the low nibble of byte j, weight j + 16 the high one;
// the fifth bit of weight j is bit j of the u32 qh.
void legacy(QuantType q, int bits, bool affine, float d, float m) {
  const size_t qs_at = (affine ? 4 : 2) + (bits == 5 ? 4 : 0);
  Block blk(block_bytes(q));
  blk.half(0, d);
  if (affine) blk.half(2, m);
  std::vector<float> want(32);
  const int top = (1 << bits) - 1;
  for (int j = 0; j < 32; ++j) {
    const int code = j == 0 ? 0 : j == 1 ? top : (j * 7 + 3) % (top + 1);
    blk.bits(qs_at + size_t(j % 16), j < 16 ? 0 : 4, 4, code);
    if (bits == 5) blk.bit(size_t(affine ? 4 : 2) + size_t(j / 8), j % 8, (code >> 4) & 1);
    want[j] = affine ? float(code) * h(d) + h(m) : float(code - (1 << (bits - 1))) * h(d);
  }
  expect_bits(decode(q, blk), want, std::string(quant_name(q)).c_str());
}

TEST(QuantBlocks, LegacyFormats) {
  for (float d : {1.5f, -0.25f, 0.0f}) {
    legacy(QuantType::Q4_0, 4, false, d, 0);
    legacy(QuantType::Q5_0, 5, false, d, 0);
    for (float m : {-3.0f, 0.75f, 0.0f}) {
      legacy(QuantType::Q4_1, 4, true, d, m);
      legacy(QuantType::Q5_1, 5, true, d, m);
    }
  }
}

// Q2_K: weight i of the 256 sits in qs[32 (i / 128) + (i % 32)] at bits 2 ((i % 128) / 32), in
// sub-block i / 16 with scale byte low nibble = scale code, high nibble = min code.
TEST(QuantBlocks, Q2_K) {
  for (auto [d, dmin] : {std::pair{0.02f, 0.01f}, std::pair{0.5f, -0.125f}, std::pair{0.0f, 0.0f}}) {
    Block blk(84);
    int sc[16], mc[16];
    for (int s = 0; s < 16; ++s) {
      sc[s] = s == 0 ? 0 : s == 1 ? 15 : (s * 5) % 16;
      mc[s] = s == 2 ? 15 : (s * 3) % 16;
      blk.b[size_t(s)] = uint8_t(sc[s] | (mc[s] << 4));
    }
    blk.half(80, d);
    blk.half(82, dmin);
    std::vector<float> want(256);
    for (int i = 0; i < 256; ++i) {
      const int code = (i * 3 + i / 64) % 4;
      blk.bits(16 + size_t(32 * (i / 128) + i % 32), 2 * ((i % 128) / 32), 2, code);
      const int s = i / 16;
      want[i] = h(d) * float(sc[s]) * float(code) - h(dmin) * float(mc[s]);
    }
    expect_bits(decode(QuantType::Q2_K, blk), want, "Q2_K");
  }
}

// Q3_K: as Q2_K for the two low bits; the third bit of weight i is bit (i % 128) / 32 + 4 (i / 128)
// of hmask[i % 32] (clear means minus 4). Signed 6-bit scales + 32: low nibble of scale s in byte
// s % 8 (s >= 8: high nibble), top two bits in byte 8 + s % 4 at bit 2 (s / 4).
TEST(QuantBlocks, Q3_K) {
  for (float d : {0.03f, -1.0f, 0.0f}) {
    Block blk(110);
    int sc[16];
    for (int s = 0; s < 16; ++s) {
      sc[s] = s == 0 ? -32 : s == 1 ? 31 : s == 2 ? 0 : (s * 11) % 64 - 32;
      const int u = sc[s] + 32;
      blk.bits(96 + size_t(s % 8), s < 8 ? 0 : 4, 4, u & 15);
      blk.bits(96 + 8 + size_t(s % 4), 2 * (s / 4), 2, u >> 4);
    }
    blk.half(108, d);
    std::vector<float> want(256);
    for (int i = 0; i < 256; ++i) {
      const int v = (i * 5 + i / 32) % 8 - 4;  // -4 .. 3
      const int low = v & 3;
      const bool high = v >= 0;
      blk.bits(32 + size_t(32 * (i / 128) + i % 32), 2 * ((i % 128) / 32), 2, low);
      blk.bit(size_t(i % 32), (i % 128) / 32 + 4 * (i / 128), high);
      want[i] = h(d) * float(sc[i / 16]) * float(v);
    }
    expect_bits(decode(QuantType::Q3_K, blk), want, "Q3_K");
  }
}

// Q4_K / Q5_K scales: 8 (scale, min) pairs of 6 bits in 12 bytes. Pair j < 4: low 6 bits of byte
// j (scale) and j + 4 (min); j >= 4: low / high nibble of byte j + 4, top two bits in bits 6-7 of
// byte j - 4 (scale) and j (min).
void put_k4_scales(Block& blk, size_t at, const int* sc, const int* mn) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      blk.bits(at + size_t(j), 0, 6, sc[j]);
      blk.bits(at + size_t(j) + 4, 0, 6, mn[j]);
    } else {
      blk.bits(at + size_t(j) + 4, 0, 4, sc[j] & 15);
      blk.bits(at + size_t(j) + 4, 4, 4, mn[j] & 15);
      blk.bits(at + size_t(j) - 4, 6, 2, sc[j] >> 4);
      blk.bits(at + size_t(j), 6, 2, mn[j] >> 4);
    }
  }
}

// Weight i: sub-block i / 32; nibble of qs[32 (i / 64) + i % 32], low when (i / 32) is even; Q5_K's
// fifth bit is bit i / 32 of qh[i % 32].
void k45(QuantType q, int bits) {
  for (auto [d, dmin] : {std::pair{0.01f, 0.02f}, std::pair{-0.5f, -0.25f}, std::pair{0.0f, 0.0f}}) {
    Block blk(block_bytes(q));
    blk.half(0, d);
    blk.half(2, dmin);
    int sc[8], mn[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = j == 0 ? 63 : j == 1 ? 0 : (j * 19) % 64;
      mn[j] = j == 2 ? 63 : (j * 23 + 5) % 64;
    }
    put_k4_scales(blk, 4, sc, mn);
    const size_t qs_at = bits == 5 ? 48 : 16;
    std::vector<float> want(256);
    const int top = (1 << bits) - 1;
    for (int i = 0; i < 256; ++i) {
      const int code = i == 0 ? top : (i * 13 + 1) % (top + 1);
      blk.bits(qs_at + size_t(32 * (i / 64) + i % 32), (i / 32) % 2 == 0 ? 0 : 4, 4, code & 15);
      if (bits == 5) blk.bit(16 + size_t(i % 32), i / 32, (code >> 4) & 1);
      const int s = i / 32;
      want[i] = h(d) * float(sc[s]) * float(code) - h(dmin) * float(mn[s]);
    }
    expect_bits(decode(q, blk), want, std::string(quant_name(q)).c_str());
  }
}

TEST(QuantBlocks, Q4_K) { k45(QuantType::Q4_K, 4); }
TEST(QuantBlocks, Q5_K) { k45(QuantType::Q5_K, 5); }

// Q6_K: weight i = 128 g + 32 r + l: low nibble from ql[64 g + l + 32 (r % 2)] (low half for
// r < 2), two high bits from qh[32 g + l] at bit 2 r; code - 32 times int8 scale of sub-block i / 16.
TEST(QuantBlocks, Q6_K) {
  for (float d : {0.004f, -2.0f, 0.0f}) {
    Block blk(210);
    int sc[16];
    for (int s = 0; s < 16; ++s) {
      sc[s] = s == 0 ? -128 : s == 1 ? 127 : (s * 37) % 256 - 128;
      blk.b[192 + size_t(s)] = uint8_t(int8_t(sc[s]));
    }
    blk.half(208, d);
    std::vector<float> want(256);
    for (int i = 0; i < 256; ++i) {
      const int code = i == 0 ? 0 : i == 1 ? 63 : (i * 29 + 7) % 64;
      const int g = i / 128, r = (i % 128) / 32, l = i % 32;
      blk.bits(size_t(64 * g + l + 32 * (r % 2)), r < 2 ? 0 : 4, 4, code & 15);
      blk.bits(128 + size_t(32 * g + l), 2 * r, 2, code >> 4);
      want[i] = h(d) * float(sc[i / 16]) * float(code - 32);
    }
    expect_bits(decode(QuantType::Q6_K, blk), want, "Q6_K");
  }
}

// IQ4_NL: code j of weights j (low nibble of qs[j]) and j + 16 (high nibble) picks a level of the
// non-linear table; w = d * level.
constexpr int kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
TEST(QuantBlocks, IQ4_NL) {
  for (float d : {0.0123f, -1.5f, 0.0f}) {
    Block blk(18);
    blk.half(0, d);
    std::vector<float> want(32);
    for (int i = 0; i < 32; ++i) {
      const int code = (i * 7 + 3) % 16;
      blk.bits(2 + size_t(i % 16), i < 16 ? 0 : 4, 4, code);
      want[i] = h(d) * float(kLevels[code]);
    }
    expect_bits(decode(QuantType::IQ4_NL, blk), want, "IQ4_NL");
  }
}

// IQ4_XS: d, then 16 bits scales_h (2 high bits of sub-block i's scale at bit 2i), 4 bytes
// scales_l (low 4 bits of scale i in nibble i % 2 of byte i / 2), then 8 x 16 bytes of codes in
// IQ4_NL's order; w = d * (scale - 32) * level.
TEST(QuantBlocks, IQ4_XS) {
  for (float d : {0.0007f, -3.25f}) {
    Block blk(136);
    blk.half(0, d);
    int sc[8];
    unsigned scales_h = 0;
    for (int i = 0; i < 8; ++i) {
      sc[i] = i == 0 ? 0 : i == 1 ? 63 : (i * 23 + 5) % 64;
      blk.bits(4 + size_t(i / 2), 4 * (i % 2), 4, sc[i] & 15);
      scales_h |= unsigned(sc[i] >> 4) << (2 * i);
    }
    blk.b[2] = uint8_t(scales_h & 0xFF);
    blk.b[3] = uint8_t(scales_h >> 8);
    std::vector<float> want(256);
    for (int i = 0; i < 256; ++i) {
      const int sub = i / 32, l = i % 32, code = (i * 11 + sub) % 16;
      blk.bits(8 + size_t(16 * sub + l % 16), l < 16 ? 0 : 4, 4, code);
      want[i] = h(d) * float(sc[sub] - 32) * float(kLevels[code]);
    }
    expect_bits(decode(QuantType::IQ4_XS, blk), want, "IQ4_XS");
  }
}

TEST(QuantBlocks, NamesSizesAndGgmlIds) {
  const std::pair<const char*, uint32_t> ids[] = {{"Q4_0", 2},  {"Q4_1", 3},  {"Q5_0", 6},    {"Q5_1", 7},
                                                  {"Q8_0", 8},  {"Q2_K", 10}, {"Q3_K", 11},   {"Q4_K", 12},
                                                  {"Q5_K", 13}, {"Q6_K", 14}, {"IQ4_NL", 20}, {"IQ4_XS", 23},
                                                  {"MXFP4", 39}};
  for (auto [name, id] : ids) {
    const auto q = parse_quant(name);
    ASSERT_TRUE(q.has_value()) << name;
    EXPECT_EQ(quant_ggml_type(*q), id);
    EXPECT_EQ(quant_from_ggml_type(id), q);
    EXPECT_EQ(quant_name(*q), name);
  }
  for (uint32_t id : {0u, 1u, 9u, 15u, 16u, 21u, 22u, 30u, 34u, 35u}) EXPECT_FALSE(quant_from_ggml_type(id)) << id;
  EXPECT_FALSE(parse_quant("IQ2_XXS"));
  EXPECT_EQ(block_bytes(QuantType::IQ4_NL), 18u);
  EXPECT_EQ(block_bytes(QuantType::IQ4_XS), 136u);
  EXPECT_EQ(block_bytes(QuantType::MXFP4), 17u);
  EXPECT_EQ(quant_names().size(), size_t(kLastQuantType));
}

// Every SIMD target this machine has (AVX-512, AVX2, the portable fallback), the default again after.
template <class F>
void on_every_simd_target(F&& f) {
  for (SimdTarget t : test::simd_targets_here()) {
    use_simd(t);
    SCOPED_TRACE(simd_in_use());
    f();
  }
  use_simd(SimdTarget::Auto);
}

// The vectorised decoders the kernels use give the scalar decoders' bits on arbitrary bytes
// (random fp16 scales, NaN and Inf included; MXFP4's every exponent byte, its subnormal and
// overflowing products included).
void vectorised_decoders_match_scalar() {
  std::mt19937 rng(11);
  for (int t = 1; t <= int(kLastQuantType); ++t) {
    const QuantType q = QuantType(t);
    const size_t nb = 37;
    std::vector<uint8_t> bytes(nb * block_bytes(q));
    for (auto& b : bytes) b = uint8_t(rng());
    std::vector<float> a(nb * block_elems(q)), v(a.size());
    dequantize_blocks(q, bytes.data(), nb, a.data());
    dequantize_blocks_fast(q, bytes.data(), nb, v.data());
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_TRUE(f32_bits(a[i]) == f32_bits(v[i]) || (std::isnan(a[i]) && std::isnan(v[i])))
          << quant_name(q) << " weight " << i << ": " << a[i] << " vs " << v[i];
  }
}

TEST(QuantBlocks, VectorisedDecodersMatchScalarBitwise) { on_every_simd_target(vectorised_decoders_match_scalar); }

// The decode GEMV that decodes in registers (simd::dot_rows_quant) against dot_rows on the
// dequantised rows: bitwise, for row ranges that leave rows outside the four streams and k ranges
// that start and end inside the row; and it declines (returning false) where it cannot keep
// dot_rows' order.
void in_register_gemv_is_dot_rows() {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const size_t K = 768, N = 23;
  std::vector<float> x(K), w(N * K);
  for (auto& v : x) v = u(rng);
  for (auto& v : w) v = u(rng) * (1.0f + float(rng() % 8));
  for (int qi = 1; qi <= int(kLastQuantType); ++qi) {
    const QuantType q = QuantType(qi);
    SCOPED_TRACE(quant_name(q));
    const size_t rb = quant_row_bytes(q, K);
    std::vector<uint8_t> blocks(N * rb);
    for (size_t n = 0; n < N; ++n) quantize_row(q, w.data() + n * K, K, blocks.data() + n * rb);
    std::vector<float> deq(N * K);
    dequantize_blocks(q, blocks.data(), N * K / block_elems(q), deq.data());
    for (auto [n0, n1, k0, k1] : {std::array<size_t, 4>{0, 23, 0, 768}, {3, 22, 256, 512}, {5, 6, 512, 768}}) {
      std::vector<float> got(N, -1.0f), want(N, -1.0f);
      ASSERT_TRUE(simd::dot_rows_quant(x.data(), blocks.data(), q, K, n0, n1, k0, k1, got.data()));
      simd::dot_rows(x.data(), deq.data(), DType::F32, K, n0, n1, k0, k1, want.data());
      for (size_t n = 0; n < N; ++n) ASSERT_EQ(f32_bits(got[n]), f32_bits(want[n])) << "row " << n << " of " << n0 << ".." << n1;
    }
    // A k range that does not start on a block is left to the dequantising path.
    std::vector<float> y(N);
    EXPECT_FALSE(simd::dot_rows_quant(x.data(), blocks.data(), q, K, 0, N, 16, K, y.data()));
  }
  float y0 = 0;
  EXPECT_FALSE(simd::dot_rows_quant(x.data(), w.data(), QuantType::None, K, 0, 1, 0, K, &y0));
}

TEST(QuantBlocks, InRegisterGemvIsBitwiseDotRowsOnTheDequantisedRows) {
  on_every_simd_target(in_register_gemv_is_dot_rows);
}

// Round trip: every weight within a format-dependent fraction of its block's largest magnitude.
TEST(Quantize, RoundTripWithinTheFormatsErrorBound) {
  const std::pair<QuantType, double> bounds[] = {
      {QuantType::Q8_0, 0.0045}, {QuantType::Q4_0, 0.13},  {QuantType::Q4_1, 0.075},  {QuantType::Q5_0, 0.065},
      {QuantType::Q5_1, 0.036},  {QuantType::Q2_K, 0.40},  {QuantType::Q3_K, 0.30},   {QuantType::Q4_K, 0.075},
      {QuantType::Q5_K, 0.036},  {QuantType::Q6_K, 0.036}, {QuantType::IQ4_NL, 0.13}, {QuantType::IQ4_XS, 0.15},
      // ggml's exponent puts amax at 8 to 16 scales, so one near 16 clamps to level 12: under amax / 4.
      {QuantType::MXFP4, 0.25}};
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t n = 256 * 64;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = nd(rng) * (1.0f + float(i / 256 % 7));  // blocks of varied ranges
  for (size_t i = 0; i < 256; ++i) x[i] = 0.0f;                                 // an all-zero block
  for (size_t i = 256; i < 512; ++i) x[i] = std::fabs(x[i]) + 3.0f;             // all positive, away from 0
  for (size_t i = 512; i < 768; ++i) x[i] = -std::fabs(x[i]) - 3.0f;            // all negative
  for (auto [q, tol] : bounds) {
    std::vector<uint8_t> blocks(n / block_elems(q) * block_bytes(q));
    quantize_row(q, x.data(), n, blocks.data());
    std::vector<float> y(n);
    dequantize_blocks(q, blocks.data(), n / block_elems(q), y.data());
    const size_t be = block_elems(q);
    double worst = 0;
    for (size_t b0 = 0; b0 < n; b0 += be) {
      float amax = 0;
      for (size_t i = b0; i < b0 + be; ++i) amax = std::max(amax, std::fabs(x[i]));
      for (size_t i = b0; i < b0 + be; ++i) {
        const double rel = amax == 0 ? std::fabs(y[i]) : std::fabs(double(y[i]) - x[i]) / amax;
        worst = std::max(worst, rel);
        ASSERT_LE(rel, tol) << quant_name(q) << " weight " << i << ": " << x[i] << " -> " << y[i];
      }
    }
    EXPECT_GT(worst, tol / 20) << quant_name(q) << ": suspiciously exact";
  }
}

// A model small enough for the reference policy, with every matrix width a multiple of 256 so the
// K-quants apply (the tiny preset's 128-wide rows would fall back to Q8_0).
ModelConfig quant_config(Arch arch) {
  ModelConfig c = synthetic_config(arch_name(arch), "tiny");
  c.dim = 256;
  c.hidden_dim = 512;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 64;
  c.vocab_size = 320;
  if (arch == Arch::Gemma2) c.query_pre_attn_scalar = 64.0f;
  c.max_seq_len = 64;
  return c;
}

using test::prefill_then_decode_logits;

// For each format: quantised GGUF (weights dequantised on the fly) vs the same GGUF converted to
// F32 (dequantised once by convert), fp32 compute: bitwise equal logits for every policy.
TEST(QuantModel, OnTheFlyDequantisationIsBitwiseDequantiseThenF32) {
  test::TempDir tmp;
  std::vector<int> tokens;
  for (int i = 0; i < 21; ++i) tokens.push_back((i * 37 + 5) % 320);
  const Arch archs[] = {Arch::Llama, Arch::Qwen2, Arch::Gemma2};
  const char* const quants[] = {"Q8_0", "Q4_0", "Q4_1",   "Q5_0",   "Q5_1",   "Q2_K", "Q3_K",
                                "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "MXFP4", "Q4_K_M"};
  for (size_t ai = 0; ai < std::size(archs); ++ai) {
    const Arch arch = archs[ai];
    const Checkpoint src = synthesize_checkpoint(quant_config(arch), DType::F32, 99);
    for (size_t qi = 0; qi < std::size(quants); ++qi) {
      if (!test::runs_grid_point(ai, qi, std::size(archs))) continue;  // sanitizer build: each format once
      const char* qn = quants[qi];
      SCOPED_TRACE(std::string(arch_name(arch)) + " " + qn);
      const std::string qpath = tmp.file(std::string(qn) + ".gguf"), fpath = tmp.file(std::string(qn) + "-f32.gguf");
      ExportOptions eo;
      eo.quant = qn;
      export_checkpoint(src, "gguf", qpath, eo);
      const Checkpoint qck = open_checkpoint(qpath);
      size_t quantised = 0;
      for (const auto& [name, t] : qck.tensors) quantised += t.quantized();
      ASSERT_GE(quantised, size_t(7 * 2 + 1)) << "every matrix should be quantised";
      ExportOptions fo;
      fo.dtype = DType::F32;
      export_checkpoint(qck, "gguf", fpath, fo);
      auto qm = Model::load(qpath, DType::F32);
      auto fm = Model::load(fpath, DType::F32);
      const Checkpoint fck = open_checkpoint(fpath);
      for (const auto& [name, t] : fck.tensors) ASSERT_FALSE(t.quantized()) << name;
      for (KernelPolicy pol : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant}) {
        for (int threads : {1, 2}) {
          if (pol == KernelPolicy::Reference && threads > 1) continue;
          const auto a = prefill_then_decode_logits(qm, pol, threads, tokens), b = prefill_then_decode_logits(fm, pol, threads, tokens);
          ASSERT_EQ(a.size(), b.size());
          size_t diff = 0;
          for (size_t i = 0; i < a.size(); ++i) diff += f32_bits(a[i]) != f32_bits(b[i]);
          EXPECT_EQ(diff, 0u) << policy_name(pol) << " threads " << threads;
        }
      }
    }
  }
}

// The quantised model is a real approximation of the float one: its logits stay close to the F32
// source's, and closer for more bits.
TEST(QuantModel, MoreBitsTrackTheFloatModelCloser) {
  test::TempDir tmp;
  const Checkpoint src = synthesize_checkpoint(quant_config(Arch::Llama), DType::F32, 5);
  export_checkpoint(src, "gguf", tmp.file("f32.gguf"));
  std::vector<int> tokens;
  for (int i = 0; i < 9; ++i) tokens.push_back((i * 53 + 11) % 320);
  const auto ref = prefill_then_decode_logits(Model::load(tmp.file("f32.gguf"), DType::F32), KernelPolicy::Standard, 1, tokens);
  double prev = 1e30;
  for (const char* qn : {"Q2_K", "Q4_K", "Q6_K", "Q8_0"}) {
    ExportOptions eo;
    eo.quant = qn;
    eo.quant_pure = true;  // the formats, not llama.cpp's mixes
    export_checkpoint(src, "gguf", tmp.file(std::string(qn) + ".gguf"), eo);
    const auto got = prefill_then_decode_logits(Model::load(tmp.file(std::string(qn) + ".gguf"), DType::F32), KernelPolicy::Standard,
                                1, tokens);
    double err = 0, scale = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      err = std::max(err, double(std::fabs(got[i] - ref[i])));
      scale = std::max(scale, double(std::fabs(ref[i])));
    }
    EXPECT_LT(err, prev) << qn;
    EXPECT_GT(err, 0.0) << qn << " cannot be exact";
    // Synthetic uniform weights behind a final gain of 8 amplify the error: 2 bits may move logits
    // as much as they range; 8 bits stay within a few percent.
    if (std::string(qn) != "Q2_K") {
      EXPECT_LT(err, 0.5 * scale) << qn;
    }
    if (std::string(qn) == "Q8_0") {
      EXPECT_LT(err, 0.05 * scale) << qn;
    }
    std::cerr << qn << " max |dlogit| " << err << " (max |logit| " << scale << ")\n";
    prev = err;
  }
}

}  // namespace
}  // namespace kvp
