// SmolLM3 (SmolLM3ForCausalLM; src/io/hf_smollm3.h): Llama's decoder whose NoPE layers
// (no_rope_layers' zeros, every 4th layer in the published models) rotate nothing. The Llama
// reference re-packed as SmolLM3 with every layer rotating is the same model bit for bit; with
// NoPE layers, those layers' q and k leave RoPE as they came (the hook points before and after
// it), a model of NoPE layers only cannot tell the order of its prefix, the cached and
// recomputed paths agree bit for bit under `invariant`, and convert keeps the layers.
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
#include "rope_capture.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

using nlohmann::json;

// The Llama reference as SmolLM3: its weights linked, config.json rewritten with `rope_layers`
// (1 = rotates) as no_rope_layers, or the interval alone when empty.
// `layers` > 0 keeps only the first that many layers (the others' tensors stay in the file, unread).
std::string write_smollm3(const std::string& ref, const std::string& dir, const std::vector<int>& rope_layers,
                          int interval = 0, int layers = 0) {
  std::filesystem::create_directories(dir);
  std::filesystem::create_symlink(std::filesystem::absolute(ref + "/model.safetensors"), dir + "/model.safetensors");
  json cfg = test::read_json(ref + "/config.json");
  cfg["architectures"] = {"SmolLM3ForCausalLM"};
  cfg["model_type"] = "smollm3";
  cfg.erase("pretraining_tp");
  if (layers > 0) cfg["num_hidden_layers"] = layers;
  if (!rope_layers.empty()) cfg["no_rope_layers"] = rope_layers;
  if (interval > 0) cfg["no_rope_layer_interval"] = interval;
  cfg.update({{"use_sliding_window", false}, {"sliding_window", nullptr}, {"max_window_layers", 28}});
  cfg["layer_types"] = json::array();
  for (int l = 0; l < cfg["num_hidden_layers"].get<int>(); ++l) cfg["layer_types"].push_back("full_attention");
  std::ofstream(dir + "/config.json") << cfg.dump(2);
  return dir;
}

std::vector<float> smollm3_logits(const Checkpoint& ck, DType dt, const std::vector<int>& tokens,
                             KernelPolicy policy = KernelPolicy::Standard) {
  EngineOptions eo;
  eo.kernels = policy;
  Engine engine(Model::from_checkpoint(ck, dt), eo);
  const float* l = engine.forward(tokens.data(), int(tokens.size()), 0, ForwardOptions{});
  return {l, l + tokens.size() * size_t(ck.config.vocab_size)};
}

TEST(SmolLM3, EveryLayerRotatingIsLlamaBitForBit) {
  KVP_REQUIRE_REFERENCE(ref, "llama");
  test::TempDir tmp;
  const Checkpoint plain = open_checkpoint(ref);
  const Checkpoint s = open_checkpoint(write_smollm3(ref, tmp.file("s"), {1, 1, 1, 1}));
  EXPECT_EQ(s.read_from, "SmolLM3ForCausalLM");
  EXPECT_TRUE(s.config.nope_layers.empty());
  const auto tokens = test::read_json(ref + "/tokens.json")["input_ids"].get<std::vector<int>>();
  for (DType dt : {DType::F32, DType::BF16}) EXPECT_EQ(smollm3_logits(plain, dt, tokens), smollm3_logits(s, dt, tokens));
  EXPECT_LE(test::max_abs_diff(smollm3_logits(s, DType::F32, tokens), test::read_f32(ref + "/logits.f32")), 1e-4);
}

TEST(SmolLM3, NopeLayersLeaveQAndKUnrotated) {
  KVP_REQUIRE_REFERENCE(ref, "llama");
  test::TempDir tmp;
  // The default interval 2 on four layers: layers 1 and 3 without RoPE.
  const Checkpoint s = open_checkpoint(write_smollm3(ref, tmp.file("s"), {}, 2));
  EXPECT_EQ(s.config.nope_layers, (std::vector<int>{1, 3}));
  const auto tokens = test::read_json(ref + "/tokens.json")["input_ids"].get<std::vector<int>>();
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    test::RopeCapture cap;
    ForwardOptions fo;
    fo.hooks = &cap;
    Engine engine(Model::from_checkpoint(s, dt), EngineOptions{});
    engine.forward(tokens.data(), int(tokens.size()), 0, fo);
    for (int l = 0; l < 4; ++l) {
      const bool nope = l % 2 == 1;
      for (auto [pre, post] : {std::pair{HookPoint::QPre, HookPoint::Q}, std::pair{HookPoint::KPre, HookPoint::K}})
        EXPECT_EQ(cap.unrotated(l, pre, post), nope) << dtype_name(dt) << " layer " << l;
    }
  }
  // And the model is another than Llama's.
  EXPECT_GT(test::max_abs_diff(smollm3_logits(s, DType::F32, tokens), smollm3_logits(open_checkpoint(ref), DType::F32, tokens)),
            1e-3);
}

