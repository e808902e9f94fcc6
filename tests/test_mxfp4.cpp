// MXFP4 (ggml type 39, the OCP microscaling FP4 of GPT-OSS): the decoders against values derived
// here from the OCP definition of FP4 E2M1 and E8M0 (not from ggml's doubled table), the quantiser's
// exponent, nearest-level and tie rules spelled out, the repacking of Hugging Face's layout against
// an independent reading of it, GGUF files keeping the blocks, and a mixture of experts in the
// MXFP4_MOE mix giving the bits of its dequantised twin under every kernel policy. The shared
// per-format tests (test_quant.cpp) cover MXFP4 too; the independent Python decoder is checked in
// test_gguf_conformance.cpp.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/mxfp4_repack.h"
#include "core/quant.h"
#include "core/quantize.h"
#include "io/checkpoint.h"
#include "kernels/dequant_rows.h"
#include "kernels/simd_target.h"
#include "model/checkpoint_export.h"
#include "model/model.h"
#include "model/moe_names.h"
#include "model/synthetic.h"
#include "runtime/generator.h"
#include "prefill_decode_logits.h"
#include "test_util.h"

namespace kvp {
namespace {

// OCP FP4 E2M1: sign bit 3, exponent bits 2-1 with bias 1 (0: subnormal, 0.5 * mantissa), mantissa
// bit 0.
float e2m1(int code) {
  const int e = (code >> 1) & 3, m = code & 1;
  const float mag = e == 0 ? 0.5f * float(m) : (1.0f + 0.5f * float(m)) * std::ldexp(1.0f, e - 1);
  return (code & 8) ? -mag : mag;
}

// A weight of code c under E8M0 exponent byte e: e2m1(c) * 2^(e - 127), as fp32 arithmetic gives it
// (ldexp is exact here, or overflows to infinity), and +0 for both zero codes (ggml's table).
float ocp_value(int code, int e) {
  const float v = std::ldexp(e2m1(code), e - 127);
  return v == 0.0f ? 0.0f : v;
}

std::vector<float> decode(const std::vector<uint8_t>& blocks) {
  std::vector<float> out(blocks.size() / 17 * 32);
  dequantize_blocks(QuantType::MXFP4, blocks.data(), blocks.size() / 17, out.data());
  return out;
}

// The scalar decoder and, on every SIMD target here, the vectorised one give `want`'s bits.
void expect_decodes_to(const std::vector<uint8_t>& blocks, const std::vector<float>& want, const std::string& what) {
  const std::vector<float> got = decode(blocks);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << what << " weight " << i << ": " << got[i] << " vs " << want[i];
  for (SimdTarget t : test::simd_targets_here()) {
    use_simd(t);
    std::vector<float> fast(want.size());
    dequantize_blocks_fast(QuantType::MXFP4, blocks.data(), blocks.size() / 17, fast.data());
    for (size_t i = 0; i < fast.size(); ++i)
      ASSERT_EQ(f32_bits(fast[i]), f32_bits(want[i])) << what << " " << simd_in_use() << " weight " << i;
  }
  use_simd(SimdTarget::Auto);
}

TEST(Mxfp4Blocks, NameIdSizeAndParsing) {
  EXPECT_EQ(parse_quant("mxfp4"), QuantType::MXFP4);
  EXPECT_EQ(parse_quant("MXFP4"), QuantType::MXFP4);
  EXPECT_EQ(quant_name(QuantType::MXFP4), "MXFP4");
  EXPECT_EQ(quant_ggml_type(QuantType::MXFP4), 39u);
  EXPECT_EQ(quant_from_ggml_type(39), QuantType::MXFP4);
  EXPECT_EQ(block_elems(QuantType::MXFP4), 32u);
  EXPECT_EQ(block_bytes(QuantType::MXFP4), 17u);
  EXPECT_EQ(quant_row_bytes(QuantType::MXFP4, 2880), 90u * 17u);  // GPT-OSS's hidden size
}

// Byte 0 the exponent, then weight j (0..15) in the low nibble of byte 1 + j and weight j + 16 in
// its high nibble. Spelled out for e = 127 (scale 1: the FP4 levels themselves) and the extremes.
TEST(Mxfp4Blocks, HandBuiltBlocksGiveTheSpelledOutValues) {
  std::vector<uint8_t> blk(17, 0);
  blk[0] = 127;
  for (int j = 0; j < 16; ++j) blk[size_t(1 + j)] = uint8_t(j | ((15 - j) << 4));
  const std::vector<float> levels = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  std::vector<float> want(levels);
  want.insert(want.end(), levels.rbegin(), levels.rend());
  expect_decodes_to(blk, want, "e 127");

  blk[0] = 129;  // scale 4
  for (float& w : want) w *= 4.0f;
  expect_decodes_to(blk, want, "e 129");

  // e = 0: 0.5 * 2^-127 = 2^-128, an fp32 subnormal (bits 0x00200000), kept exactly; e = 255:
  // 0.5 * 2^128 = 2^127, and 1 * 2^128 overflows to infinity as ggml's fp32 product does.
  std::vector<uint8_t> ext(34, 0);
  ext[0] = 0;
  ext[1] = 0x01 | 0x90;  // weight 0: +0.5, weight 16: -0.5
  ext[2] = 0x07;         // weight 1: +6
  ext[17] = 255;
  ext[18] = 0x01 | 0xA0;  // weight 0: +0.5, weight 16: -1
  ext[19] = 0x0F;         // weight 1: -6
  std::vector<float> w2(64, 0.0f);
  w2[0] = bits_f32(0x00200000u);
  w2[16] = bits_f32(0x80200000u);
  w2[1] = 6.0f * std::ldexp(1.0f, -127);
  w2[32] = bits_f32(0x7F000000u);
  w2[48] = -INFINITY;
  w2[33] = -INFINITY;
  expect_decodes_to(ext, w2, "extremes");
}

// Every code in both halves under exponents across the range, against ocp_value.
TEST(Mxfp4Blocks, EveryCodeUnderEveryKindOfExponentIsTheOcpValue) {
  for (int e : {0, 1, 2, 3, 100, 126, 127, 128, 129, 200, 252, 253, 254, 255}) {
    std::vector<uint8_t> blk(17, 0);
    blk[0] = uint8_t(e);
    std::vector<float> want(32);
    for (int i = 0; i < 32; ++i) {
      const int code = i < 16 ? (i * 5 + e) % 16 : (i * 7 + 1) % 16;  // each half holds every code
      blk[size_t(1 + i % 16)] |= uint8_t(code << (i < 16 ? 0 : 4));
      want[size_t(i)] = ocp_value(code, e);
    }
    expect_decodes_to(blk, want, "e " + std::to_string(e));
  }
}

std::vector<uint8_t> quantize_block(const std::vector<float>& x) {
  std::vector<uint8_t> b(x.size() / 32 * 17);
  quantize_row(QuantType::MXFP4, x.data(), x.size(), b.data());
  return b;
}

int code_of(const std::vector<uint8_t>& blk, int i) { return (blk[size_t(1 + i % 16)] >> (i < 16 ? 0 : 4)) & 15; }

// amax 15 gives e = floor(log2 15) + 125 = 128 (scale 1): every weight's code is the nearest level,
// a tie goes to the smaller magnitude, and a zero (of either sign, or a negative weight that rounds
// to zero) is code 0, never 8.
TEST(Mxfp4Quantize, NearestLevelTiesToTheSmallerMagnitudeAndZeroIsCodeZero) {
  const std::vector<float> x = {15,   14,   10,   7,   5,   3.5f, 2.5f, 1.5f,  0.5f,  0.4f, -0.0f,
                                -0.4f, -0.5f, -0.6f, -1.5f, -10, -14, 13,    11,    9,    6.5f, 4.5f,
                                3,    2,    1,    0.75f, 0.25f, -3,  -5,   -7,    -12,   0};
  const int want[32] = {7, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 9, 9, 14, 15, 7, 7, 6, 5, 4, 3, 2, 1, 1, 0, 11, 12, 13, 15, 0};
  const std::vector<uint8_t> blk = quantize_block(x);
  EXPECT_EQ(blk[0], 128);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(code_of(blk, i), want[i]) << "weight " << i << " = " << x[size_t(i)];
}

// ggml's exponent floor(log2(amax)) - 2 + 127, clamped to [0, 254], over magnitudes from the
// smallest subnormal to FLT_MAX; an all-zero block is e = 0 with every code 0.
TEST(Mxfp4Quantize, ExponentPutsTheLargestMagnitudeAtEightToSixteenScales) {
  const std::pair<float, int> cases[] = {{8.0f, 128},
                                         {std::nextafter(16.0f, 0.0f), 128},
                                         {16.0f, 129},
                                         {1.0f, 125},
                                         {0.75f, 124},
                                         {FLT_MAX, 252},
                                         {std::ldexp(1.0f, -124), 1},
                                         {std::ldexp(1.0f, -125), 0},
                                         {std::ldexp(1.0f, -149), 0},
                                         {0.0f, 0}};
  for (auto [amax, e] : cases) {
    std::vector<float> x(32, 0.0f);
    x[5] = -amax;
    x[9] = amax / 3;
    const std::vector<uint8_t> blk = quantize_block(x);
    EXPECT_EQ(int(blk[0]), e) << "amax " << amax;
    if (amax == 0.0f)
      for (int i = 0; i < 32; ++i) EXPECT_EQ(code_of(blk, i), 0);
  }
  // With the scale clamped at 2^-128 the codes are still the nearest: 2^-149 is 2^-21 scales (0).
  std::vector<float> tiny(32, 0.0f);
  tiny[0] = std::ldexp(3.0f, -128);
  tiny[1] = std::ldexp(1.0f, -149);
  const std::vector<uint8_t> blk = quantize_block(tiny);
  EXPECT_EQ(code_of(blk, 0), 3);
  EXPECT_EQ(code_of(blk, 1), 0);
}

// Random blocks at magnitudes across fp32's range: amax within [8, 16) scales unless the exponent
// is clamped, and every weight at a nearest level (by search over all 16, in double), ties to the
// smaller magnitude.
TEST(Mxfp4Quantize, EveryWeightTakesANearestLevel) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int b = 0; b < 3000; ++b) {
    const int k = int(rng() % 260) - 140;  // 2^-140 .. 2^119
    std::vector<float> x(32);
    for (auto& v : x) v = (rng() % 11 == 0) ? 0.0f : nd(rng) * std::ldexp(1.0f, k);
    const std::vector<uint8_t> blk = quantize_block(x);
    const std::vector<float> y = decode(blk);
    const double d = mxfp4_scale(blk[0]);
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    if (blk[0] > 0) {
      ASSERT_GE(amax, 8 * d) << "block " << b;
      ASSERT_LT(amax, 16 * d) << "block " << b;
    }
    for (int i = 0; i < 32; ++i) {
      const double err = std::fabs(double(x[size_t(i)]) - y[size_t(i)]);
      for (int c = 0; c < 16; ++c) {
        const double l = kMxfp4Levels[c] * d, other = std::fabs(double(x[size_t(i)]) - l);
        ASSERT_TRUE(other > err || (other == err && std::fabs(l) >= std::fabs(double(y[size_t(i)]))))
            << "block " << b << " weight " << i << " = " << x[size_t(i)] << " took " << y[size_t(i)] << ", level "
            << l << " is nearer";
      }
    }
  }
}

