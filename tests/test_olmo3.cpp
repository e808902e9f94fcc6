// OLMo-3 (Olmo3ForCausalLM, transformers v4.57.1): OLMo-2's decoder rounded as v4.52 on rounds it
// (norm gains and RoPE in fp32, one rounding each), a window on the sliding_attention layers (3 of
// 4), which rotate unscaled while the full_attention layers take rope_scaling (YaRN in every
// published checkpoint). The OLMo-2 transformers reference re-packed as OLMo-3 with every layer
// full is that model in fp32 bit for bit, and not in bf16; a window changes only the rows past it;
// YaRN on sliding layers only changes nothing; the cached and recomputed paths agree bit for bit
// under `invariant`; HF and GGUF (llama.cpp's "olmo2" form) round-trip.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cache_paths.h"
#include "io/checkpoint.h"
#include "io/gguf.h"
#include "io/hf_config.h"
#include "io/model_writer.h"
#include "lab/model_inspection.h"
#include "model/checkpoint_export.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "reference_files.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

using nlohmann::json;

// The OLMo-2 reference as Olmo3ForCausalLM: its weights linked, config.json with `kinds` as
// layer_types ('s' sliding, 'f' full), `window` and, unless null, `rope_scaling`.
std::string write_olmo3(const std::string& ref, const std::string& dir, const std::string& kinds, int window,
                        const json& rope_scaling = nullptr) {
  std::filesystem::create_directories(dir);
  std::filesystem::create_symlink(std::filesystem::absolute(ref + "/model.safetensors"), dir + "/model.safetensors");
  json cfg = test::read_json(ref + "/config.json");
  cfg["architectures"] = {"Olmo3ForCausalLM"};
  cfg["model_type"] = "olmo3";
  cfg["sliding_window"] = window;
  cfg["layer_types"] = json::array();
  for (char k : kinds) cfg["layer_types"].push_back(k == 's' ? "sliding_attention" : "full_attention");
  cfg["rope_scaling"] = rope_scaling;
  std::ofstream(dir + "/config.json") << cfg.dump(2);
  return dir;
}

std::vector<float> olmo3_logits(const Checkpoint& ck, DType dt, const std::vector<int>& tokens) {
  Engine engine(Model::from_checkpoint(ck, dt), EngineOptions{});
  const float* l = engine.forward(tokens.data(), int(tokens.size()), 0, ForwardOptions{});
  return {l, l + tokens.size() * size_t(ck.config.vocab_size)};
}

const json kYarn = {{"rope_type", "yarn"}, {"factor", 8.0}, {"original_max_position_embeddings", 16}};

