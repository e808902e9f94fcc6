// YaRN RoPE scaling (rope_type "yarn": OLMo-3's published configs, and the one Qwen2.5/Qwen3's model
// cards tell users to add for long contexts), as transformers' _compute_yarn_parameters computes it:
// the correction range against Python's own numbers, frequencies below it untouched and above it
// interpolated, a ramp between, cos/sin times the attention factor; config.json's fields and their
// defaults (v5's), the v5 rope_parameters form, a written config read back, inspect, and the
// refusals (GGUF, bad values).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "io/hf_config.h"
#include "kernels/elementwise.h"
#include "lab/model_inspection.h"
#include "model/checkpoint_export.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

using nlohmann::json;

RopeScalingSpec yarn_spec(float factor, int original, double attention_factor = 1.0) {
  RopeScalingSpec s;
  s.type = RopeScalingSpec::Type::Yarn;
  s.factor = factor;
  s.original_max_pos = original;
  s.attention_factor = attention_factor;
  return s;
}

// find_correction_range's numbers as Python computes them (math.log, floor, ceil, clamped to
// [0, dim - 1]): OLMo-3 7B's, a 1e6-base model's, and the tiny synthetic OLMo-3's (below 0).
TEST(Yarn, CorrectionRangeIsPythons) {
  struct Case {
    int hd;
    float theta;
    int orig;
    double low, high, low_untruncated, high_untruncated;
  };
  const Case cases[] = {{128, 500000.0f, 8192, 18, 35, 18.081135034337585, 34.98411900147241},
                        {128, 1000000.0f, 32768, 23, 40, 23.5959476083381, 39.6508807104171},
                        {16, 500000.0f, 64, 0, 2, 0.0, 1.4149926809354574}};
  for (const Case& c : cases) {
    RopeScalingSpec s = yarn_spec(8.0f, c.orig);
    for (bool portable : {false, true}) {
      const YarnRange r = yarn_correction_range(c.hd, c.theta, s, portable);
      EXPECT_EQ(r.low, c.low) << c.hd << " " << c.theta;
      EXPECT_EQ(r.high, c.high) << c.hd << " " << c.theta;
    }
    s.truncate = false;
    const YarnRange u = yarn_correction_range(c.hd, c.theta, s);
    EXPECT_NEAR(u.low, c.low_untruncated, 1e-12);
    EXPECT_NEAR(u.high, c.high_untruncated, 1e-12);
  }
}

// Below the range a frequency is the plain one (bit for bit: the ramp is 0), above it the
// interpolated 1 / (factor * theta^(2i/d)), between them a blend that falls monotonically.
TEST(Yarn, FrequenciesAreExtrapolatedBelowTheRangeAndInterpolatedAboveIt) {
  const int hd = 128;
  const float theta = 500000.0f;
  const std::vector<float> plain = rope_inv_freq(hd, theta, {});
  const std::vector<float> yarn = rope_inv_freq(hd, theta, yarn_spec(8.0f, 8192));
  ASSERT_EQ(yarn.size(), size_t(hd / 2));
  for (int i = 0; i < hd / 2; ++i) {
    const float interpolated = 1.0f / (8.0f * std::pow(theta, float(2 * i) / float(hd)));
    if (i <= 18) {
      EXPECT_EQ(yarn[size_t(i)], plain[size_t(i)]) << i;
    } else if (i >= 35) {
      EXPECT_EQ(yarn[size_t(i)], interpolated) << i;
    } else {
      EXPECT_LT(yarn[size_t(i)], plain[size_t(i)]) << i;
      EXPECT_GT(yarn[size_t(i)], interpolated) << i;
      EXPECT_LT(yarn[size_t(i)], yarn[size_t(i - 1)]) << i;
    }
  }
  // The ramp's midpoint (i = 26.5 is between 26 and 27): the blend there is about half of each.
  const float t = (26.0f - 18.0f) / 17.0f;
  const float want = (1.0f / (8.0f * std::pow(theta, 52.0f / 128.0f))) * t + plain[26] * (1.0f - t);
  EXPECT_NEAR(yarn[26], want, 1e-6f * plain[26]);
}