// Weights already on an MXFP4 grid (FP4 levels times any power of two whose block stays finite)
// come back bit for bit (-0 as +0).
TEST(Mxfp4Quantize, ValuesOnTheGridAreReproducedExactly) {
  std::mt19937 rng(17);
  size_t nonzero = 0;
  for (int k = -127; k <= 125; ++k) {
    std::vector<float> x(64);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(e2m1(int(rng() % 16)), k);
    x[40] = std::ldexp(e2m1(int(rng() % 7) + 1), k);  // the second block not all zero
    const std::vector<float> y = decode(quantize_block(x));
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = x[i] == 0.0f ? 0.0f : x[i];
      ASSERT_EQ(f32_bits(y[i]), f32_bits(want)) << "2^" << k << " weight " << i << ": " << x[i] << " -> " << y[i];
      nonzero += want != 0.0f;
    }
  }
  EXPECT_GT(nonzero, 253u * 40);
}

// The HF layout read independently: weight i of a 32-group is nibble i % 2 of byte i / 2, the FP4
// level of that index times 2^(s - 127) (fp32 ldexp: exact, or infinity).
float hf_value(const uint8_t* group, uint8_t s, int i) {
  static const float kFp4[16] = {+0.0f, 0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                 -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  const int nib = (group[i / 2] >> (4 * (i % 2))) & 15;
  return std::ldexp(kFp4[nib], int(s) - 127);
}

// Random code bytes with every scale byte 0..255 in each column of groups: the repacked blocks
// decode to the HF values bit for bit, except HF's -0, which ggml's table reads as +0.
TEST(Mxfp4Repack, RepackedBlocksDecodeToTheHfValues) {
  std::mt19937 rng(29);
  const size_t rows = 256, k = 96, groups = k / 32;
  std::vector<uint8_t> blocks(rows * groups * 16), scales(rows * groups);
  for (auto& b : blocks) b = uint8_t(rng());
  for (size_t r = 0; r < rows; ++r)
    for (size_t g = 0; g < groups; ++g) scales[r * groups + g] = uint8_t((r + 97 * g) % 256);
  std::vector<uint8_t> ggml(rows * groups * 17);
  repack_hf_mxfp4(blocks.data(), scales.data(), rows, k, ggml.data());
  const std::vector<float> got = decode(ggml);
  size_t negative_zeros = 0, infinities = 0, subnormals = 0;
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < k; ++c) {
      const size_t g = r * groups + c / 32;
      const float want = hf_value(blocks.data() + 16 * g, scales[g], int(c % 32));
      const float y = got[r * k + c];
      negative_zeros += want == 0.0f && std::signbit(want);
      infinities += std::isinf(want);
      subnormals += want != 0.0f && std::fabs(want) < FLT_MIN;
      ASSERT_EQ(f32_bits(y), f32_bits(want == 0.0f ? 0.0f : want)) << "row " << r << " col " << c << " scale "
                                                                   << int(scales[g]);
    }
  EXPECT_GT(negative_zeros, 0u);
  EXPECT_GT(infinities, 0u);
  EXPECT_GT(subnormals, 0u);
  // Where the nibbles go: HF byte 0 = 0x21 (weights 0 and 1: codes 1, 2), byte 8 = 0x43 (weights 16
  // and 17: codes 3, 4) become ggml bytes 1 + 0 = 0x31 and 1 + 1 = 0x42.
  std::vector<uint8_t> one(16, 0), out(17);
  one[0] = 0x21;
  one[8] = 0x43;
  const uint8_t s = 131;
  repack_hf_mxfp4(one.data(), &s, 1, 32, out.data());
  EXPECT_EQ(out[0], 131);
  EXPECT_EQ(out[1], 0x31);
  EXPECT_EQ(out[2], 0x42);
}

// The writer's inverse gives the HF bytes back, codes and exponents both (-0 and every code included).
TEST(Mxfp4Repack, TheInverseGivesTheHfBytesBack) {
  std::mt19937 rng(31);
  const size_t rows = 64, k = 128, groups = k / 32;
  std::vector<uint8_t> blocks(rows * groups * 16), scales(rows * groups), ggml(rows * groups * 17);
  for (auto& b : blocks) b = uint8_t(rng());
  for (auto& s : scales) s = uint8_t(rng());
  repack_hf_mxfp4(blocks.data(), scales.data(), rows, k, ggml.data());
  std::vector<uint8_t> b2(blocks.size()), s2(scales.size());
  repack_ggml_mxfp4_to_hf(ggml.data(), rows, k, b2.data(), nullptr);
  repack_ggml_mxfp4_to_hf(ggml.data(), rows, k, nullptr, s2.data());
  EXPECT_EQ(b2, blocks);
  EXPECT_EQ(s2, scales);
  const std::string msg =
      test::error_of([&] { repack_ggml_mxfp4_to_hf(ggml.data(), 1, 48, b2.data(), s2.data(), "down_proj_blocks"); });
  EXPECT_NE(msg.find("down_proj_blocks"), std::string::npos) << msg;
}

TEST(Mxfp4Repack, RowsThatAreNotWholeBlocksAreRefusedByName) {
  std::vector<uint8_t> blocks(24), scales(2), out(64);
  const std::string msg = test::error_of(
      [&] { repack_hf_mxfp4(blocks.data(), scales.data(), 1, 48, out.data(), "model.layers.0.mlp.experts.down_proj"); });
  EXPECT_NE(msg.find("model.layers.0.mlp.experts.down_proj"), std::string::npos) << msg;
  EXPECT_NE(msg.find("48"), std::string::npos) << msg;
  EXPECT_NE(msg.find("MXFP4"), std::string::npos) << msg;
  EXPECT_THROW(repack_hf_mxfp4(blocks.data(), scales.data(), 1, 16, out.data()), Error);
}

ModelConfig small_llama() {
  ModelConfig c = synthetic_config("llama", "tiny");
  c.dim = 256;
  c.hidden_dim = 512;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 64;
  c.vocab_size = 320;
  c.max_seq_len = 64;
  return c;
}

// The blocks a GGUF holds are the quantiser's for each row, they read back as MXFP4, and a GGUF
// converted to a GGUF again carries them over byte for byte.
TEST(Mxfp4Gguf, WrittenBlocksReadBackAndSurviveAGgufToGgufConversion) {
  test::TempDir tmp;
  const Checkpoint src = synthesize_checkpoint(small_llama(), DType::F32, 41);
  ExportOptions eo;
  eo.quant = "mxfp4";
  export_checkpoint(src, "gguf", tmp.file("m.gguf"), eo);
  const Checkpoint q = open_checkpoint(tmp.file("m.gguf"));
  for (const auto& [name, t] : q.tensors) {
    if (t.shape.size() == 2) {
      EXPECT_EQ(t.quant, QuantType::MXFP4) << name;
    }
  }
  for (const char* name : {"model.layers.1.mlp.up_proj.weight", "model.layers.0.mlp.down_proj.weight"}) {
    const TensorView& s = src.tensors.at(name);
    const TensorView& t = q.tensors.at(name);
    std::vector<float> w(size_t(s.numel()));
    view_to_f32(s, 0, w.size(), w.data());
    const std::vector<uint8_t> want = test::quantized_rows(QuantType::MXFP4, w, s.rows(), s.cols());
    ASSERT_EQ(t.nbytes(), want.size()) << name;
    EXPECT_EQ(std::memcmp(t.data, want.data(), want.size()), 0) << name;
  }
  export_checkpoint(q, "gguf", tmp.file("again.gguf"), ExportOptions{});
  const Checkpoint again = open_checkpoint(tmp.file("again.gguf"));
  for (const auto& [name, t] : q.tensors) {
    const TensorView& a = again.tensors.at(name);
    ASSERT_EQ(a.quant, t.quant) << name;
    if (t.quantized()) {
      ASSERT_EQ(a.nbytes(), t.nbytes()) << name;
      EXPECT_EQ(std::memcmp(a.data, t.data, t.nbytes()), 0) << name;
    }
  }
}

using test::prefill_then_decode_logits;

// Mixtral and Qwen2-MoE (a shared expert) in the MXFP4_MOE mix: experts MXFP4, the rest Q8_0, the
// routers unquantised; on-the-fly dequantisation gives bitwise the logits of the file converted to
// F32, for every kernel policy.
TEST(Mxfp4Model, MoeMixIsBitwiseItsDequantisedTwinUnderEveryPolicy) {
  test::TempDir tmp;
  std::vector<int> tokens;
  for (int i = 0; i < 19; ++i) tokens.push_back((i * 37 + 5) % 250);
  for (const char* fam : {"mixtral", "qwen2_moe"}) {
    SCOPED_TRACE(fam);
    const Checkpoint src = synthesize_checkpoint(synthetic_config(fam, "tiny"), DType::F32, 13);
    const std::string qpath = tmp.file(std::string(fam) + ".gguf"), fpath = tmp.file(std::string(fam) + "-f32.gguf");
    ExportOptions eo;
    eo.quant = "MXFP4_MOE";
    export_checkpoint(src, "gguf", qpath, eo);
    const Checkpoint q = open_checkpoint(qpath);
    const ModelConfig& c = q.config;
    size_t experts = 0;
    for (int l = 0; l < c.n_layers; ++l) {
      if (!c.moe_layer(l)) continue;
      EXPECT_FALSE(q.tensors.at(moe_router_name(c, l)).quantized()) << l;
      for (int e = 0; e < c.moe.n_experts; ++e)
        for (ExpertMatrix m : {ExpertMatrix::Gate, ExpertMatrix::Up, ExpertMatrix::Down}) {
          EXPECT_EQ(q.tensors.at(expert_matrix_name(c, l, e, m)).quant, QuantType::MXFP4) << l << " " << e;
          ++experts;
        }
      if (c.moe.shared_hidden_dim > 0) {
        EXPECT_EQ(q.tensors.at(shared_expert_name(l, ExpertMatrix::Up)).quant, QuantType::Q8_0) << l;
      }
    }
    EXPECT_GT(experts, 0u);
    EXPECT_EQ(q.tensors.at("model.layers.0.self_attn.q_proj.weight").quant, QuantType::Q8_0);
    ExportOptions fo;
    fo.dtype = DType::F32;
    export_checkpoint(q, "gguf", fpath, fo);
    auto qm = Model::load(qpath, DType::F32);
    auto fm = Model::load(fpath, DType::F32);
    for (KernelPolicy pol :
         {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant, KernelPolicy::Portable}) {
      for (int threads : {1, 2}) {
        if (pol == KernelPolicy::Reference && threads > 1) continue;
        const auto a = prefill_then_decode_logits(qm, pol, threads, tokens), b = prefill_then_decode_logits(fm, pol, threads, tokens);
        EXPECT_EQ(test::first_difference(a, b), -1) << policy_name(pol) << " threads " << threads;
      }
    }
  }
}

}  // namespace
}  // namespace kvp
