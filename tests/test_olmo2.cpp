// OLMo-2 (Olmo2ForCausalLM): Olmo2Config's defaults and what kvparity refuses of it, and its GGUF
// layout as llama.cpp's olmo2 reads it. Its numbers against transformers are
// test_family_reference.cpp's (tests/data/reference/olmo2), the invariance battery
// test_invariant.cpp's, its pinned portable digests test_portable.cpp's.
#include <gtest/gtest.h>

#include "io/checkpoint.h"
#include "io/gguf.h"
#include "io/hf_config.h"
#include "model/checkpoint_export.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "test_util.h"

namespace kvp {
namespace {

const std::string kOlmo2Base =
    R"({"architectures":["Olmo2ForCausalLM"],"model_type":"olmo2","hidden_size":64,"intermediate_size":160,
        "num_hidden_layers":2,"num_attention_heads":4,"vocab_size":50304,"max_position_embeddings":512)";

TEST(Olmo2Config, TransformersDefaultsAndRefusals) {
  const ModelConfig c = parse_hf_config(kOlmo2Base + "}", "cfg.json");
  EXPECT_EQ(c.arch, Arch::Olmo2);
  EXPECT_EQ(family_name(c), "olmo2");
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);  // Olmo2Config's, not Llama's 1e-6
  EXPECT_EQ(c.bos_id, -1);             // no BOS
  EXPECT_EQ(c.eos_id, 50279);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_TRUE(c.qk_norm());
  EXPECT_FALSE(c.qk_norm_per_head());
  EXPECT_FALSE(c.pre_norms());
  EXPECT_TRUE(c.post_norms());
  EXPECT_FALSE(c.norm_gain_in_fp32());  // v4.51's Olmo2RMSNorm rounds as Llama's
  // The class name alone names the family too.
  EXPECT_EQ(parse_hf_config(R"({"architectures":["Olmo2ForCausalLM"],"hidden_size":64,"intermediate_size":160,
      "num_hidden_layers":2,"num_attention_heads":4,"vocab_size":50304,"max_position_embeddings":512})",
                            "cfg.json")
                .arch,
            Arch::Olmo2);
  for (const auto& [field, name] :
       {std::pair{R"("rope_scaling":{"rope_type":"dynamic","factor":2.0})", "rope_scaling"},
        std::pair{R"("attention_bias":true)", "attention_bias"}, std::pair{R"("num_experts":8)", "num_experts"},
        std::pair{R"("hidden_act":"gelu")", "hidden_act"}}) {
    const std::string e = test::error_of([&, f = std::string(field)] { parse_hf_config(kOlmo2Base + "," + f + "}", "cfg.json"); });
    EXPECT_NE(e.find(name), std::string::npos) << e;
    EXPECT_NE(e.find("cfg.json"), std::string::npos) << e;
  }
  // What Olmo2Config cannot say is refused when writing it, naming the file.
  test::TempDir tmp;
  ModelConfig windowed = synthetic_config("olmo2", "tiny");
  windowed.sliding_window = 16;
  std::string e = test::error_of([&] { write_hf_config(tmp.file("config.json"), windowed, "float32", {}); });
  EXPECT_NE(e.find("no sliding window"), std::string::npos) << e;
  ModelConfig moe = synthetic_config("olmo2", "tiny");
  moe.moe.n_experts = 4;
  moe.moe.n_used = 2;
  moe.moe.expert_hidden_dim = 32;
  e = test::error_of([&] { moe.validate(); });
  EXPECT_NE(e.find("no mixture-of-experts form"), std::string::npos) << e;
  // A round trip keeps the family and its defaults.
  const ModelConfig tiny = synthetic_config("olmo2", "tiny");
  write_hf_config(tmp.file("config.json"), tiny, "float32", {});
  const ModelConfig back = read_hf_config(tmp.file("config.json"));
  EXPECT_EQ(back.arch, Arch::Olmo2);
  EXPECT_EQ(back.bos_id, -1);
  EXPECT_FLOAT_EQ(back.norm_eps, tiny.norm_eps);
}

// llama.cpp's olmo2: no attn_norm / ffn_norm, the post-norms as Gemma-2's names, q/k norms over the
// whole projection ([q_dim], [kv_dim]), q/k rows in halves. kvparity writes that and reads it back.
TEST(Olmo2Gguf, LaysTheNormsOutAsLlamaCppReadsThem) {
  EXPECT_EQ(hf_to_gguf_name("model.layers.3.post_attention_layernorm.weight", "olmo2"),
            "blk.3.post_attention_norm.weight");
  EXPECT_EQ(hf_to_gguf_name("model.layers.3.post_feedforward_layernorm.weight", "olmo2"), "blk.3.post_ffw_norm.weight");
  EXPECT_EQ(hf_to_gguf_name("model.layers.3.self_attn.q_norm.weight", "olmo2"), "blk.3.attn_q_norm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.0.post_ffw_norm.weight", "olmo2"), "model.layers.0.post_feedforward_layernorm.weight");
  const ModelConfig c = synthetic_config("olmo2", "tiny");
  test::TempDir tmp;
  const std::string path = tmp.file("olmo2.gguf");
  export_checkpoint(synthesize_checkpoint(c, DType::F32), "gguf", path, {});
  const Checkpoint g = load_gguf(path);
  EXPECT_EQ(g.config.arch, Arch::Olmo2);
  EXPECT_EQ(g.qk_layout, RopeLayout::Halves);
  EXPECT_EQ(g.tensors.count("model.layers.0.input_layernorm.weight"), 0u);
  EXPECT_EQ(g.tensors.count("model.layers.0.post_attention_layernorm.weight"), 1u);
  ASSERT_EQ(g.tensors.count("model.layers.0.self_attn.q_norm.weight"), 1u);
  EXPECT_EQ(g.tensors.at("model.layers.0.self_attn.q_norm.weight").numel(), c.q_dim());
  EXPECT_EQ(g.tensors.at("model.layers.0.self_attn.k_norm.weight").numel(), c.kv_dim());
  // A file missing a post-norm is refused, naming it.
  Checkpoint broken = synthesize_checkpoint(c, DType::F32);
  broken.tensors.erase("model.layers.1.post_feedforward_layernorm.weight");
  const std::string e = test::error_of([&] { Model::from_checkpoint(broken, DType::F32); });
  EXPECT_NE(e.find("model.layers.1.post_feedforward_layernorm.weight"), std::string::npos) << e;
}

}  // namespace
}  // namespace kvp