// OLMo-3 7B's frequencies across the ramp, with the portable power (the same bits on every
// machine), against a numpy fp32 replay of _compute_yarn_parameters (each torch op rounded to
// fp32, pow correctly rounded), which gave these values and all 64 others equal, truncated or not.
TEST(Yarn, Olmo3FrequenciesAreTheFp32ReplayOfTransformers) {
  RopeScalingSpec s = yarn_spec(8.0f, 8192);
  const struct {
    int i;
    float truncated, untruncated;
  } want[] = {{18, 0x1.98de92p-6f, 0x1.98de92p-6f},
              {19, 0x1.3bedbcp-6f, 0x1.3d3aaap-6f},
              {26, 0x1.752006p-9f, 0x1.764a44p-9f},
              {34, 0x1.5b50d2p-13f, 0x1.5a4778p-13f},
              {35, 0x1.90d10cp-14f, 0x1.90d10cp-14f}};
  const std::vector<float> t = rope_inv_freq(128, 500000.0f, s, true);
  s.truncate = false;
  const std::vector<float> u = rope_inv_freq(128, 500000.0f, s, true);
  for (const auto& w : want) {
    EXPECT_EQ(t[size_t(w.i)], w.truncated) << w.i;
    EXPECT_EQ(u[size_t(w.i)], w.untruncated) << w.i;
  }
}

// cos and sin carry the attention factor, multiplied in fp32 after the angle's cos/sin; the
// portable twin computes the same rows from portable_math (equal to libm's here but for last bits).
TEST(Yarn, TableRowsCarryTheAttentionFactor) {
  const int hd = 64;
  const double af = 0.1 * std::log(8.0) + 1.0;
  const RopeScalingSpec s = yarn_spec(8.0f, 256, af);
  const RopeTable t(hd, 1024, 500000.0f, s);
  const std::vector<float> inv = rope_inv_freq(hd, 500000.0f, s);
  for (int pos : {0, 1, 300, 1023}) {
    for (int i = 0; i < hd / 2; ++i) {
      const double angle = double(float(pos) * inv[size_t(i)]);
      EXPECT_EQ(t.cos_row(pos)[i], float(std::cos(angle)) * float(af)) << pos << " " << i;
      EXPECT_EQ(t.sin_row(pos)[i], float(std::sin(angle)) * float(af)) << pos << " " << i;
      EXPECT_NEAR(t.portable().cos_row(pos)[i], t.cos_row(pos)[i], 1e-6f);
    }
  }
  // Another scaling type ignores the field.
  RopeScalingSpec lin;
  lin.type = RopeScalingSpec::Type::Linear;
  lin.factor = 2.0f;
  lin.attention_factor = 3.0;
  EXPECT_EQ(RopeTable(hd, 8, 10000.0f, lin).cos_row(0)[0], 1.0f);
}

const char* kQwen3 = R"({"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","hidden_size":64,
  "intermediate_size":160,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,
  "vocab_size":512,"max_position_embeddings":40960,"rope_theta":1000000.0)";

ModelConfig qwen3_with(const std::string& rope_scaling) {
  return parse_hf_config(std::string(kQwen3) + R"(,"rope_scaling":)" + rope_scaling + "}", "config.json");
}

