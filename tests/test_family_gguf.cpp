// EXAONE 4.0 and Ministral 3 as llama.cpp's converter writes them (io/gguf_exaone4.h,
// io/gguf_mistral3.h): the keys and tensor layouts of "exaone4" (the window and a bool a layer,
// q/k rows unpermuted) and "mistral3" (Llama's permuted rows, the temperature over YaRN's original
// context, YaRN's keys); each model written and read back runs bit for bit as the model it came
// from and converts back to config.json; what those files cannot say is refused by key.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "ministral3_tiny.h"
#include "io/gguf.h"
#include "io/model_writer.h"
#include "model/checkpoint_export.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

using nlohmann::json;

std::vector<float> family_logits(const Checkpoint& ck, DType dt, const std::vector<int>& toks) {
  Engine e(Model::from_checkpoint(ck, dt), EngineOptions{});
  const float* l = e.forward(toks.data(), int(toks.size()), 0, ForwardOptions{});
  return {l, l + toks.size() * size_t(ck.config.vocab_size)};
}

std::vector<int> prompt_of(size_t n) {
  std::vector<int> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = int(3 + (i * 53) % 500);
  return t;
}

// The file's metadata and tensor table, parsed by kvparity's container reader only.
struct FamilyGgufFile {
  std::vector<uint8_t> bytes;
  GgufFile g;
  const GgufValue* key(const std::string& k) const {
    auto it = g.kv.find(k);
    return it == g.kv.end() ? nullptr : &it->second;
  }
  const uint8_t* data(const std::string& tensor) const {
    for (const auto& t : g.tensors)
      if (t.name == tensor) return bytes.data() + g.data_offset + t.offset;
    return nullptr;
  }
};

FamilyGgufFile read_family_gguf(const std::string& path) {
  FamilyGgufFile p;
  std::ifstream f(path, std::ios::binary);
  p.bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  p.g = parse_gguf(p.bytes.data(), p.bytes.size(), path);
  return p;
}

std::vector<TensorView> views_of(const Checkpoint& ck) {
  std::vector<TensorView> v;
  for (const auto& [name, t] : ck.tensors) v.push_back(t);
  return v;
}

