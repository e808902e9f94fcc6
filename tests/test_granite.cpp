// Granite (GraniteForCausalLM; src/io/hf_llama_variants.h): Llama's decoder with four multipliers,
// each a Python float applied in fp32 and rounded to the compute dtype. The Llama reference
// re-packed as Granite with neutral multipliers (scores x 1/4 = / sqrt(16), exactly) is the same
// model bit for bit; with the published models' multipliers, every one acts where transformers
// applies it (checked through the hook points around it, bit for bit, in bf16), the cached and
// recomputed paths agree under `invariant`, and both converters keep them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cache_paths.h"
#include "io/checkpoint.h"
#include "io/hf_config.h"
#include "lab/model_inspection.h"
#include "model/checkpoint_export.h"
#include "model/model.h"
#include "reference_files.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

using nlohmann::json;

// The Llama reference (head_dim 16) as GraniteForCausalLM with these multipliers.
std::string write_granite(const std::string& ref, const std::string& dir, double embedding, double attention,
                          double residual, double logits) {
  std::filesystem::create_directories(dir);
  std::filesystem::create_symlink(std::filesystem::absolute(ref + "/model.safetensors"), dir + "/model.safetensors");
  json cfg = test::read_json(ref + "/config.json");
  cfg["architectures"] = {"GraniteForCausalLM"};
  cfg["model_type"] = "granite";
  cfg.erase("pretraining_tp");
  cfg.update({{"embedding_multiplier", embedding},
              {"attention_multiplier", attention},
              {"residual_multiplier", residual},
              {"logits_scaling", logits}});
  std::ofstream(dir + "/config.json") << cfg.dump(2);
  return dir;
}

std::vector<float> granite_logits(const Checkpoint& ck, DType dt, const std::vector<int>& tokens,
                             ForwardHooks* hooks = nullptr) {
  Engine engine(Model::from_checkpoint(ck, dt), EngineOptions{});
  ForwardOptions fo;
  fo.hooks = hooks;
  const float* l = engine.forward(tokens.data(), int(tokens.size()), 0, fo);
  return {l, l + tokens.size() * size_t(ck.config.vocab_size)};
}

TEST(Granite, NeutralMultipliersAreLlamaBitForBit) {
  KVP_REQUIRE_REFERENCE(ref, "llama");
  test::TempDir tmp;
  const Checkpoint plain = open_checkpoint(ref);
  const Checkpoint g = open_checkpoint(write_granite(ref, tmp.file("g"), 1.0, 0.25, 1.0, 1.0));
  EXPECT_EQ(g.read_from, "GraniteForCausalLM");
  EXPECT_EQ(g.config.attention_multiplier, 0.25f);
  const auto tokens = test::read_json(ref + "/tokens.json")["input_ids"].get<std::vector<int>>();
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    EXPECT_EQ(granite_logits(plain, dt, tokens), granite_logits(g, dt, tokens)) << dtype_name(dt);
  EXPECT_LE(test::max_abs_diff(granite_logits(g, DType::F32, tokens), test::read_f32(ref + "/logits.f32")), 1e-4);
}

// Records the residual stream and the blocks' outputs (as the modules return them).
struct StreamCapture final : ForwardHooks {
  std::map<std::pair<int, int>, std::vector<float>> rows;  // (point, layer)
  bool wants(HookPoint p, int) const override {
    return p == HookPoint::Embed || p == HookPoint::ResidPre || p == HookPoint::AttnOut || p == HookPoint::ResidMid ||
           p == HookPoint::MlpOut || p == HookPoint::ResidPost;
  }
  bool writes(HookPoint, int) const override { return false; }
  void on(const HookSite& s, float* d) override {
    rows[{int(s.point), s.layer}] = std::vector<float>(d, d + size_t(s.rows) * s.width);
  }
  const std::vector<float>& at(HookPoint p, int l) const { return rows.at({int(p), l}); }
};