// One layer without RoPE: the last row attends to the set of earlier rows, each computed from its
// own token alone, so reordering the tokens before it changes nothing but the summation order.
// (With more layers the earlier rows see their own prefixes, which the order changes.)
TEST(SmolLM3, AModelWithoutPositionsCannotTellThePrefixOrder) {
  KVP_REQUIRE_REFERENCE(ref, "llama");
  test::TempDir tmp;
  const Checkpoint nope = open_checkpoint(write_smollm3(ref, tmp.file("n"), {0}, 0, 1));
  const Checkpoint rope = open_checkpoint(write_smollm3(ref, tmp.file("r"), {1}, 0, 1));
  ASSERT_EQ(nope.config.n_layers, 1);
  const std::vector<int> a{1, 17, 250, 33, 9, 400}, b{1, 250, 33, 17, 9, 400};  // the same set before the last
  const int V = nope.config.vocab_size;
  auto last = [V](const std::vector<float>& l) { return std::vector<float>(l.end() - V, l.end()); };
  EXPECT_LE(test::max_abs_diff(last(smollm3_logits(nope, DType::F32, a)), last(smollm3_logits(nope, DType::F32, b))), 1e-5);
  EXPECT_GT(test::max_abs_diff(last(smollm3_logits(rope, DType::F32, a)), last(smollm3_logits(rope, DType::F32, b))), 1e-3);
}

TEST(SmolLM3, CachedAndRecomputedStepsAgreeUnderInvariant) {
  KVP_REQUIRE_REFERENCE(ref, "llama");
  test::TempDir tmp;
  const Checkpoint s = open_checkpoint(write_smollm3(ref, tmp.file("s"), {1, 1, 1, 0}));
  std::vector<int> toks{1, 5, 77, 300, 12, 8, 91, 140, 2, 64};
  for (DType dt : {DType::F32, DType::BF16}) test::expect_invariant_cache_paths_agree(s, dt, toks, 4);
}

TEST(SmolLM3, ConvertKeepsTheLayersWithoutRope) {
  KVP_REQUIRE_REFERENCE(ref, "llama");
  test::TempDir tmp;
  const Checkpoint s = open_checkpoint(write_smollm3(ref, tmp.file("s"), {1, 0, 1, 0}));
  export_checkpoint(s, "hf", tmp.file("out"), ExportOptions{});
  const json cfg = test::read_json(tmp.file("out/config.json"));
  EXPECT_EQ(cfg["architectures"][0], "SmolLM3ForCausalLM");
  EXPECT_EQ(cfg["no_rope_layers"], json({1, 0, 1, 0}));
  const Checkpoint back = open_checkpoint(tmp.file("out"));
  EXPECT_EQ(back.config.nope_layers, (std::vector<int>{1, 3}));
  const auto tokens = test::read_json(ref + "/tokens.json")["input_ids"].get<std::vector<int>>();
  EXPECT_EQ(smollm3_logits(s, DType::F32, tokens), smollm3_logits(back, DType::F32, tokens));
  InspectOptions io;
  io.model = tmp.file("s");
  const json d = inspect_model(io);
  EXPECT_EQ(d["rope"]["nope_layers"], json({1, 3}));
  EXPECT_EQ(d["read_from"], "SmolLM3ForCausalLM");
  const std::string text = inspect_text(d);
  EXPECT_NE(text.find("none in layers 1, 3 (NoPE)"), std::string::npos) << text;
  EXPECT_NE(text.find("read from SmolLM3ForCausalLM (its layers without RoPE kept)"), std::string::npos) << text;
}

