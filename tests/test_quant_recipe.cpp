// Which format each tensor gets in a quantised GGUF: llama-quantize's choices for its file types
// (llama_tensor_get_type, Llama-family models, no importance matrix), written out here per type
// and layer rather than computed by the rules under test.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/quant.h"
#include "io/checkpoint.h"
#include "model/checkpoint_export.h"
#include "model/quant_recipe.h"
#include "model/synthetic.h"
#include "test_util.h"

namespace kvp {
namespace {

std::string layer_tensor(int layer, const char* part) {
  return "model.layers." + std::to_string(layer) + "." + part + ".weight";
}

QuantType type_of(const char* recipe, const std::string& tensor, QuantShape shape = {32, 1, false}, long cols = 4096,
                  bool pure = false) {
  const auto r = parse_quant_recipe(recipe, pure);
  EXPECT_TRUE(r) << recipe;
  return r ? quant_for_tensor(*r, tensor, shape, cols) : QuantType::None;
}

// attn_v / ffn_down of each of 32 layers.
void expect_layers(const char* recipe, const char* part, const std::set<int>& upgraded, QuantType up, QuantType rest,
                   QuantShape shape = {32, 1, false}) {
  for (int l = 0; l < 32; ++l)
    EXPECT_EQ(type_of(recipe, layer_tensor(l, part), shape), upgraded.count(l) ? up : rest)
        << recipe << " " << part << " layer " << l;
}

// use_more_bits over 32 layers: the first and last eighth, and every third layer from 6.
const std::set<int> kMoreBits32 = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31};

TEST(QuantRecipe, Q4_K_MAndQ5_K_MGiveSixBitsToAttnVAndFfnDownInTheUseMoreBitsLayers) {
  expect_layers("Q4_K_M", "self_attn.v_proj", kMoreBits32, QuantType::Q6_K, QuantType::Q4_K);
  expect_layers("Q4_K_M", "mlp.down_proj", kMoreBits32, QuantType::Q6_K, QuantType::Q4_K);
  expect_layers("Q5_K_M", "self_attn.v_proj", kMoreBits32, QuantType::Q6_K, QuantType::Q5_K);
  expect_layers("Q5_K_M", "mlp.down_proj", kMoreBits32, QuantType::Q6_K, QuantType::Q5_K);
  for (const char* part : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj"})
    EXPECT_EQ(type_of("Q4_K_M", layer_tensor(0, part)), QuantType::Q4_K) << part;
  EXPECT_EQ(type_of("Q4_K_M", "lm_head.weight"), QuantType::Q6_K);
  EXPECT_EQ(type_of("Q4_K_M", "model.embed_tokens.weight"), QuantType::Q4_K);
  EXPECT_EQ(type_of("q4_k_m", "model.embed_tokens.weight"), QuantType::Q4_K);  // names in any case
}

TEST(QuantRecipe, Q3_KAndQ4_K_SMixes) {
  expect_layers("Q3_K_M", "self_attn.v_proj", {0, 1}, QuantType::Q5_K, QuantType::Q4_K);
  expect_layers("Q3_K_M", "mlp.down_proj", {0, 1}, QuantType::Q5_K, QuantType::Q4_K);  // n/16 = 2
  EXPECT_EQ(type_of("Q3_K_M", layer_tensor(7, "self_attn.o_proj")), QuantType::Q4_K);
  EXPECT_EQ(type_of("Q3_K_M", layer_tensor(7, "self_attn.q_proj")), QuantType::Q3_K);
  expect_layers("Q3_K_L", "self_attn.v_proj", {}, QuantType::Q5_K, QuantType::Q5_K);
  expect_layers("Q3_K_L", "mlp.down_proj", {}, QuantType::Q5_K, QuantType::Q5_K);
  EXPECT_EQ(type_of("Q3_K_L", layer_tensor(7, "self_attn.o_proj")), QuantType::Q5_K);
  expect_layers("Q3_K_S", "self_attn.v_proj", {}, QuantType::Q3_K, QuantType::Q3_K);
  EXPECT_EQ(type_of("Q3_K_S", "lm_head.weight"), QuantType::Q6_K);
  expect_layers("Q4_K_S", "self_attn.v_proj", {0, 1, 2, 3}, QuantType::Q5_K, QuantType::Q4_K);
  expect_layers("Q4_K_S", "mlp.down_proj", {0, 1, 2, 3}, QuantType::Q5_K, QuantType::Q4_K);  // n/8 = 4
  EXPECT_EQ(type_of("Q5_K_S", layer_tensor(0, "mlp.down_proj")), QuantType::Q5_K);
  EXPECT_EQ(type_of("Q5_K_S", "lm_head.weight"), QuantType::Q6_K);
}

TEST(QuantRecipe, Q2_KAndIQ4DependOnHowManyQueryHeadsShareAKvHead) {
  const QuantShape mha{32, 1, false}, gqa{32, 4, false};
  expect_layers("Q2_K", "self_attn.v_proj", {}, QuantType::Q3_K, QuantType::Q3_K, mha);
  expect_layers("Q2_K", "self_attn.v_proj", {}, QuantType::Q4_K, QuantType::Q4_K, gqa);
  expect_layers("Q2_K", "mlp.down_proj", {}, QuantType::Q3_K, QuantType::Q3_K);
  EXPECT_EQ(type_of("Q2_K", layer_tensor(3, "self_attn.o_proj")), QuantType::Q3_K);
  EXPECT_EQ(type_of("Q2_K", layer_tensor(3, "mlp.up_proj")), QuantType::Q2_K);
  expect_layers("Q2_K_S", "self_attn.v_proj", {}, QuantType::Q2_K, QuantType::Q2_K, mha);
  expect_layers("Q2_K_S", "self_attn.v_proj", {}, QuantType::Q4_K, QuantType::Q4_K, gqa);
  expect_layers("Q2_K_S", "mlp.down_proj", {0, 1, 2, 3}, QuantType::Q4_K, QuantType::Q2_K);
  for (const char* iq : {"IQ4_XS", "IQ4_NL"}) {
    const QuantType base = *parse_quant(iq);
    expect_layers(iq, "self_attn.v_proj", {}, base, base, mha);
    expect_layers(iq, "self_attn.v_proj", {}, QuantType::Q5_K, QuantType::Q5_K, gqa);
    expect_layers(iq, "mlp.down_proj", {0, 1, 2, 3}, QuantType::Q5_K, base);
    EXPECT_EQ(type_of(iq, "lm_head.weight"), QuantType::Q6_K);
  }
}

TEST(QuantRecipe, TheOutputMatrixTakesSixBitsUnlessTheFileIsQ8_0) {
  for (const char* legacy : {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q6_K"}) {
    EXPECT_EQ(type_of(legacy, "lm_head.weight"), QuantType::Q6_K) << legacy;
    EXPECT_EQ(type_of(legacy, layer_tensor(0, "self_attn.v_proj")), *parse_quant(legacy)) << legacy;
    EXPECT_EQ(type_of(legacy, "model.embed_tokens.weight"), *parse_quant(legacy)) << legacy;
  }
  EXPECT_EQ(type_of("Q8_0", "lm_head.weight"), QuantType::Q8_0);
  // Tied: the token embedding is the output matrix.
  EXPECT_EQ(type_of("Q4_K_M", "model.embed_tokens.weight", {32, 1, true}), QuantType::Q6_K);
  EXPECT_EQ(type_of("Q8_0", "model.embed_tokens.weight", {32, 1, true}), QuantType::Q8_0);
}

TEST(QuantRecipe, RowsTheBlocksDoNotDivideTakeLlamaCppsFallback) {
  const QuantShape s{24, 7, true};  // Qwen2.5-0.5B: 896-wide rows, 14 heads on 2 KV heads
  EXPECT_EQ(type_of("Q4_K_M", layer_tensor(5, "self_attn.q_proj"), s, 896), QuantType::Q5_0);
  EXPECT_EQ(type_of("Q4_K_M", layer_tensor(0, "self_attn.v_proj"), s, 896), QuantType::Q8_0);  // Q6_K
  EXPECT_EQ(type_of("Q4_K_M", "model.embed_tokens.weight", s, 896), QuantType::Q8_0);          // output
  EXPECT_EQ(type_of("Q4_K_M", layer_tensor(4, "mlp.down_proj"), s, 4864), QuantType::Q4_K);    // 19 blocks
  EXPECT_EQ(type_of("Q4_K_M", layer_tensor(5, "mlp.down_proj"), s, 4864), QuantType::Q6_K);    // (5 - 3) % 3 == 2
  EXPECT_EQ(type_of("Q5_K_S", layer_tensor(5, "mlp.up_proj"), s, 896), QuantType::Q5_1);
  EXPECT_EQ(type_of("Q3_K_S", layer_tensor(5, "mlp.up_proj"), s, 896), QuantType::IQ4_NL);
  EXPECT_EQ(type_of("Q2_K", layer_tensor(5, "mlp.up_proj"), s, 896), QuantType::IQ4_NL);
  EXPECT_EQ(type_of("IQ4_XS", layer_tensor(5, "mlp.up_proj"), s, 896), QuantType::IQ4_NL);
  EXPECT_EQ(type_of("Q4_K", layer_tensor(5, "mlp.up_proj"), s, 896), QuantType::Q5_0);
  // Rows not even 32 wide stay in their float dtype.
  for (const char* r : {"Q4_K_M", "Q8_0", "Q4_0", "IQ4_XS", "Q6_K"})
    EXPECT_EQ(type_of(r, layer_tensor(1, "mlp.down_proj"), s, 172), QuantType::None) << r;
}

TEST(QuantRecipe, PureAndTheFormatsWithoutAFileTypeUseOneFormat) {
  for (const char* part : {"self_attn.v_proj", "mlp.down_proj", "self_attn.o_proj"}) {
    EXPECT_EQ(type_of("Q4_K_M", layer_tensor(0, part), {32, 4, false}, 4096, true), QuantType::Q4_K) << part;
    EXPECT_EQ(type_of("Q2_K", layer_tensor(0, part), {32, 4, false}, 4096, true), QuantType::Q2_K) << part;
    for (const char* single : {"Q3_K", "Q4_K", "Q5_K"})
      EXPECT_EQ(type_of(single, layer_tensor(0, part), {32, 4, false}), *parse_quant(single)) << single << part;
  }
  EXPECT_EQ(type_of("Q4_0", "lm_head.weight", {32, 1, false}, 4096, true), QuantType::Q4_0);
  EXPECT_EQ(type_of("Q4_K", "lm_head.weight"), QuantType::Q4_K);
  const auto r = parse_quant_recipe("Q4_K");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->pure);
  EXPECT_EQ(r->file_type, 15u);
  EXPECT_FALSE(parse_quant_recipe("Q4_K_XL"));
  const auto names = quant_recipe_names();
  for (const char* n : {"Q2_K_S", "Q3_K_M", "Q4_K_M", "Q5_K_S", "IQ4_XS", "Q4_K"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
}

// LLAMA_FTYPE_MOSTLY_MXFP4_MOE (38): the routed experts' matrices (Mixtral's and Qwen-MoE's per-expert
// names and the stacked GGUF name) MXFP4, every other matrix Q8_0, the output and a dense model's
// MLP included; Qwen2-MoE's shared expert is no routed expert. `MXFP4` alone (or --pure) is MXFP4
// everywhere.
TEST(QuantRecipe, Mxfp4MoePutsTheExpertsInMxfp4AndTheRestInQ8_0) {
  const auto r = parse_quant_recipe("mxfp4_moe");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->name, "MXFP4_MOE");
  EXPECT_EQ(r->file_type, 38u);
  EXPECT_FALSE(r->pure);
  for (const char* part : {"block_sparse_moe.experts.0.w1", "block_sparse_moe.experts.3.w2", "mlp.experts.7.up_proj",
                           "mlp.experts.12.down_proj", "mlp.experts.gate_proj"})
    EXPECT_EQ(type_of("MXFP4_MOE", layer_tensor(1, part)), QuantType::MXFP4) << part;
  for (const char* part : {"self_attn.q_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.down_proj", "mlp.up_proj",
                           "mlp.shared_expert.down_proj", "block_sparse_moe.gate", "mlp.gate"})
    EXPECT_EQ(type_of("MXFP4_MOE", layer_tensor(1, part)), QuantType::Q8_0) << part;
  EXPECT_EQ(type_of("MXFP4_MOE", "lm_head.weight"), QuantType::Q8_0);
  EXPECT_EQ(type_of("MXFP4_MOE", "model.embed_tokens.weight", {32, 1, true}), QuantType::Q8_0);
  // Rows not a whole number of 32-value blocks stay in their float dtype, experts or not.
  EXPECT_EQ(type_of("MXFP4_MOE", layer_tensor(1, "mlp.experts.0.down_proj"), {32, 1, false}, 172), QuantType::None);
  EXPECT_EQ(type_of("MXFP4_MOE", layer_tensor(1, "mlp.down_proj"), {32, 1, false}, 172), QuantType::None);
  // Pure: every matrix MXFP4, recorded as file type 38 too.
  EXPECT_EQ(type_of("MXFP4_MOE", layer_tensor(1, "self_attn.q_proj"), {32, 1, false}, 4096, true), QuantType::MXFP4);
  const auto single = parse_quant_recipe("MXFP4");
  ASSERT_TRUE(single);
  EXPECT_TRUE(single->pure);
  EXPECT_EQ(single->file_type, 38u);
  EXPECT_EQ(type_of("MXFP4", "lm_head.weight"), QuantType::MXFP4);
  const auto names = quant_recipe_names();
  for (const char* n : {"MXFP4", "MXFP4_MOE"}) EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
}

// In a written file: a mixture's experts MXFP4 and its attention Q8_0, the routers unquantised; a
// dense model's every matrix Q8_0.
TEST(QuantRecipe, Mxfp4MoeFilesCarryTheMixAndADenseModelIsQ8_0) {
  test::TempDir tmp;
  ExportOptions eo;
  eo.quant = "MXFP4_MOE";
  const ModelConfig moe = synthetic_config("qwen3_moe", "tiny");
  export_checkpoint(synthesize_checkpoint(moe, DType::F32, 3), "gguf", tmp.file("moe.gguf"), eo);
  const Checkpoint m = open_checkpoint(tmp.file("moe.gguf"));
  EXPECT_EQ(m.tensors.at("model.layers.0.mlp.experts.2.down_proj.weight").quant, QuantType::MXFP4);
  EXPECT_EQ(m.tensors.at("model.layers.0.self_attn.k_proj.weight").quant, QuantType::Q8_0);
  EXPECT_FALSE(m.tensors.at("model.layers.0.mlp.gate.weight").quantized());
  EXPECT_EQ(m.tensors.at("model.layers.2.mlp.up_proj.weight").quant, QuantType::Q8_0);  // its dense layer
  export_checkpoint(synthesize_checkpoint(synthetic_config("llama", "tiny"), DType::F32, 3), "gguf",
                    tmp.file("dense.gguf"), eo);
  for (const auto& [name, t] : open_checkpoint(tmp.file("dense.gguf")).tensors) {
    if (t.shape.size() == 2) {
      EXPECT_EQ(t.quant, QuantType::Q8_0) << name;
    }
  }
}

// Through export_checkpoint: the types land in the file, per tensor.
TEST(QuantRecipe, AnExportedFileCarriesTheMix) {
  ModelConfig c = synthetic_config("llama", "tiny");
  c.dim = 256;
  c.hidden_dim = 512;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 1;
  c.head_dim = 64;
  c.vocab_size = 320;
  c.max_seq_len = 64;
  const Checkpoint src = synthesize_checkpoint(c, DType::F32, 7);
  test::TempDir tmp;
  ExportOptions eo;
  eo.quant = "Q3_K_M";
  export_checkpoint(src, "gguf", tmp.file("m.gguf"), eo);
  const Checkpoint got = open_checkpoint(tmp.file("m.gguf"));
  auto quant = [&](const std::string& name) { return got.tensors.at(name).quant; };
  EXPECT_EQ(quant(layer_tensor(1, "self_attn.v_proj")), QuantType::Q5_K);
  EXPECT_EQ(quant(layer_tensor(1, "mlp.down_proj")), QuantType::Q4_K);
  EXPECT_EQ(quant(layer_tensor(1, "self_attn.o_proj")), QuantType::Q4_K);
  EXPECT_EQ(quant(layer_tensor(1, "mlp.gate_proj")), QuantType::Q3_K);
  const bool tied = !got.tensors.count("lm_head.weight");
  EXPECT_EQ(quant(tied ? "model.embed_tokens.weight" : "lm_head.weight"), QuantType::Q6_K);
  EXPECT_EQ(got.tensors.at("model.norm.weight").dtype, DType::F32);
  eo.quant_pure = true;
  export_checkpoint(src, "gguf", tmp.file("p.gguf"), eo);
  for (const auto& [name, t] : open_checkpoint(tmp.file("p.gguf")).tensors)
    if (t.shape.size() == 2) EXPECT_EQ(t.quant, QuantType::Q3_K) << name;
}

}  // namespace
}  // namespace kvp