// The fields as transformers v5 reads them: factor as given, the attention factor derived from it
// when absent (or DeepSeek's mscale ratio), beta 32 / 1 for absent or 0 values, truncate.
TEST(Yarn, ConfigFieldsAndTheirDefaults) {
  // Qwen3's model card's addition: factor 4 over 32768, whatever max_position_embeddings says.
  ModelConfig c = qwen3_with(R"({"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768})");
  EXPECT_EQ(c.rope_scaling, ModelConfig::RopeScaling::Yarn);
  EXPECT_EQ(c.rope_factor, 4.0f);
  EXPECT_EQ(c.rope_original_max_pos, 32768);
  EXPECT_DOUBLE_EQ(c.rope_attention_factor, 0.1 * std::log(4.0) + 1.0);
  EXPECT_EQ(c.rope_yarn_beta_fast, 32.0);
  EXPECT_EQ(c.rope_yarn_beta_slow, 1.0);
  EXPECT_TRUE(c.rope_yarn_truncate);
  // No factor: max_position_embeddings / original_max_position_embeddings.
  c = qwen3_with(R"({"type":"yarn","original_max_position_embeddings":32768})");
  EXPECT_EQ(c.rope_factor, 1.25f);
  // No original context: max_position_embeddings.
  c = qwen3_with(R"({"rope_type":"yarn","factor":2.0})");
  EXPECT_EQ(c.rope_original_max_pos, 40960);
  // Given values win; 0 betas are the defaults (`get("beta_fast") or 32`).
  c = qwen3_with(R"({"rope_type":"yarn","factor":8.0,"attention_factor":1.5,"beta_fast":16,"beta_slow":0,"truncate":false})");
  EXPECT_EQ(c.rope_attention_factor, 1.5);
  EXPECT_EQ(c.rope_yarn_beta_fast, 16.0);
  EXPECT_EQ(c.rope_yarn_beta_slow, 1.0);
  EXPECT_FALSE(c.rope_yarn_truncate);
  // mscale and mscale_all_dim both given: their get_mscale ratio.
  c = qwen3_with(R"({"rope_type":"yarn","factor":40.0,"mscale":1.0,"mscale_all_dim":0.5})");
  EXPECT_DOUBLE_EQ(c.rope_attention_factor, (0.1 * std::log(40.0) + 1.0) / (0.05 * std::log(40.0) + 1.0));
  // A factor up to 1 takes no attention factor.
  EXPECT_EQ(qwen3_with(R"({"rope_type":"yarn","factor":1.0})").rope_attention_factor, 1.0);
}

TEST(Yarn, BadValuesAndUnsupportedPlacesAreRefusedByField) {
  auto error_of = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  struct Case {
    std::string rope_scaling;
    std::vector<std::string> want;
  };
  const Case cases[] = {
      {R"({"rope_type":"yarn","factor":0})", {"factor", "rope_scaling.factor"}},
      {R"({"rope_type":"yarn","factor":"4"})", {"factor", "rope_scaling.factor"}},
      {R"({"rope_type":"yarn","factor":4,"original_max_position_embeddings":-1})",
       {"original_max_position_embeddings", "rope_scaling"}},
      {R"({"rope_type":"yarn","factor":4,"original_max_position_embeddings":100.5})",
       {"original_max_position_embeddings"}},
      {R"({"rope_type":"yarn","factor":4,"attention_factor":-1})", {"attention_factor"}},
      {R"({"rope_type":"yarn","factor":4,"beta_fast":-3})", {"beta_fast"}},
      {R"({"rope_type":"yarn","factor":4,"truncate":1})", {"truncate", "rope_scaling.truncate"}},
      {R"({"rope_type":"dynamic","factor":4})", {"'dynamic'", "rope_scaling"}},
  };
  for (const Case& c : cases) {
    const std::string e = error_of([&] { qwen3_with(c.rope_scaling); });
    for (const std::string& w : c.want) EXPECT_NE(e.find(w), std::string::npos) << c.rope_scaling << ": " << e;
  }
  // Gemma-2 takes no scaling.
  const std::string gemma2 = R"({"architectures":["Gemma2ForCausalLM"],"model_type":"gemma2","hidden_size":64,
    "intermediate_size":160,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,
    "vocab_size":512,"max_position_embeddings":512,"rope_scaling":{"rope_type":"yarn","factor":4.0}})";
  const std::string e = error_of([&] { parse_hf_config(gemma2, "config.json"); });
  EXPECT_NE(e.find("'yarn' is not supported for gemma2"), std::string::npos) << e;
}