TEST(Granite, EachMultiplierActsWhereTransformersAppliesIt) {
  KVP_REQUIRE_REFERENCE(ref, "llama");
  test::TempDir tmp;
  // granite-3.x-2b's embedding and residual multipliers, its logits_scaling, and 1/64 for the scores.
  const Checkpoint g = open_checkpoint(write_granite(ref, tmp.file("g"), 12.0, 0.015625, 0.22, 8.0));
  const Checkpoint unscaled_embed = open_checkpoint(write_granite(ref, tmp.file("e"), 1.0, 0.015625, 0.22, 8.0));
  const Checkpoint unscaled_logits = open_checkpoint(write_granite(ref, tmp.file("l"), 12.0, 0.015625, 0.22, 1.0));
  const auto tokens = test::read_json(ref + "/tokens.json")["input_ids"].get<std::vector<int>>();
  for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
    StreamCapture s, e;
    const std::vector<float> logits = granite_logits(g, dt, tokens, &s);
    granite_logits(unscaled_embed, dt, tokens, &e);
    // embed x 12 (a Python float: fp32), rounded once.
    const auto& emb = s.at(HookPoint::Embed, -1);
    const auto& raw = e.at(HookPoint::Embed, -1);
    ASSERT_EQ(emb.size(), raw.size());
    for (size_t i = 0; i < emb.size(); ++i) ASSERT_EQ(emb[i], round_to(dt, raw[i] * 12.0f)) << dtype_name(dt) << " " << i;
    // Each residual add takes the block's output x 0.22 (fp32), rounded, then rounds the sum.
    for (int l = 0; l < g.config.n_layers; ++l)
      for (auto [in, out, block] : {std::tuple{HookPoint::ResidPre, HookPoint::ResidMid, HookPoint::AttnOut},
                                    std::tuple{HookPoint::ResidMid, HookPoint::ResidPost, HookPoint::MlpOut}}) {
        const auto &a = s.at(in, l), &b = s.at(out, l), &y = s.at(block, l);
        for (size_t i = 0; i < a.size(); ++i)
          ASSERT_EQ(b[i], round_to(dt, a[i] + round_to(dt, y[i] * 0.22f))) << dtype_name(dt) << " layer " << l;
      }
    // logits / 8, rounded (exact but where a quotient falls below fp16's normal range).
    std::vector<float> divided = granite_logits(unscaled_logits, dt, tokens);
    for (float& x : divided) x = round_to(dt, x / 8.0f);
    EXPECT_EQ(logits, divided) << dtype_name(dt);
  }
  // The score multiplier is read: 1/64 is another model than 1/4 (Llama's 1/sqrt(16)).
  const Checkpoint quarter = open_checkpoint(write_granite(ref, tmp.file("q"), 12.0, 0.25, 0.22, 8.0));
  EXPECT_GT(test::max_abs_diff(granite_logits(g, DType::F32, tokens), granite_logits(quarter, DType::F32, tokens)), 1e-4);
}

TEST(Granite, CachedAndRecomputedStepsAgreeUnderInvariant) {
  KVP_REQUIRE_REFERENCE(ref, "llama");
  test::TempDir tmp;
  const Checkpoint g = open_checkpoint(write_granite(ref, tmp.file("g"), 12.0, 0.015625, 0.22, 8.0));
  const std::vector<int> toks{1, 5, 77, 300, 12, 8, 91, 140, 2, 64};
  for (DType dt : {DType::F32, DType::BF16}) test::expect_invariant_cache_paths_agree(g, dt, toks, 4);
}

TEST(Granite, BothConvertersKeepTheMultipliers) {
  KVP_REQUIRE_REFERENCE(ref, "llama");
  test::TempDir tmp;
  const Checkpoint g = open_checkpoint(write_granite(ref, tmp.file("g"), 12.0, 0.015625, 0.22, 8.0));
  const auto tokens = test::read_json(ref + "/tokens.json")["input_ids"].get<std::vector<int>>();
  export_checkpoint(g, "hf", tmp.file("hf"), ExportOptions{});
  const json cfg = test::read_json(tmp.file("hf/config.json"));
  EXPECT_EQ(cfg["architectures"][0], "GraniteForCausalLM");
  EXPECT_EQ(cfg["embedding_multiplier"], 12.0);
  EXPECT_EQ(cfg["attention_multiplier"], 0.015625);
  EXPECT_EQ(cfg["residual_multiplier"], 0.22);
  EXPECT_EQ(cfg["logits_scaling"], 8.0);
  export_checkpoint(g, "gguf", tmp.file("g.gguf"), ExportOptions{});
  const Checkpoint gg = open_checkpoint(tmp.file("g.gguf"));
  EXPECT_EQ(gg.read_from, "GraniteForCausalLM");
  EXPECT_EQ(gg.qk_layout, RopeLayout::Interleaved);
  for (const Checkpoint* back : {static_cast<const Checkpoint*>(nullptr), &gg}) {
    const Checkpoint hf = open_checkpoint(tmp.file("hf"));
    const Checkpoint& b = back == nullptr ? hf : *back;
    EXPECT_EQ(std::tie(b.config.embedding_multiplier, b.config.attention_multiplier, b.config.residual_multiplier,
                       b.config.logits_scaling),
              std::make_tuple(12.0f, 0.015625f, 0.22f, 8.0f));
    EXPECT_EQ(granite_logits(g, DType::F32, tokens), granite_logits(b, DType::F32, tokens)) << b.format;
  }
  InspectOptions io;
  io.model = tmp.file("g");
  const json d = inspect_model(io);
  EXPECT_EQ(d["attention"]["score_scale_of"], "attention_multiplier");
  EXPECT_EQ(d["multipliers"]["residual"], 0.22f);
  const std::string text = inspect_text(d);
  EXPECT_NE(text.find("scores x 0.015625 (attention_multiplier)"), std::string::npos) << text;
  EXPECT_NE(text.find("embedding x 12, each block's output x 0.22 before its residual add, logits / 8"),
            std::string::npos)
      << text;
}

TEST(GraniteConfig, APublishedConfigReadsAsItsModelAndWhatItCannotRunIsRefused) {
  // ibm-granite/granite-3.1-2b-instruct-shaped config.json.
  const json j = json::parse(R"({"architectures":["GraniteForCausalLM"],"attention_bias":false,
    "attention_dropout":0.1,"attention_multiplier":0.015625,"bos_token_id":0,"embedding_multiplier":12.0,
    "eos_token_id":0,"hidden_act":"silu","hidden_size":2048,"initializer_range":0.02,"intermediate_size":8192,
    "logits_scaling":8.0,"max_position_embeddings":131072,"mlp_bias":false,"model_type":"granite",
    "num_attention_heads":32,"num_hidden_layers":40,"num_key_value_heads":8,"pad_token_id":0,
    "residual_multiplier":0.22,"rms_norm_eps":1e-05,"rope_scaling":null,"rope_theta":5000000.0,
    "tie_word_embeddings":true,"torch_dtype":"bfloat16","use_cache":true,"vocab_size":49155})");
  std::string from;
  const ModelConfig c = parse_hf_config(j.dump(), "config.json", nullptr, nullptr, &from);
  EXPECT_EQ(from, "GraniteForCausalLM");
  EXPECT_EQ(family_name(c), "llama");
  EXPECT_EQ(std::tie(c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size),
            std::make_tuple(2048, 40, 32, 8, 64, 49155));
  EXPECT_EQ(std::tie(c.embedding_multiplier, c.attention_multiplier, c.residual_multiplier, c.logits_scaling),
            std::make_tuple(12.0f, 0.015625f, 0.22f, 8.0f));
  // GraniteConfig's defaults: every multiplier 1.0, the scores' too (not 1/sqrt(head_dim)).
  json bare = j;
  for (const char* k : {"embedding_multiplier", "attention_multiplier", "residual_multiplier", "logits_scaling"})
    bare.erase(k);
  const ModelConfig d = parse_hf_config(bare.dump(), "config.json");
  EXPECT_EQ(std::tie(d.embedding_multiplier, d.attention_multiplier, d.residual_multiplier, d.logits_scaling),
            std::make_tuple(1.0f, 1.0f, 1.0f, 1.0f));
  json three = j;
  three["logits_scaling"] = 3.0;
  std::string e = test::error_of([&] { parse_hf_config(three.dump(), "config.json"); });
  EXPECT_NE(e.find("logits_scaling = 3 is not supported: only a power of two"), std::string::npos) << e;
  json word = j;
  word["residual_multiplier"] = "0.22";
  e = test::error_of([&] { parse_hf_config(word.dump(), "config.json"); });
  EXPECT_NE(e.find("config.json (GraniteForCausalLM): field 'residual_multiplier' must be a number"), std::string::npos)
      << e;
  json neg = j;
  neg["embedding_multiplier"] = -1.0;
  e = test::error_of([&] { parse_hf_config(neg.dump(), "config.json"); });
  EXPECT_NE(e.find("embedding_multiplier = -1 (must be a positive number)"), std::string::npos) << e;
}

}  // namespace
}  // namespace kvp