// llama.cpp's smollm3: Llama's GGUF (q/k rows in adjacent pairs) whose every 4th layer skips RoPE,
// a step its loader fixes at 4 (no key says it).
TEST(SmolLM3, GgufAsLlamaCppWritesIt) {
  KVP_REQUIRE_REFERENCE(ref, "llama");
  test::TempDir tmp;
  const Checkpoint s = open_checkpoint(write_smollm3(ref, tmp.file("s"), {1, 1, 1, 0}));
  export_checkpoint(s, "gguf", tmp.file("s.gguf"), ExportOptions{});
  const Checkpoint g = open_checkpoint(tmp.file("s.gguf"));
  EXPECT_EQ(g.config.nope_layers, (std::vector<int>{3}));
  EXPECT_EQ(g.read_from, "SmolLM3ForCausalLM");
  EXPECT_EQ(g.qk_layout, RopeLayout::Interleaved);
  const auto tokens = test::read_json(ref + "/tokens.json")["input_ids"].get<std::vector<int>>();
  for (DType dt : {DType::F32, DType::F16}) EXPECT_EQ(smollm3_logits(s, dt, tokens), smollm3_logits(g, dt, tokens)) << dtype_name(dt);
  // Other layers without RoPE have no GGUF form: refused, no file left.
  const Checkpoint odd = open_checkpoint(write_smollm3(ref, tmp.file("odd"), {1, 0, 1, 1}));
  const std::string e = test::error_of([&] { export_checkpoint(odd, "gguf", tmp.file("odd.gguf"), ExportOptions{}); });
  EXPECT_NE(e.find("can say only layers 3, 7, 11, ... of a Llama without RoPE"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(tmp.file("odd.gguf")));
}

TEST(SmolLM3Config, ThePublishedConfigReadsAsItsModel) {
  // HuggingFaceTB/SmolLM3-3B's config.json (its layer_types and no_rope_layers lists written out).
  json j = json::parse(R"({"architectures":["SmolLM3ForCausalLM"],"attention_bias":false,"attention_dropout":0.0,
    "bos_token_id":null,"eos_token_id":128012,"hidden_act":"silu","hidden_size":2048,"initializer_range":0.02,
    "intermediate_size":11008,"max_position_embeddings":65536,"max_window_layers":28,"mlp_bias":false,
    "model_type":"smollm3","no_rope_layer_interval":4,"num_attention_heads":16,"num_hidden_layers":36,
    "num_key_value_heads":4,"pad_token_id":128004,"pretraining_tp":2,"rms_norm_eps":1e-06,"rope_scaling":null,
    "rope_theta":5000000.0,"sliding_window":null,"tie_word_embeddings":true,"torch_dtype":"bfloat16",
    "use_cache":false,"use_sliding_window":false,"vocab_size":128256})");
  j["layer_types"] = json::array();
  j["no_rope_layers"] = json::array();
  for (int l = 0; l < 36; ++l) {
    j["layer_types"].push_back("full_attention");
    j["no_rope_layers"].push_back(l % 4 == 3 ? 0 : 1);
  }
  std::string from;
  const ModelConfig c = parse_hf_config(j.dump(), "config.json", nullptr, nullptr, &from);
  EXPECT_EQ(from, "SmolLM3ForCausalLM");
  EXPECT_EQ(family_name(c), "llama");
  EXPECT_EQ(std::tie(c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size),
            std::make_tuple(2048, 11008, 36, 16, 4, 128, 128256));
  EXPECT_EQ(c.rope_theta, 5e6f);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.nope_layers, (std::vector<int>{3, 7, 11, 15, 19, 23, 27, 31, 35}));
  EXPECT_EQ(c.eos_id, 128012);
  // Without the list, the interval makes it (SmolLM3Config: layer l rotates where (l + 1) % 4 != 0).
  j.erase("no_rope_layers");
  EXPECT_EQ(parse_hf_config(j.dump(), "config.json").nope_layers, c.nope_layers);
  // A config of nothing but its type is SmolLM3Config's defaults: the 3B's shape, base 2e6, tied.
  const ModelConfig d = parse_hf_config(R"({"model_type":"smollm3"})", "config.json");
  EXPECT_EQ(std::tie(d.dim, d.hidden_dim, d.n_layers, d.n_heads, d.n_kv_heads, d.vocab_size, d.max_seq_len),
            std::make_tuple(2048, 11008, 36, 16, 4, 128256, 32768));
  EXPECT_EQ(d.rope_theta, 2e6f);
  EXPECT_TRUE(d.tied_embeddings);
  EXPECT_EQ(std::tie(d.bos_id, d.eos_id), std::make_tuple(128000, 128001));
  EXPECT_EQ(d.nope_layers, c.nope_layers);
}

TEST(SmolLM3Config, WhatItCannotRunIsRefusedByField) {
  const json base = json::parse(R"({"model_type":"smollm3","hidden_size":64,"intermediate_size":160,
    "max_position_embeddings":512,"num_attention_heads":4,"num_hidden_layers":4,"vocab_size":512,
    "bos_token_id":1,"eos_token_id":2})");
  auto error = [](json j) { return test::error_of([&] { parse_hf_config(j.dump(), "config.json"); }); };
  json w = base;
  w["use_sliding_window"] = true;
  w["sliding_window"] = 128;
  EXPECT_NE(error(w).find("config.json (SmolLM3ForCausalLM): a sliding window is not supported for SmolLM3 "
                          "(config.json field use_sliding_window)"),
            std::string::npos)
      << error(w);
  json shortl = base;
  shortl["no_rope_layers"] = {1, 1, 0};
  EXPECT_NE(error(shortl).find("field 'no_rope_layers' must list 0 or 1 for each of the 4 layers"), std::string::npos)
      << error(shortl);
  json two = base;
  two["no_rope_layers"] = {1, 2, 1, 0};
  EXPECT_NE(error(two).find("field 'no_rope_layers' entry 1 must be 0 or 1, got 2"), std::string::npos) << error(two);
  json iv = base;
  iv["no_rope_layer_interval"] = 0;
  EXPECT_NE(error(iv).find("field 'no_rope_layer_interval' = 0 must be positive"), std::string::npos) << error(iv);
  // A longer list is read for its first num_hidden_layers entries, as the class does.
  json longer = base;
  longer["no_rope_layers"] = {1, 0, 1, 1, 0, 0};
  EXPECT_EQ(parse_hf_config(longer.dump(), "config.json").nope_layers, (std::vector<int>{1}));
}

}  // namespace
}  // namespace kvp