TEST(Olmo3Config, Olmo3ConfigDefaultsAndThePublishedModel) {
  const std::string base = R"({"architectures":["Olmo3ForCausalLM"],"model_type":"olmo3","hidden_size":64,
      "intermediate_size":160,"num_hidden_layers":8,"num_attention_heads":4,"vocab_size":50304,
      "max_position_embeddings":512)";
  const ModelConfig c = parse_hf_config(base + "}", "cfg.json");
  EXPECT_EQ(c.arch, Arch::Olmo3);
  EXPECT_EQ(family_name(c), "olmo3");
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
  EXPECT_EQ(c.bos_id, -1);
  EXPECT_EQ(c.eos_id, 50279);
  EXPECT_TRUE(c.norm_gain_in_fp32());
  EXPECT_TRUE(c.rope_rounds_once());
  EXPECT_FALSE(c.pre_norms());
  EXPECT_TRUE(c.qk_norm());
  EXPECT_FALSE(c.qk_norm_per_head());
  // Olmo3Config's layer_types default: all but every 4th layer windowed, at 4096.
  EXPECT_EQ(c.sliding_window, 4096);
  for (int l = 0; l < 8; ++l) EXPECT_EQ(c.window_for_layer(l), l % 4 == 3 ? 0 : 4096) << l;
  EXPECT_EQ(c.rope_local_theta, 0.0f);  // unscaled: one RoPE for all
  // Layer kinds that are not all but every n-th are refused, naming the field.
  const std::string e = test::error_of([&] {
    parse_hf_config(base + R"(,"layer_types":["sliding_attention","full_attention","full_attention","sliding_attention",
        "sliding_attention","full_attention","full_attention","sliding_attention"]})",
                    "cfg.json");
  });
  EXPECT_NE(e.find("layer_types"), std::string::npos) << e;
  // allenai/Olmo-3-1025-7B's config.json, as published.
  const ModelConfig p = parse_hf_config(R"({"architectures":["Olmo3ForCausalLM"],"model_type":"olmo3",
      "hidden_size":4096,"intermediate_size":11008,"num_hidden_layers":32,"num_attention_heads":32,
      "num_key_value_heads":32,"vocab_size":100278,"max_position_embeddings":65536,"rms_norm_eps":1e-06,
      "rope_theta":500000,"sliding_window":4096,"eos_token_id":100257,"pad_token_id":100277,
      "tie_word_embeddings":false,"attention_bias":false,"hidden_act":"silu",
      "layer_types":["sliding_attention","sliding_attention","sliding_attention","full_attention",
        "sliding_attention","sliding_attention","sliding_attention","full_attention",
        "sliding_attention","sliding_attention","sliding_attention","full_attention",
        "sliding_attention","sliding_attention","sliding_attention","full_attention",
        "sliding_attention","sliding_attention","sliding_attention","full_attention",
        "sliding_attention","sliding_attention","sliding_attention","full_attention",
        "sliding_attention","sliding_attention","sliding_attention","full_attention",
        "sliding_attention","sliding_attention","sliding_attention","full_attention"],
      "rope_scaling":{"attention_factor":1.2079441541679836,"beta_fast":32.0,"beta_slow":1.0,"factor":8.0,
        "original_max_position_embeddings":8192,"rope_type":"yarn"}})",
                                        "cfg.json");
  EXPECT_EQ(p.rope_scaling, ModelConfig::RopeScaling::Yarn);
  EXPECT_EQ(p.rope_local_theta, 500000.0f);  // the sliding layers: unscaled, the same base
  EXPECT_EQ(p.sliding_window_period, 4);
  EXPECT_EQ(p.rope_attention_factor, 1.2079441541679836);
  // The synth preset is that model.
  const ModelConfig s = synthetic_config("", "olmo3-7b");
  EXPECT_EQ(s.arch, p.arch);
  for (int l = 0; l < 32; ++l) EXPECT_EQ(s.window_for_layer(l), p.window_for_layer(l));
  EXPECT_EQ(s.rope_attention_factor, p.rope_attention_factor);
  EXPECT_EQ(s.rope_original_max_pos, p.rope_original_max_pos);
  EXPECT_EQ(s.vocab_size, p.vocab_size);
  InspectOptions io;
  io.synth = "olmo3-7b";
  const json d = inspect_model(io);
  const double params = d["parameters"]["total"].get<double>();
  EXPECT_GT(params, 7.2e9);  // OLMo-3 7B: 7.3 billion
  EXPECT_LT(params, 7.4e9);
  const std::string text = inspect_text(d);
  EXPECT_NE(text.find("yarn scaling x8 (original context 8192, cos/sin x 1.20794"), std::string::npos) << text;
  EXPECT_NE(text.find("windowed layers theta 500000, unscaled"), std::string::npos) << text;
  EXPECT_NE(text.find("rounded once"), std::string::npos) << text;
}

TEST(Olmo3, EveryLayerFullIsTheOlmo2ReferenceInFp32AndNotInBf16) {
  KVP_REQUIRE_REFERENCE(ref, "olmo2");
  test::TempDir tmp;
  const Checkpoint olmo2 = open_checkpoint(ref);
  const Checkpoint o3 = open_checkpoint(write_olmo3(ref, tmp.file("o3"), "ffff", 4096));
  ASSERT_EQ(o3.config.arch, Arch::Olmo3);
  const auto tokens = test::read_json(ref + "/tokens.json")["input_ids"].get<std::vector<int>>();
  const std::vector<float> f32 = olmo3_logits(o3, DType::F32, tokens);
  EXPECT_EQ(f32, olmo3_logits(olmo2, DType::F32, tokens));
  EXPECT_LE(test::max_abs_diff(f32, test::read_f32(ref + "/logits.f32")), 1e-4);
  // bf16: the rounding points differ (v4.51's OLMo-2 against v4.57's OLMo-3), the model does not.
  const std::vector<float> b3 = olmo3_logits(o3, DType::BF16, tokens), b2 = olmo3_logits(olmo2, DType::BF16, tokens);
  EXPECT_NE(b3, b2);
  EXPECT_LT(test::max_abs_diff(b3, f32), 1.0);
}