// transformers v5's rope_parameters dict reads as the v4 fields.
TEST(Yarn, V5RopeParametersReadAsRopeScaling) {
  std::string v5 = kQwen3;
  v5.erase(v5.find(R"(,"rope_theta":1000000.0)"));
  v5 += R"(,"rope_parameters":{"rope_type":"yarn","rope_theta":1000000.0,"factor":4.0,"original_max_position_embeddings":32768}})";
  const ModelConfig a = parse_hf_config(v5, "config.json");
  const ModelConfig b = qwen3_with(R"({"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768})");
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_scaling, ModelConfig::RopeScaling::Yarn);
  EXPECT_EQ(a.rope_factor, b.rope_factor);
  EXPECT_EQ(a.rope_original_max_pos, b.rope_original_max_pos);
  EXPECT_EQ(a.rope_attention_factor, b.rope_attention_factor);
}

// A YaRN Qwen3 written as an HF directory reads back with every field, runs, and differs from the
// same weights unscaled once positions pass the frequencies YaRN moves; GGUF has no form for it.
TEST(Yarn, WrittenConfigReadsBackAndTheScalingMovesTheLogits) {
  test::TempDir tmp;
  ModelConfig c = synthetic_config("qwen3", "tiny");
  c.rope_scaling = ModelConfig::RopeScaling::Yarn;
  c.rope_factor = 4.0f;
  c.rope_original_max_pos = 32;
  c.rope_attention_factor = 1.25;
  c.rope_yarn_beta_fast = 16.0;
  c.rope_yarn_truncate = false;
  const Checkpoint ck = synthesize_checkpoint(c, DType::F32, 11);
  const std::string dir = tmp.file("hf");
  export_checkpoint(ck, "hf", dir);
  const Checkpoint back = open_checkpoint(dir);
  EXPECT_EQ(back.config.rope_scaling, ModelConfig::RopeScaling::Yarn);
  EXPECT_EQ(back.config.rope_factor, 4.0f);
  EXPECT_EQ(back.config.rope_original_max_pos, 32);
  EXPECT_EQ(back.config.rope_attention_factor, 1.25);
  EXPECT_EQ(back.config.rope_yarn_beta_fast, 16.0);
  EXPECT_EQ(back.config.rope_yarn_beta_slow, 1.0);
  EXPECT_FALSE(back.config.rope_yarn_truncate);
  InspectOptions io;
  io.model = dir;
  const std::string text = inspect_text(inspect_model(io));
  EXPECT_NE(text.find("yarn scaling x4 (original context 32, cos/sin x 1.25, beta 16 / 1, untruncated)"),
            std::string::npos)
      << text;

  std::vector<int> toks(40);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = int(3 + (i * 37) % 500);
  auto logits = [&](const Checkpoint& k) {
    Engine e(Model::from_checkpoint(k, DType::F32), EngineOptions{});
    const float* l = e.forward(toks.data(), int(toks.size()), 0, ForwardOptions{});
    return std::vector<float>(l, l + toks.size() * size_t(k.config.vocab_size));
  };
  ModelConfig plain_cfg = c;
  plain_cfg.rope_scaling = ModelConfig::RopeScaling::None;
  Checkpoint plain = ck;
  plain.config = plain_cfg;
  EXPECT_EQ(logits(back), logits(ck));
  EXPECT_GT(test::max_abs_diff(logits(ck), logits(plain)), 1e-3);
  try {
    export_checkpoint(ck, "gguf", tmp.file("y.gguf"));
    ADD_FAILURE() << "a YaRN model written as GGUF";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("YaRN"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvp
