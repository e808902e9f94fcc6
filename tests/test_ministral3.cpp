// Ministral 3 (Ministral3ForCausalLM, and the text model of the 2512 series' Mistral3 checkpoints):
// Mistral's decoder, YaRN, and Llama-4's query temperature 1 + beta ln(1 + floor(pos / C)) on the
// rotated queries. Config defaults (Ministral3Config's, for a sparse text_config too), the factor
// itself, queries below C untouched bit for bit and above it the product rounded once, the logits
// of rows before C those of the same model without it, the cached and recomputed paths equal under
// `invariant`, and config.json written back.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "cache_paths.h"
#include "core/dtype.h"
#include "io/checkpoint.h"
#include "io/hf_config.h"
#include "lab/model_inspection.h"
#include "model/checkpoint_export.h"
#include "model/model.h"
#include "ministral3_tiny.h"
#include "model/synthetic.h"
#include "reference_files.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

using nlohmann::json;

using test::tiny_ministral3;

TEST(Ministral3Config, TheClassDefaultsAndTheV5Form) {
  // A Mistral3ForConditionalGeneration whose text_config says only what differs from Ministral3Config.
  const ModelConfig w = parse_hf_config(R"({"architectures":["Mistral3ForConditionalGeneration"],"model_type":"mistral3",
      "text_config":{"model_type":"ministral3","hidden_size":3072,"intermediate_size":9216,"num_hidden_layers":26,
        "tie_word_embeddings":true},"vision_config":{"model_type":"pixtral"}})",
                                        "config.json");
  EXPECT_EQ(w.arch, Arch::Mistral);
  EXPECT_EQ(w.dim, 3072);
  EXPECT_EQ(w.head_dim, 128);
  EXPECT_EQ(w.vocab_size, 131072);
  EXPECT_EQ(w.max_seq_len, 262144);
  EXPECT_EQ(w.sliding_window, 0);
  EXPECT_FLOAT_EQ(w.norm_eps, 1e-5f);
  EXPECT_EQ(w.rope_theta, 1000000.0f);
  EXPECT_EQ(w.rope_scaling, ModelConfig::RopeScaling::Yarn);
  EXPECT_EQ(w.rope_factor, 16.0f);
  EXPECT_EQ(w.rope_original_max_pos, 16384);
  EXPECT_EQ(w.rope_attention_factor, 1.0);  // mscale / mscale_all_dim, 1 / 1
  EXPECT_EQ(w.query_temperature_beta, 0.1f);
  EXPECT_EQ(w.query_temperature_context, 16384);
  // Standalone, as transformers v5 saves it: the beta inside rope_parameters.
  const ModelConfig s = parse_hf_config(R"({"architectures":["Ministral3ForCausalLM"],"model_type":"ministral3",
      "hidden_size":64,"intermediate_size":160,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
      "head_dim":16,"vocab_size":512,"max_position_embeddings":4096,
      "rope_parameters":{"rope_type":"yarn","rope_theta":1000000.0,"factor":16.0,"original_max_position_embeddings":256,
        "max_position_embeddings":4096,"beta_fast":32.0,"beta_slow":1.0,"mscale":1.0,"mscale_all_dim":1.0,
        "llama_4_scaling_beta":0.2}})",
                                        "config.json");
  EXPECT_EQ(s.query_temperature_beta, 0.2f);
  EXPECT_EQ(s.query_temperature_context, 256);
  EXPECT_EQ(s.rope_original_max_pos, 256);
  // The published 8B shape is the synth preset's.
  const ModelConfig p = synthetic_config("", "ministral3-8b");
  EXPECT_EQ(p.query_temperature_beta, w.query_temperature_beta);
  EXPECT_EQ(p.rope_factor, w.rope_factor);
  InspectOptions io;
  io.synth = "ministral3-8b";
  const json d = inspect_model(io);
  EXPECT_GT(d["parameters"]["total"].get<double>(), 8.0e9);  // Ministral 3 8B: 8.4 billion without vision
  EXPECT_LT(d["parameters"]["total"].get<double>(), 8.9e9);
  const std::string text = inspect_text(d);
  EXPECT_NE(text.find("queries x (1 + 0.1 ln(1 + floor(pos / 16384)))"), std::string::npos) << text;
  // Bad values are refused by field.
  for (const auto& [rope, want] :
       {std::pair{R"({"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":64,"llama_4_scaling_beta":-1})",
                  "llama_4_scaling_beta"},
        std::pair{R"({"rope_type":"default","llama_4_scaling_beta":0.1})", "original_max_position_embeddings"}}) {
    const std::string e = test::error_of([&, r = std::string(rope)] {
      parse_hf_config(R"({"model_type":"ministral3","hidden_size":64,"intermediate_size":160,"num_hidden_layers":2,
          "num_attention_heads":4,"vocab_size":512,"max_position_embeddings":512,"rope_scaling":)" + r + "}",
                      "config.json");
    });
    EXPECT_NE(e.find(want), std::string::npos) << e;
  }
}

TEST(Ministral3, TheTemperatureIsOneBelowItsContextAndTorchsFp32Above) {
  const ModelConfig c = tiny_ministral3(0.1f);
  for (int pos : {0, 1, 7}) EXPECT_EQ(c.query_temperature(pos), 1.0f) << pos;
  EXPECT_EQ(c.query_temperature(8), 1.0f + 0.1f * float(std::log(2.0)));
  EXPECT_EQ(c.query_temperature(15), c.query_temperature(8));
  EXPECT_EQ(c.query_temperature(24), 1.0f + 0.1f * float(std::log(4.0)));
  EXPECT_EQ(tiny_ministral3(0.0f).query_temperature(1000), 1.0f);
}

// Records the rotated queries (what attention reads), per layer.
struct QueryCapture final : ForwardHooks {
  std::map<int, std::vector<float>> q;
  bool wants(HookPoint p, int) const override { return p == HookPoint::Q; }
  bool writes(HookPoint, int) const override { return false; }
  void on(const HookSite& s, float* d) override { q[s.layer] = std::vector<float>(d, d + size_t(s.rows) * s.width); }
};

TEST(Ministral3, QueriesPastTheContextAreScaledAndTheRowsBeforeItAreUntouched) {
  std::vector<int> toks(30);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = int(3 + (i * 41) % 500);
  const ModelConfig with = tiny_ministral3(0.1f), without = tiny_ministral3(0.0f);
  const Checkpoint a = synthesize_checkpoint(with, DType::F32, 3), b = synthesize_checkpoint(without, DType::F32, 3);
  const size_t V = size_t(with.vocab_size), qd = size_t(with.q_dim());
  for (DType dt : {DType::F32, DType::BF16}) {
    QueryCapture qa, qb;
    Engine ea(Model::from_checkpoint(a, dt), EngineOptions{}), eb(Model::from_checkpoint(b, dt), EngineOptions{});
    ForwardOptions fa, fb;
    fa.hooks = &qa;
    fb.hooks = &qb;
    const float* la = ea.forward(toks.data(), int(toks.size()), 0, fa);
    const std::vector<float> logits_a(la, la + toks.size() * V);
    const float* lb = eb.forward(toks.data(), int(toks.size()), 0, fb);
    const std::vector<float> logits_b(lb, lb + toks.size() * V);
    // Layer 0's queries are computed from the same input: below C the same bits, at and past it
    // round(q x round(f)).
    const std::vector<float>& q1 = qa.q.at(0);
    const std::vector<float>& q0 = qb.q.at(0);
    for (size_t m = 0; m < toks.size(); ++m) {
      const float f = round_to(dt, with.query_temperature(int(m)));
      for (size_t i = 0; i < qd; ++i) {
        const size_t at = m * qd + i;
        ASSERT_EQ(q1[at], m < 8 ? q0[at] : round_to(dt, q0[at] * f)) << dtype_name(dt) << " row " << m << " " << i;
      }
    }
    // The logits of the rows before C are the unscaled model's; past it they move.
    EXPECT_EQ(std::vector<float>(logits_a.begin(), logits_a.begin() + 8 * V),
              std::vector<float>(logits_b.begin(), logits_b.begin() + 8 * V))
        << dtype_name(dt);
    EXPECT_GT(test::max_abs_diff(logits_a, logits_b), 1e-3) << dtype_name(dt);
  }
  for (DType dt : {DType::BF16, DType::F16}) test::expect_invariant_cache_paths_agree(a, dt, toks, 5);
}

TEST(Ministral3, ConfigJsonIsWrittenBackAsMinistral3) {
  test::TempDir tmp;
  const Checkpoint ck = synthesize_checkpoint(tiny_ministral3(0.1f), DType::F32, 3);
  export_checkpoint(ck, "hf", tmp.file("hf"));
  const json cfg = test::read_json(tmp.file("hf") + "/config.json");
  EXPECT_EQ(cfg["model_type"], "ministral3");
  EXPECT_EQ(cfg["architectures"], json({"Ministral3ForCausalLM"}));
  EXPECT_EQ(cfg["rope_scaling"]["llama_4_scaling_beta"], 0.1);
  EXPECT_EQ(cfg["rope_scaling"]["rope_type"], "yarn");
  const Checkpoint back = open_checkpoint(tmp.file("hf"));
  EXPECT_EQ(back.read_from, "Ministral3ForCausalLM");
  EXPECT_EQ(back.config.query_temperature_beta, 0.1f);
  EXPECT_EQ(back.config.query_temperature_context, 8);
  std::vector<int> toks(20);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = int(7 + i * 13);
  Engine e1(Model::from_checkpoint(ck, DType::BF16), EngineOptions{}), e2(Model::from_checkpoint(back, DType::BF16), EngineOptions{});
  const float* l1 = e1.forward(toks.data(), 20, 0, ForwardOptions{});
  const std::vector<float> a(l1, l1 + 20 * size_t(ck.config.vocab_size));
  const float* l2 = e2.forward(toks.data(), 20, 0, ForwardOptions{});
  EXPECT_EQ(a, std::vector<float>(l2, l2 + 20 * size_t(ck.config.vocab_size)));
}

}  // namespace
}  // namespace kvp