// The window bites only past it: rows before position 8 are the all-full model's bit for bit; a
// window wider than the sequence changes nothing.
TEST(Olmo3, TheWindowChangesOnlyTheRowsPastIt) {
  KVP_REQUIRE_REFERENCE(ref, "olmo2");
  test::TempDir tmp;
  const auto tokens = test::read_json(ref + "/tokens.json")["input_ids"].get<std::vector<int>>();
  const Checkpoint full = open_checkpoint(write_olmo3(ref, tmp.file("full"), "ffff", 8));
  const Checkpoint wide = open_checkpoint(write_olmo3(ref, tmp.file("wide"), "sssf", 4096));
  const Checkpoint narrow = open_checkpoint(write_olmo3(ref, tmp.file("narrow"), "sssf", 8));
  EXPECT_EQ(narrow.config.window_for_layer(2), 8);
  EXPECT_EQ(narrow.config.window_for_layer(3), 0);
  const size_t V = size_t(full.config.vocab_size);
  for (DType dt : {DType::F32, DType::BF16}) {
    const auto a = olmo3_logits(full, dt, tokens), w = olmo3_logits(wide, dt, tokens),
               n = olmo3_logits(narrow, dt, tokens);
    EXPECT_EQ(a, w) << dtype_name(dt);
    EXPECT_EQ(std::vector<float>(a.begin(), a.begin() + 8 * V), std::vector<float>(n.begin(), n.begin() + 8 * V));
    EXPECT_GT(test::max_abs_diff(a, n), 1e-3) << dtype_name(dt);
  }
}

// rope_scaling reaches the full_attention layers only: on a model of sliding layers it changes
// nothing; on full layers it does.
TEST(Olmo3, RopeScalingIsTheFullAttentionLayersAlone) {
  KVP_REQUIRE_REFERENCE(ref, "olmo2");
  test::TempDir tmp;
  const auto tokens = test::read_json(ref + "/tokens.json")["input_ids"].get<std::vector<int>>();
  const Checkpoint s_plain = open_checkpoint(write_olmo3(ref, tmp.file("sp"), "ssss", 4096));
  const Checkpoint s_yarn = open_checkpoint(write_olmo3(ref, tmp.file("sy"), "ssss", 4096, kYarn));
  const Checkpoint f_plain = open_checkpoint(write_olmo3(ref, tmp.file("fp"), "ffff", 4096));
  const Checkpoint f_yarn = open_checkpoint(write_olmo3(ref, tmp.file("fy"), "ffff", 4096, kYarn));
  EXPECT_EQ(s_yarn.config.rope_local_theta, s_yarn.config.rope_theta);
  for (DType dt : {DType::F32, DType::BF16}) {
    EXPECT_EQ(olmo3_logits(s_yarn, dt, tokens), olmo3_logits(s_plain, dt, tokens)) << dtype_name(dt);
    EXPECT_GT(test::max_abs_diff(olmo3_logits(f_yarn, dt, tokens), olmo3_logits(f_plain, dt, tokens)), 1e-3);
  }
}

TEST(Olmo3, CachedAndRecomputedPathsAgreeBitForBitUnderInvariant) {
  const Checkpoint ck = synthesize_checkpoint(synthetic_config("olmo3", "tiny"), DType::F32, 5);
  ASSERT_EQ(ck.config.rope_scaling, ModelConfig::RopeScaling::Yarn);
  std::vector<int> toks(40);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = int(3 + (i * 53) % 500);
  for (DType dt : {DType::BF16, DType::F16}) test::expect_invariant_cache_paths_agree(ck, dt, toks, 9);
}

