// Quantised KV caches (issue 17 item 2): the encodings themselves, and what the engine does with
// them — unwritten slots never read, cache-OFF untouched by the cache's format, the invariant
// policy's guarantees between runs with the same KV type, and real (nonzero) logit gaps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/kv_type.h"
#include "core/quant.h"
#include "kernels/dequant_rows.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

const KvFormat kFp8[] = {KvFormat::FP8_E4M3, KvFormat::FP8_E5M2};

// The formats as the OCP FP8 specification states them, independently of the library's table.
double fp8_value(KvFormat f, int b) {
  const int mant_bits = f == KvFormat::FP8_E4M3 ? 3 : 2, bias = f == KvFormat::FP8_E4M3 ? 7 : 15;
  const int e = (b & 0x7F) >> mant_bits, m = b & ((1 << mant_bits) - 1);
  const double mag = e == 0 ? std::ldexp(m, 1 - bias - mant_bits) : std::ldexp(m + (1 << mant_bits), e - bias - mant_bits);
  return (b & 0x80) ? -mag : mag;
}
bool fp8_is_nan(KvFormat f, int b) {
  return f == KvFormat::FP8_E4M3 ? (b & 0x7F) == 0x7F : (b & 0x7C) == 0x7C && (b & 0x03) != 0;
}
bool fp8_is_inf(KvFormat f, int b) { return f == KvFormat::FP8_E5M2 && (b & 0x7F) == 0x7C; }

TEST(KvFormats, Fp8DecodesAsTheSpecificationSaysAndRoundTrips) {
  EXPECT_EQ(fp8_to_f32(KvFormat::FP8_E4M3, 0x7E), 448.0f);
  EXPECT_EQ(fp8_to_f32(KvFormat::FP8_E4M3, 0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_to_f32(KvFormat::FP8_E5M2, 0x7B), 57344.0f);
  EXPECT_EQ(fp8_to_f32(KvFormat::FP8_E5M2, 0x01), std::ldexp(1.0f, -16));
  for (KvFormat f : kFp8) {
    for (int b = 0; b < 256; ++b) {
      SCOPED_TRACE(b);
      const float v = fp8_to_f32(f, uint8_t(b));
      if (fp8_is_nan(f, b)) {
        EXPECT_TRUE(std::isnan(v));
        continue;
      }
      if (fp8_is_inf(f, b)) {
        EXPECT_TRUE(std::isinf(v));
        continue;
      }
      EXPECT_EQ(double(v), fp8_value(f, b));
      EXPECT_EQ(f32_to_fp8(f, v), uint8_t(b));  // every finite value encodes to itself (-0 included)
    }
    EXPECT_TRUE(std::isnan(fp8_to_f32(f, f32_to_fp8(f, std::numeric_limits<float>::quiet_NaN()))));
  }
}

TEST(KvFormats, Fp8RoundsToNearestEvenAndSaturates) {
  std::mt19937 rng(3);
  for (KvFormat f : kFp8) {
    const float max = f == KvFormat::FP8_E4M3 ? 448.0f : 57344.0f;
    std::vector<float> xs{max * 1.01f, max * 100.0f, std::numeric_limits<float>::infinity(), 1e-30f, 0.0f, -0.0f};
    std::uniform_real_distribution<float> u(-1.2f * max, 1.2f * max);
    std::uniform_real_distribution<float> lg(-20.0f, 4.0f);
    for (int i = 0; i < 20000; ++i) xs.push_back(i % 2 ? u(rng) : std::copysign(std::exp2(lg(rng)), u(rng)));
    // Exact midpoints between neighbours: ties go to the even code.
    for (int b = 0; b < 0x70; ++b) xs.push_back(float((fp8_value(f, b) + fp8_value(f, b + 1)) / 2));
    for (float x : xs) {
      for (float sx : {x, -x}) {
        const uint8_t got = f32_to_fp8(f, sx);
        // Brute force: the nearest finite code (ties: even mantissa), saturating beyond max.
        int best = -1;
        double best_d = 0;
        const double target = std::isinf(sx) ? std::copysign(double(max), sx) : double(sx);
        for (int b = 0; b < 256; ++b) {
          if (fp8_is_nan(f, b) || fp8_is_inf(f, b)) continue;
          if ((b & 0x80) != (std::signbit(target) ? 0x80 : 0)) continue;
          const double d = std::fabs(fp8_value(f, b) - target);
          if (best < 0 || d < best_d || (d == best_d && (b & 1) == 0)) best = b, best_d = d;
        }
        if (std::fabs(target) > max) best = (std::signbit(target) ? 0x80 : 0) | (f == KvFormat::FP8_E4M3 ? 0x7E : 0x7B);
        ASSERT_EQ(int(got), best) << "x = " << sx;
      }
    }
  }
}

// q8_0: every value within half a step of its block's scale; q4_0 within one step (the clamped
// code 7 on the side opposite the block's largest magnitude); NaN/Inf make the block NaN.
TEST(KvFormats, BlockFormatsRoundTripWithinTheirBounds) {
  std::mt19937 rng(9);
  std::normal_distribution<float> g(0.0f, 3.0f);
  for (KvFormat f : {KvFormat::Q8_0, KvFormat::Q4_0}) {
    const KvType t(f);
    std::vector<float> x(32 * 40), back(x.size());
    for (auto& v : x) v = g(rng);
    std::vector<uint8_t> enc(t.bytes(x.size()));
    kv_encode(t, x.data(), x.size(), enc.data());
    kv_decode(t, enc.data(), 0, x.size(), back.data());
    std::vector<float> fast(x.size());
    decode_kv_span(t, enc.data(), 0, x.size(), fast.data());
    const size_t bb = t.bytes(32);
    for (size_t b = 0; b < x.size() / 32; ++b) {
      uint16_t h;
      std::memcpy(&h, enc.data() + b * bb, 2);
      const double d = std::fabs(f16_to_f32(h));
      for (size_t j = b * 32; j < b * 32 + 32; ++j) {
        EXPECT_LE(std::fabs(double(x[j]) - back[j]), (f == KvFormat::Q8_0 ? 0.5 : 1.0) * d * (1 + 1e-6)) << j;
        EXPECT_EQ(f32_bits(back[j]), f32_bits(fast[j])) << j;
      }
    }
    // Part of a span: blocks 3..5.
    std::vector<float> part(96);
    kv_decode(t, enc.data(), 96, 96, part.data());
    EXPECT_EQ(0, std::memcmp(part.data(), back.data() + 96, 96 * 4));
    x[5] = std::numeric_limits<float>::infinity();
    kv_encode(t, x.data(), 64, enc.data());
    kv_decode(t, enc.data(), 0, 64, back.data());
    for (int j = 0; j < 32; ++j) EXPECT_TRUE(std::isnan(back[size_t(j)]));
    for (int j = 32; j < 64; ++j) EXPECT_FALSE(std::isnan(back[size_t(j)]));
  }
  EXPECT_EQ(parse_kv_type("q8_0")->format, KvFormat::Q8_0);
  EXPECT_EQ(parse_kv_type("half")->format, KvFormat::F16);
  EXPECT_FALSE(parse_kv_type("q9_0").has_value());
  EXPECT_EQ(KvType(KvFormat::FP8_E5M2).name(), "fp8_e5m2");
  EXPECT_EQ(KvType(KvFormat::Q4_0).bytes(64), 36u);
}

TEST(KvFormats, Fp8ScaleDividesOnTheWayInAndMultipliesOnTheWayOut) {
  const KvType t(KvFormat::FP8_E4M3, 4.0f);
  const float x[4] = {1000.0f, 1.5f, -3.0f, 2000.0f};
  uint8_t enc[4];
  float back[4];
  kv_encode(t, x, 4, enc);
  kv_decode(t, enc, 0, 4, back);
  EXPECT_EQ(back[0], 1024.0f);  // 1000 / 4 = 250 is not an E4M3 value; 256 is nearer than 240
  EXPECT_EQ(back[1], 1.5f);
  EXPECT_EQ(back[2], -3.0f);
  EXPECT_EQ(back[3], 448.0f * 4);  // saturated at max * scale
}

// The attention kernels decode FP8 tiles with vector code; it must give the table's values times
// the scale bit for bit (NaN payload and sign included) for every code, at every offset and length
// (vector body and scalar tail), and for scales that round the product.
TEST(KvFormats, VectorisedFp8DecodeIsBitwiseTheTablesValues) {
  std::vector<uint8_t> codes;
  for (int rep = 0; rep < 3; ++rep)
    for (int b = 0; b < 256; ++b) codes.push_back(uint8_t((b * 37 + rep * 11) & 0xFF));
  for (KvFormat f : kFp8)
    for (float scale : {1.0f, 4.0f, 0.3f, 1e-3f, 3.0e35f}) {
      const KvType t(f, scale);
      for (size_t first : {size_t(0), size_t(1), size_t(7), size_t(33)})
        for (size_t n : {size_t(1), size_t(15), size_t(16), size_t(17), size_t(64), codes.size() - first}) {
          if (first + n > codes.size()) continue;
          std::vector<float> fast(n), slow(n);
          decode_kv_span(t, codes.data(), first, n, fast.data());
          kv_decode(t, codes.data(), first, n, slow.data());
          for (size_t i = 0; i < n; ++i) {
            uint32_t a, b;
            std::memcpy(&a, &fast[i], 4);
            std::memcpy(&b, &slow[i], 4);
            ASSERT_EQ(a, b) << "code 0x" << std::hex << int(codes[first + i]) << std::dec << " scale " << scale
                            << " first " << first << " n " << n;
          }
        }
    }
}

ModelConfig kv_model_config() {
  ModelConfig c = synthetic_config("llama", "tiny");
  c.dim = 128;
  c.hidden_dim = 256;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 32;
  c.vocab_size = 256;
  c.max_seq_len = 64;
  return c;
}

const KvType kQuantisedKv[] = {KvType(KvFormat::Q8_0), KvType(KvFormat::Q4_0), KvType(KvFormat::FP8_E4M3),
                               KvType(KvFormat::FP8_E5M2)};

std::vector<std::vector<float>> step_logits(Engine& e, CacheMode mode, int n = 12) {
  GenerationConfig g;
  g.max_new_tokens = n;
  g.cache = mode;
  g.stop_at_eos = false;
  std::vector<std::vector<float>> out;
  e.generate({1, 17, 99, 5, 230, 42}, g, nullptr, [&](const StepInfo& s) { out.emplace_back(s.logits, s.logits + s.vocab); });
  return out;
}

bool same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t s = 0; s < a.size(); ++s)
    if (a[s].size() != b[s].size() || std::memcmp(a[s].data(), b[s].data(), a[s].size() * 4) != 0) return false;
  return true;
}