TEST(Exaone4Gguf, TheHybridModelIsWrittenAsTheConverterDoesAndRunsBitForBit) {
  test::TempDir tmp;
  const Checkpoint ck = synthesize_checkpoint(synthetic_config("exaone4", "tiny"), DType::F32, 4);
  const std::string path = tmp.file("e4.gguf");
  export_checkpoint(ck, "gguf", path);
  const FamilyGgufFile p = read_family_gguf(path);
  EXPECT_EQ(p.key("general.architecture")->s, "exaone4");
  EXPECT_EQ(p.key("exaone4.attention.sliding_window")->u, 16u);
  const GgufValue* pat = p.key("exaone4.attention.sliding_window_pattern");
  ASSERT_NE(pat, nullptr);
  ASSERT_EQ(pat->elem, GgufType::Bool);
  ASSERT_EQ(pat->size(), 4u);
  for (size_t l = 0; l < 4; ++l) EXPECT_EQ(pat->at(l).u != 0, l != 3) << l;
  // OLMo-2's names with per-head q/k norms; no norm before the blocks; q rows as HF has them.
  for (const char* t : {"blk.0.post_attention_norm.weight", "blk.0.post_ffw_norm.weight", "blk.0.attn_q_norm.weight"})
    EXPECT_NE(p.data(t), nullptr) << t;
  EXPECT_EQ(p.data("blk.0.attn_norm.weight"), nullptr);
  const TensorView& q = ck.tensors.at("model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(std::memcmp(p.data("blk.0.attn_q.weight"), q.data, q.nbytes()), 0) << "q rows permuted";

  const Checkpoint g = load_gguf(path);
  EXPECT_EQ(g.config.arch, Arch::Exaone4);
  EXPECT_EQ(g.config.sliding_window, 16);
  EXPECT_EQ(g.config.nope_layers, std::vector<int>{3});
  for (int l = 0; l < 4; ++l) EXPECT_EQ(g.config.window_for_layer(l), ck.config.window_for_layer(l)) << l;
  const auto toks = prompt_of(40);  // past the window
  EXPECT_EQ(family_logits(g, DType::BF16, toks), family_logits(ck, DType::BF16, toks));
  EXPECT_EQ(family_logits(g, DType::F32, toks), family_logits(ck, DType::F32, toks));
  // And back to config.json: the same model.
  export_checkpoint(g, "hf", tmp.file("hf"));
  const json cfg = test::read_json(tmp.file("hf") + "/config.json");
  EXPECT_EQ(cfg["model_type"], "exaone4");
  EXPECT_EQ(cfg["sliding_window"], 16);
  EXPECT_EQ(family_logits(open_checkpoint(tmp.file("hf")), DType::BF16, toks), family_logits(ck, DType::BF16, toks));
  // llama.cpp's own loader windows only 64-layer models: the gap is said.
  const auto gaps = gguf_llama_cpp_gaps(ck.config);
  ASSERT_EQ(gaps.size(), 1u);
  EXPECT_NE(gaps[0].find("below 64 layers"), std::string::npos) << gaps[0];
}

TEST(Exaone4Gguf, WithoutAWindowEveryLayerIsGlobalAndRotates) {
  test::TempDir tmp;
  ModelConfig c = synthetic_config("exaone4", "tiny");
  c.sliding_window = 0;
  c.sliding_window_period = 1;
  c.nope_layers.clear();  // EXAONE-4.0-1.2B's form
  const Checkpoint ck = synthesize_checkpoint(c, DType::F32, 5);
  const std::string path = tmp.file("e4.gguf");
  export_checkpoint(ck, "gguf", path);
  const FamilyGgufFile p = read_family_gguf(path);
  EXPECT_EQ(p.key("exaone4.attention.sliding_window"), nullptr);
  EXPECT_EQ(p.key("exaone4.attention.sliding_window_pattern"), nullptr);
  const Checkpoint g = load_gguf(path);
  EXPECT_EQ(g.config.sliding_window, 0);
  EXPECT_TRUE(g.config.nope_layers.empty());
  const auto toks = prompt_of(24);
  EXPECT_EQ(family_logits(g, DType::F16, toks), family_logits(ck, DType::F16, toks));
  EXPECT_TRUE(gguf_llama_cpp_gaps(c).empty());
  // llama.cpp windows a 64-layer model whatever the file says (EXAONE-4.0-32B's rule).
  c.n_layers = 64;
  EXPECT_EQ(gguf_llama_cpp_gaps(c).size(), 1u);
}

TEST(Exaone4Gguf, WhatTheFilesCannotSayIsRefusedByKey) {
  test::TempDir tmp;
  ModelConfig c = synthetic_config("exaone4", "tiny");
  const Checkpoint ck = synthesize_checkpoint(c, DType::F32, 4);
  // A layer without RoPE that is not a global layer.
  Checkpoint odd = ck;
  odd.config.nope_layers = {1};
  std::string e = test::error_of([&] { export_checkpoint(odd, "gguf", tmp.file("odd.gguf")); });
  EXPECT_NE(e.find("no GGUF form"), std::string::npos) << e;
  // A window without its pattern, in a model that is not 64 layers: llama.cpp and transformers
  // would run it differently.
  ModelConfig plain = c;
  plain.sliding_window = 0;
  plain.sliding_window_period = 1;
  plain.nope_layers.clear();
  const Checkpoint pk = synthesize_checkpoint(plain, DType::F32, 4);
  GgufWriteOptions o;
  o.extra_kv = {{"exaone4.attention.sliding_window", GgufValue::of_u32(16)}};
  write_gguf(tmp.file("np.gguf"), plain, views_of(pk), nullptr, o);
  e = test::error_of([&] { load_gguf(tmp.file("np.gguf")); });
  EXPECT_NE(e.find("exaone4.attention.sliding_window_pattern"), std::string::npos) << e;
  EXPECT_NE(e.find("does not guess"), std::string::npos) << e;
  // A pattern of the wrong length, and one kvparity's windows cannot follow.
  for (const auto& [pattern, want] : {std::pair{std::vector<bool>{true, true, false}, "one bool per layer"},
                                      std::pair{std::vector<bool>{true, false, false, true}, "all but every n-th"}}) {
    std::vector<GgufValue> items;
    for (bool b : pattern) items.push_back(GgufValue::of_bool(b));
    GgufWriteOptions bad;
    bad.extra_kv = {{"exaone4.attention.sliding_window_pattern", GgufValue::of_array(GgufType::Bool, items)}};
    write_gguf(tmp.file("bad.gguf"), c, views_of(ck), nullptr, bad);
    e = test::error_of([&] { load_gguf(tmp.file("bad.gguf")); });
    EXPECT_NE(e.find(want), std::string::npos) << e;
  }
  // An exaone4 model is written as nothing else.
  GgufWriteOptions as_llama;
  as_llama.arch = "llama";
  e = test::error_of([&] { write_gguf(tmp.file("l.gguf"), c, views_of(ck), nullptr, as_llama); });
  EXPECT_NE(e.find("exaone4 models are llama.cpp's exaone4"), std::string::npos) << e;
}

using test::tiny_ministral3;

TEST(Mistral3Gguf, MinistralThreeIsWrittenAsTheConverterDoesAndRunsBitForBit) {
  test::TempDir tmp;
  const Checkpoint ck = synthesize_checkpoint(tiny_ministral3(0.1f), DType::F32, 6);
  const std::string path = tmp.file("m3.gguf");
  export_checkpoint(ck, "gguf", path);
  const FamilyGgufFile p = read_family_gguf(path);
  EXPECT_EQ(p.key("general.architecture")->s, "mistral3");
  EXPECT_FLOAT_EQ(float(p.key("mistral3.attention.temperature_scale")->f), 0.1f);
  EXPECT_EQ(p.key("mistral3.rope.scaling.type")->s, "yarn");
  EXPECT_EQ(p.key("mistral3.rope.scaling.factor")->f, 4.0);
  EXPECT_EQ(p.key("mistral3.rope.scaling.original_context_length")->u, 8u);
  EXPECT_EQ(p.key("mistral3.rope.scaling.yarn_log_multiplier")->f, 1.0);
  EXPECT_EQ(p.key("mistral3.attention.sliding_window"), nullptr);
  // Llama's layout: q's rows permuted into adjacent pairs (row 1 of the file is HF's row head_dim/2).
  const TensorView& q = ck.tensors.at("model.layers.0.self_attn.q_proj.weight");
  const size_t row = size_t(q.shape[1]) * 4;
  EXPECT_EQ(std::memcmp(p.data("blk.0.attn_q.weight") + row, static_cast<const uint8_t*>(q.data) + row * 8, row), 0);

  const Checkpoint g = load_gguf(path);
  EXPECT_EQ(g.read_from, "Ministral3ForCausalLM");
  EXPECT_EQ(g.config.arch, Arch::Mistral);
  EXPECT_EQ(g.config.query_temperature_beta, 0.1f);
  EXPECT_EQ(g.config.query_temperature_context, 8);
  EXPECT_EQ(g.config.rope_scaling, ModelConfig::RopeScaling::Yarn);
  EXPECT_EQ(g.config.rope_attention_factor, 1.0);
  EXPECT_TRUE(g.config.rope_yarn_truncate);
  const auto toks = prompt_of(40);  // positions 8-39 scale their queries
  EXPECT_EQ(family_logits(g, DType::BF16, toks), family_logits(ck, DType::BF16, toks));
  EXPECT_EQ(family_logits(g, DType::F32, toks), family_logits(ck, DType::F32, toks));
  export_checkpoint(g, "hf", tmp.file("hf"));
  const json cfg = test::read_json(tmp.file("hf") + "/config.json");
  EXPECT_EQ(cfg["model_type"], "ministral3");
  EXPECT_EQ(family_logits(open_checkpoint(tmp.file("hf")), DType::BF16, toks), family_logits(ck, DType::BF16, toks));

  // Without YaRN the temperature's context is still original_context_length (llama.cpp's
  // n_ctx_orig_yarn), written beside it.
  ModelConfig plain = tiny_ministral3(0.1f);
  plain.rope_scaling = ModelConfig::RopeScaling::None;
  const Checkpoint pk = synthesize_checkpoint(plain, DType::F32, 6);
  export_checkpoint(pk, "gguf", tmp.file("p.gguf"));
  EXPECT_EQ(read_family_gguf(tmp.file("p.gguf")).key("mistral3.rope.scaling.original_context_length")->u, 8u);
  const Checkpoint gp = load_gguf(tmp.file("p.gguf"));
  EXPECT_EQ(gp.config.query_temperature_context, 8);
  EXPECT_EQ(family_logits(gp, DType::BF16, toks), family_logits(pk, DType::BF16, toks));
}

TEST(Mistral3Gguf, WhatItsGraphWouldRunOtherwiseIsRefusedByKey) {
  test::TempDir tmp;
  const ModelConfig c = tiny_ministral3(0.1f);
  const Checkpoint ck = synthesize_checkpoint(c, DType::F32, 6);
  GgufWriteOptions as_m3;
  as_m3.arch = "mistral3";
  // Keys that would move the rotation or the scores off what llama.cpp's graph does.
  for (const auto& [k, v] : {std::pair{"mistral3.rope.scaling.yarn_attn_factor", 0.5f},
                             std::pair{"mistral3.rope.scaling.yarn_ext_factor", 0.0f},
                             std::pair{"mistral3.attention.scale", 0.125f},
                             std::pair{"mistral3.attention.sliding_window", 16.0f}}) {
    GgufWriteOptions o = as_m3;
    o.extra_kv = {{k, std::string(k).find("window") != std::string::npos ? GgufValue::of_u32(uint32_t(v))
                                                                          : GgufValue::of_f32(v)}};
    write_gguf(tmp.file("bad.gguf"), c, views_of(ck), nullptr, o);
    const std::string e = test::error_of([&] { load_gguf(tmp.file("bad.gguf")); });
    EXPECT_NE(e.find(k), std::string::npos) << e;
  }
  // Linear scaling comes out damped in that graph: neither read nor written.
  ModelConfig lin = c;
  lin.rope_scaling = ModelConfig::RopeScaling::Linear;
  lin.rope_factor = 2.0f;
  std::string e = test::error_of([&] { write_gguf(tmp.file("l.gguf"), lin, views_of(ck), nullptr, as_m3); });
  EXPECT_NE(e.find("linear RoPE scaling has no mistral3 GGUF form"), std::string::npos) << e;
  ModelConfig none = c;
  none.rope_scaling = ModelConfig::RopeScaling::None;
  GgufWriteOptions lo = as_m3;
  lo.extra_kv = {{"mistral3.rope.scaling.type", GgufValue::of_str("linear")},
                 {"mistral3.rope.scaling.factor", GgufValue::of_f32(2.0f)}};
  write_gguf(tmp.file("l2.gguf"), none, views_of(ck), nullptr, lo);
  e = test::error_of([&] { load_gguf(tmp.file("l2.gguf")); });
  EXPECT_NE(e.find("linear RoPE scaling is not supported for mistral3"), std::string::npos) << e;
  // A YaRN attention factor other than the graph's 1, or an untruncated ramp, has no form.
  for (auto edit : {+[](ModelConfig& m) { m.rope_attention_factor = 1.2; },
                    +[](ModelConfig& m) { m.rope_yarn_truncate = false; }}) {
    ModelConfig m = c;
    edit(m);
    e = test::error_of([&] { write_gguf(tmp.file("y.gguf"), m, views_of(ck), nullptr, GgufWriteOptions{}); });
    EXPECT_NE(e.find("attention factor 1, the ramp truncated"), std::string::npos) << e;
  }
  // The temperature is Ministral 3's: a file of another architecture cannot carry it.
  GgufWriteOptions as_llama;
  as_llama.arch = "llama";
  e = test::error_of([&] { write_gguf(tmp.file("x.gguf"), c, views_of(ck), nullptr, as_llama); });
  EXPECT_NE(e.find("only as llama.cpp's mistral3"), std::string::npos) << e;
}

}  // namespace
}  // namespace kvp
