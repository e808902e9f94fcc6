// Mixtures of experts saved as transformers v5 holds them (src/io/hf_fused_experts.h): each MoE
// reference re-packed with one gate_up_proj and one down_proj per layer (and Mixtral's router at
// mlp.gate) is the same model, bit for bit, and still transformers' within 1e-4.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/checkpoint.h"
#include "io/model_writer.h"
#include "model/model.h"
#include "model/moe_names.h"
#include "reference_files.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

using test::read_f32;
using test::read_json;

// `ref`'s tensors with every sparse layer's experts fused (v5's layout), written into `dir`;
// `drop` names a fused tensor to leave out, `keep_one` a per-expert tensor to keep beside them.
void write_fused(const std::string& ref, const std::string& dir, const std::string& drop = "",
                 const std::string& keep_one = "") {
  const Checkpoint ck = open_checkpoint(ref);
  const ModelConfig& c = ck.config;
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<TensorView> out;
  std::set<std::string> fused_away;
  for (int l = 0; l < c.n_layers; ++l) {
    if (!c.moe_layer(l)) continue;
    const std::string p = "model.layers." + std::to_string(l) + ".mlp.";
    auto stack = [&](const std::string& name, std::vector<ExpertMatrix> ms) {
      std::vector<uint8_t> b;
      TensorView first;
      for (int e = 0; e < c.moe.n_experts; ++e)
        for (ExpertMatrix m : ms) {
          const TensorView& t = ck.tensors.at(expert_matrix_name(c, l, e, m));
          first = t;
          const auto* d = static_cast<const uint8_t*>(t.data);
          b.insert(b.end(), d, d + t.nbytes());
          fused_away.insert(t.name);
        }
      bufs.push_back(std::move(b));
      TensorView v = first;
      v.name = name;
      v.shape = {c.moe.n_experts, first.shape[0] * int64_t(ms.size()), first.shape[1]};
      v.data = bufs.back().data();
      if (name != drop) out.push_back(v);
    };
    stack(p + "experts.gate_up_proj", {ExpertMatrix::Gate, ExpertMatrix::Up});
    stack(p + "experts.down_proj", {ExpertMatrix::Down});
  }
  for (const auto& [name, t] : ck.tensors) {
    if (fused_away.count(name) && name != keep_one) continue;
    TensorView v = t;
    const std::string block = ".block_sparse_moe.gate.weight";  // v5 renames Mixtral's block to mlp
    if (const size_t at = name.find(block); at != std::string::npos) v.name = name.substr(0, at) + ".mlp.gate.weight";
    out.push_back(v);
  }
  std::filesystem::create_directories(dir);
  write_safetensors(dir + "/model.safetensors", out);
  std::filesystem::copy_file(ref + "/config.json", dir + "/config.json");
}

class FusedExperts : public ::testing::TestWithParam<std::string> {};

TEST_P(FusedExperts, V5LayoutIsTheSameModel) {
  KVP_REQUIRE_REFERENCE(ref, GetParam());
  test::TempDir tmp;
  write_fused(ref, tmp.file("fused"));
  const Checkpoint fused = open_checkpoint(tmp.file("fused"));
  const Checkpoint plain = open_checkpoint(ref);
  EXPECT_EQ(fused.tensors.size(), plain.tensors.size());
  const auto tokens = read_json(ref + "/tokens.json")["input_ids"].get<std::vector<int>>();
  std::vector<std::vector<float>> logits;
  for (const Checkpoint* ck : {&plain, &fused}) {
    Engine engine(Model::from_checkpoint(*ck, DType::F32), EngineOptions{});
    const float* l = engine.forward(tokens.data(), int(tokens.size()), 0, ForwardOptions{});
    logits.emplace_back(l, l + tokens.size() * size_t(plain.config.vocab_size));
  }
  EXPECT_EQ(logits[0], logits[1]);
  EXPECT_LE(test::max_abs_diff(logits[1], read_f32(ref + "/logits.f32")), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Families, FusedExperts, ::testing::Values("mixtral", "qwen2_moe", "qwen3_moe", "olmoe"));

TEST(FusedExpertsErrors, MissingPartnerWrongShapeAndBothFormsAreNamed) {
  KVP_REQUIRE_REFERENCE(ref, "qwen3_moe");
  test::TempDir tmp;
  write_fused(ref, tmp.file("a"), "model.layers.0.mlp.experts.down_proj");
  std::string e = test::error_of([&] { open_checkpoint(tmp.file("a")); });
  EXPECT_NE(e.find("'model.layers.0.mlp.experts.gate_up_proj' has no 'model.layers.0.mlp.experts.down_proj' beside it"),
            std::string::npos)
      << e;
  write_fused(ref, tmp.file("b"), "", "model.layers.1.mlp.experts.3.up_proj.weight");
  e = test::error_of([&] { open_checkpoint(tmp.file("b")); });
  EXPECT_NE(e.find("layer 1 has both 'model.layers.1.mlp.experts.gate_up_proj' and "
                   "'model.layers.1.mlp.experts.3.up_proj.weight'"),
            std::string::npos)
      << e;
  // Experts of another width than the config's (Qwen3-VL-MoE's transposed layout is one).
  write_fused(ref, tmp.file("c"));
  nlohmann::json cfg = read_json(tmp.file("c/config.json"));
  cfg["moe_intermediate_size"] = cfg["moe_intermediate_size"].get<int>() * 2;
  std::ofstream(tmp.file("c/config.json")) << cfg.dump();
  e = test::error_of([&] { open_checkpoint(tmp.file("c")); });
  EXPECT_NE(e.find("tensor 'model.layers.0.mlp.experts.gate_up_proj' has shape [8, 96, 64]; the config's experts make "
                   "it [8, 192, 64]"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace kvp