TEST(KvQuantEngine, UnwrittenSlotsNeverReadCacheOffUntouchedAndGapsReal) {
  const auto model = Model::from_checkpoint(synthesize_checkpoint(kv_model_config(), DType::F32, 11), DType::F16);
  for (KernelPolicy pol : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant}) {
    EngineOptions base;
    base.kernels = pol;
    base.kv_dtype = DType::F16;
    Engine plain(model, base);
    const auto ref_on = step_logits(plain, CacheMode::On), ref_off = step_logits(plain, CacheMode::Off);
    for (const KvType& kv : kQuantisedKv) {
      SCOPED_TRACE(policy_name(pol) + " " + kv.name());
      EngineOptions eo = base;
      eo.kv_dtype = kv;
      Engine clean(model, eo), poisoned(model, eo);
      poisoned.cache().poison();
      const auto a = step_logits(clean, CacheMode::On);
      // Poisoned slots (NaN blocks) must not matter: generate() clears the cache but not the bytes.
      EXPECT_TRUE(same_bits(a, step_logits(poisoned, CacheMode::On)));
      // Cache OFF has no cache: the quantised type leaves it exactly as with a float cache.
      EXPECT_TRUE(same_bits(ref_off, step_logits(clean, CacheMode::Off)));
      // The quantised cache changes the logits of the first step (the prefill attends over the
      // cache too; later steps may follow other tokens), and stays an approximation.
      double gap = 0, range = 0;
      for (size_t v = 0; v < a[0].size(); ++v) {
        gap = std::max(gap, double(std::fabs(a[0][v] - ref_on[0][v])));
        range = std::max(range, double(std::fabs(ref_on[0][v])));
      }
      std::cerr << kv.name() << " first-step max |dlogit| " << gap << " (max |logit| " << range << ")\n";
      EXPECT_GT(gap, 0.0);
      EXPECT_LT(gap, 0.5 * range);
    }
  }
}

TEST(KvQuantEngine, InvariantPolicyStaysBitwiseAcrossThreadsAndPathsWithinOneKvType) {
  const auto model = Model::from_checkpoint(synthesize_checkpoint(kv_model_config(), DType::F32, 12), DType::BF16);
  for (const KvType& kv : kQuantisedKv) {
    SCOPED_TRACE(kv.name());
    std::vector<std::vector<float>> first;
    for (int threads : {1, 2}) {
      for (int chunk : {0, 2}) {
        EngineOptions eo;
        eo.kernels = KernelPolicy::Invariant;
        eo.threads = threads;
        eo.kv_dtype = kv;
        eo.prefill_chunk = chunk;
        Engine e(model, eo);
        const auto l = step_logits(e, CacheMode::On);
        if (first.empty())
          first = l;
        else
          EXPECT_TRUE(same_bits(first, l)) << "threads " << threads << " chunk " << chunk;
      }
    }
  }
}

TEST(KvQuantEngine, BlockFormatsNeedHeadDimInWholeBlocks) {
  ModelConfig c = kv_model_config();
  c.head_dim = 8;
  c.dim = 32;
  const auto model = Model::from_checkpoint(synthesize_checkpoint(c, DType::F32, 1), DType::F32);
  EngineOptions eo;
  eo.kv_dtype = KvType(KvFormat::Q8_0);
  try {
    Engine e(model, eo);
    ADD_FAILURE() << "no error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("head_dim is 8"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("q8_0"), std::string::npos) << err.what();
  }
  eo.kv_dtype = KvType(KvFormat::FP8_E4M3);  // one byte per value: any head_dim
  EXPECT_NO_THROW({ Engine ok(model, eo); });
}

}  // namespace
}  // namespace kvp
