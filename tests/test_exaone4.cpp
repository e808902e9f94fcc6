// EXAONE 4.0 (Exaone4ForCausalLM; src/io/hf_exaone4.h): OLMo-2's block placement with Llama's
// rounding, q/k normalised per head, and a hybrid of windowed rotating layers and global NoPE
// layers. With one head the per-head norm is OLMo-2's whole-projection norm, so that model is
// OLMo-2 bit for bit in every dtype; the global layers' q and k leave RoPE as they came, the
// windowed layers' rows before the window are the unwindowed model's; the published configs read
// as their models; config.json round-trips (GGUF: test_family_gguf.cpp).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "io/hf_config.h"
#include "lab/model_inspection.h"
#include "model/checkpoint_export.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "reference_files.h"
#include "rope_capture.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

using nlohmann::json;

std::vector<float> exaone4_logits(const Checkpoint& ck, DType dt, const std::vector<int>& toks,
                                  ForwardHooks* hooks = nullptr) {
  Engine e(Model::from_checkpoint(ck, dt), EngineOptions{});
  ForwardOptions fo;
  fo.hooks = hooks;
  const float* l = e.forward(toks.data(), int(toks.size()), 0, fo);
  return {l, l + toks.size() * size_t(ck.config.vocab_size)};
}

std::vector<int> some_tokens(size_t n) {
  std::vector<int> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = int(3 + (i * 47) % 500);
  return t;
}

const std::string kBase = R"({"architectures":["Exaone4ForCausalLM"],"model_type":"exaone4","hidden_size":64,
    "intermediate_size":160,"num_hidden_layers":8,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,
    "vocab_size":512,"max_position_embeddings":512)";