// HF: config.json's layer_types, window and YaRN come back. GGUF: llama.cpp's converter's form,
// "olmo2" with the window and a bool per layer, reads back as OLMo-3; YaRN has no GGUF form here.
TEST(Olmo3, ConvertKeepsTheFamilyInBothFormats) {
  test::TempDir tmp;
  const ModelConfig c = synthetic_config("olmo3", "tiny");
  const Checkpoint ck = synthesize_checkpoint(c, DType::F32, 7);
  std::vector<int> toks(30);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = int(5 + (i * 29) % 500);
  export_checkpoint(ck, "hf", tmp.file("hf"));
  const json cfg = test::read_json(tmp.file("hf") + "/config.json");
  EXPECT_EQ(cfg["model_type"], "olmo3");
  EXPECT_EQ(cfg["layer_types"],
            json({"sliding_attention", "sliding_attention", "sliding_attention", "full_attention"}));
  EXPECT_EQ(cfg["rope_scaling"]["rope_type"], "yarn");
  const Checkpoint hf = open_checkpoint(tmp.file("hf"));
  EXPECT_EQ(olmo3_logits(hf, DType::BF16, toks), olmo3_logits(ck, DType::BF16, toks));
  std::string e = test::error_of([&] { export_checkpoint(ck, "gguf", tmp.file("y.gguf")); });
  EXPECT_NE(e.find("YaRN"), std::string::npos) << e;

  ModelConfig plain = c;
  plain.rope_scaling = ModelConfig::RopeScaling::None;
  plain.rope_local_theta = 0.0f;
  const Checkpoint pk = synthesize_checkpoint(plain, DType::F32, 7);
  const std::string path = tmp.file("o3.gguf");
  export_checkpoint(pk, "gguf", path);
  const Checkpoint g = load_gguf(path);
  EXPECT_EQ(g.config.arch, Arch::Olmo3);
  EXPECT_EQ(g.config.sliding_window, 16);
  for (int l = 0; l < 4; ++l) EXPECT_EQ(g.config.window_for_layer(l), plain.window_for_layer(l)) << l;
  EXPECT_EQ(olmo3_logits(g, DType::BF16, toks), olmo3_logits(pk, DType::BF16, toks));
  // No layer windowed still reads back as OLMo-3 (the window key marks it), not OLMo-2.
  ModelConfig none = plain;
  none.sliding_window = 0;
  export_checkpoint(synthesize_checkpoint(none, DType::F32, 7), "gguf", tmp.file("n.gguf"));
  const Checkpoint gn = load_gguf(tmp.file("n.gguf"));
  EXPECT_EQ(gn.config.arch, Arch::Olmo3);
  EXPECT_EQ(gn.config.sliding_window, 0);
}

TEST(Olmo3Gguf, AWindowPatternKvparityCannotRunIsRefusedByKey) {
  test::TempDir tmp;
  ModelConfig c = synthetic_config("olmo3", "tiny");
  c.rope_scaling = ModelConfig::RopeScaling::None;
  c.rope_local_theta = 0.0f;
  const Checkpoint ck = synthesize_checkpoint(c, DType::F32, 7);
  std::vector<TensorView> tensors;
  for (const auto& [name, t] : ck.tensors) tensors.push_back(t);
  for (const auto& [pattern, want] :
       {std::pair{std::vector<bool>{true, false, false, true}, "all but every n-th"},
        std::pair{std::vector<bool>{true, true, false}, "one bool per layer"}}) {
    std::vector<GgufValue> items;
    for (bool b : pattern) items.push_back(GgufValue::of_bool(b));
    GgufWriteOptions o;
    o.extra_kv = {{"olmo2.attention.sliding_window_pattern", GgufValue::of_array(GgufType::Bool, items)}};
    const std::string bad = tmp.file("bad.gguf");
    write_gguf(bad, c, tensors, nullptr, o);
    const std::string e = test::error_of([&] { load_gguf(bad); });
    EXPECT_NE(e.find(want), std::string::npos) << e;
    EXPECT_NE(e.find("olmo2.attention.sliding_window_pattern"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace kvp