TEST(Exaone4Config, ThePublishedFormsAndExaone4ConfigsDefaults) {
  // EXAONE-4.0-32B's form: a window of 4096, "LLLG" beside layer_types, llama3 RoPE scaling.
  json kinds = json::array();
  for (int l = 0; l < 8; ++l) kinds.push_back((l + 1) % 4 ? "sliding_attention" : "full_attention");
  const ModelConfig big = parse_hf_config(kBase + R"(,"sliding_window":4096,"sliding_window_pattern":"LLLG",
      "rope_theta":1000000.0,"rope_scaling":{"rope_type":"llama3","factor":16.0,"low_freq_factor":1.0,
      "high_freq_factor":4.0,"original_max_position_embeddings":8192},"layer_types":)" + kinds.dump() + "}",
                                          "config.json");
  EXPECT_EQ(big.arch, Arch::Exaone4);
  EXPECT_EQ(family_name(big), "exaone4");
  EXPECT_EQ(big.sliding_window, 4096);
  EXPECT_EQ(big.nope_layers, (std::vector<int>{3, 7}));
  for (int l = 0; l < 8; ++l) {
    EXPECT_EQ(big.window_for_layer(l), l % 4 == 3 ? 0 : 4096) << l;
    EXPECT_EQ(big.rotates(l), l % 4 != 3) << l;
  }
  EXPECT_EQ(big.rope_scaling, ModelConfig::RopeScaling::Llama3);
  EXPECT_TRUE(big.qk_norm_per_head());
  EXPECT_FALSE(big.pre_norms());
  EXPECT_TRUE(big.post_norms());
  EXPECT_FALSE(big.norm_gain_in_fp32());  // Exaone4RMSNorm is Llama's
  EXPECT_FALSE(big.rope_rounds_once());
  EXPECT_FLOAT_EQ(big.norm_eps, 1e-5f);
  EXPECT_EQ(big.bos_id, 0);
  EXPECT_EQ(big.eos_id, 2);
  // EXAONE-4.0-1.2B's: no window, so every layer is global and rotates.
  const ModelConfig small = parse_hf_config(kBase + R"(,"sliding_window":null,"tie_word_embeddings":true})", "config.json");
  EXPECT_EQ(small.sliding_window, 0);
  EXPECT_TRUE(small.nope_layers.empty());
  // An integer pattern without layer_types: Exaone4Config's (i + 1) % P.
  const ModelConfig p2 = parse_hf_config(kBase + R"(,"sliding_window":32,"sliding_window_pattern":2})", "config.json");
  EXPECT_EQ(p2.nope_layers, (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(p2.window_for_layer(0), 32);
  // Refused by field: a string pattern without layer_types (transformers cannot build it either),
  // layer kinds that are not all-but-every-P-th.
  std::string e = test::error_of([&] { parse_hf_config(kBase + R"(,"sliding_window_pattern":"LLLG"})", "config.json"); });
  EXPECT_NE(e.find("sliding_window_pattern"), std::string::npos) << e;
  json odd = kinds;
  odd[0] = "full_attention";
  e = test::error_of([&] { parse_hf_config(kBase + R"(,"layer_types":)" + odd.dump() + "}", "config.json"); });
  EXPECT_NE(e.find("layer_types"), std::string::npos) << e;
}

// One head: the per-head q/k norm is OLMo-2's norm over the whole projection, and without a window
// EXAONE 4.0 is OLMo-2 (v4.51's rounding, Llama's) bit for bit.
TEST(Exaone4, OneHeadWithoutAWindowIsOlmo2BitForBit) {
  ModelConfig c = synthetic_config("exaone4", "tiny");
  c.n_heads = 1;
  c.n_kv_heads = 1;
  c.head_dim = c.dim;
  c.sliding_window = 0;
  c.sliding_window_period = 1;
  c.nope_layers.clear();
  const Checkpoint ex = synthesize_checkpoint(c, DType::F32, 9);
  Checkpoint olmo2 = ex;
  olmo2.config.arch = Arch::Olmo2;
  const auto toks = some_tokens(24);
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    EXPECT_EQ(exaone4_logits(ex, dt, toks), exaone4_logits(olmo2, dt, toks)) << dtype_name(dt);
}

// The global layer (3) is NoPE: its q and k leave RoPE unchanged, the local layers' do not; the
// window bites past 16 positions only.
TEST(Exaone4, GlobalLayersTakeNoRopeAndLocalLayersTheWindow) {
  const ModelConfig c = synthetic_config("exaone4", "tiny");
  ASSERT_EQ(c.nope_layers, (std::vector<int>{3}));
  const Checkpoint ck = synthesize_checkpoint(c, DType::F32, 4);
  const auto toks = some_tokens(40);
  test::RopeCapture cap;
  const auto windowed = exaone4_logits(ck, DType::BF16, toks, &cap);
  for (int l = 0; l < c.n_layers; ++l) {
    EXPECT_EQ(cap.unrotated(l, HookPoint::QPre, HookPoint::Q), l == 3) << "layer " << l;
    EXPECT_EQ(cap.unrotated(l, HookPoint::KPre, HookPoint::K), l == 3) << "layer " << l;
  }
  Checkpoint wide = ck;
  wide.config.sliding_window = 4096;
  const auto unwindowed = exaone4_logits(wide, DType::BF16, toks);
  const size_t V = size_t(c.vocab_size);
  EXPECT_EQ(std::vector<float>(windowed.begin(), windowed.begin() + 16 * V),
            std::vector<float>(unwindowed.begin(), unwindowed.begin() + 16 * V));
  EXPECT_GT(test::max_abs_diff(windowed, unwindowed), 1e-3);
}

TEST(Exaone4, ConfigJsonRoundTrips) {
  test::TempDir tmp;
  const Checkpoint ck = synthesize_checkpoint(synthetic_config("exaone4", "tiny"), DType::F32, 4);
  export_checkpoint(ck, "hf", tmp.file("hf"));
  const json cfg = test::read_json(tmp.file("hf") + "/config.json");
  EXPECT_EQ(cfg["model_type"], "exaone4");
  EXPECT_EQ(cfg["architectures"], json({"Exaone4ForCausalLM"}));
  EXPECT_EQ(cfg["sliding_window"], 16);
  EXPECT_EQ(cfg["layer_types"],
            json({"sliding_attention", "sliding_attention", "sliding_attention", "full_attention"}));
  const Checkpoint back = open_checkpoint(tmp.file("hf"));
  EXPECT_EQ(back.config.nope_layers, ck.config.nope_layers);
  const auto toks = some_tokens(30);
  EXPECT_EQ(exaone4_logits(back, DType::BF16, toks), exaone4_logits(ck, DType::BF16, toks));
  InspectOptions io;
  io.model = tmp.file("hf");
  const std::string text = inspect_text(inspect_model(io));
  EXPECT_NE(text.find("none in layers 3 (NoPE)"), std::string::npos) << text;
  EXPECT_NE(text.find("q/k normalised per head"), std::string::npos) << text;
  // A layer without RoPE that is not a global layer has no config.json form.
  Checkpoint odd = ck;
  odd.config.nope_layers = {1};
  const std::string w = test::error_of([&] { export_checkpoint(odd, "hf", tmp.file("odd")); });
  EXPECT_NE(w.find("no config.json form"), std::string::npos) << w;
}

}  // namespace
}  // namespace kvp
