// Phi-3 and Phi-4 (Phi3ForCausalLM; src/io/hf_fused_projections.h): transformers runs them as
// Mistral's decoder (Llama's without a window) with q/k/v and gate/up fused. The Llama and Mistral
// references re-packed that way are the same models, bit for bit, and still transformers' within
// 1e-4; published configs read as their models, and what kvparity cannot run is refused by field.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "io/checkpoint.h"
#include "io/hf_config.h"
#include "io/model_writer.h"
#include "lab/model_inspection.h"
#include "model/model.h"
#include "reference_files.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

using nlohmann::json;

// `ck`'s tensors as Phi3ForCausalLM holds them: each layer's q/k/v rows stacked into qkv_proj,
// gate and up into gate_up_proj (their bytes in `bufs`).
std::vector<TensorView> phi3_tensors(const Checkpoint& ck, std::vector<std::vector<uint8_t>>& bufs) {
  const ModelConfig& c = ck.config;
  bufs.reserve(size_t(2 * c.n_layers));
  std::vector<TensorView> out;
  std::set<std::string> fused;
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    auto stack = [&](const std::string& name, std::vector<std::string> parts) {
      std::vector<uint8_t> b;
      TensorView v = ck.tensors.at(p + parts[0]);
      int64_t rows = 0;
      for (const std::string& part : parts) {
        const TensorView& t = ck.tensors.at(p + part);
        const auto* d = static_cast<const uint8_t*>(t.data);
        b.insert(b.end(), d, d + t.nbytes());
        rows += t.shape[0];
        fused.insert(t.name);
      }
      bufs.push_back(std::move(b));
      v.name = p + name;
      v.shape = {rows, v.shape[1]};
      v.data = bufs.back().data();
      out.push_back(v);
    };
    stack("self_attn.qkv_proj.weight", {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"});
    stack("mlp.gate_up_proj.weight", {"mlp.gate_proj.weight", "mlp.up_proj.weight"});
  }
  for (const auto& [name, t] : ck.tensors)
    if (!fused.count(name)) out.push_back(t);
  return out;
}

// `ref` as Phi3ForCausalLM. `extra` is a tensor added as is (to test refusals).
void write_phi3(const std::string& ref, const std::string& dir, const TensorView* extra = nullptr) {
  const Checkpoint ck = open_checkpoint(ref);
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<TensorView> out = phi3_tensors(ck, bufs);
  if (extra != nullptr) out.push_back(*extra);
  std::filesystem::create_directories(dir);
  write_safetensors(dir + "/model.safetensors", out);
  json cfg = test::read_json(ref + "/config.json");
  cfg["architectures"] = {"Phi3ForCausalLM"};
  cfg["model_type"] = "phi3";
  if (!cfg.contains("sliding_window")) cfg["sliding_window"] = nullptr;
  cfg.update({{"original_max_position_embeddings", cfg["max_position_embeddings"]}, {"resid_pdrop", 0.0},
              {"embd_pdrop", 0.0}, {"attention_bias", false}, {"pad_token_id", 0}});
  std::ofstream(dir + "/config.json") << cfg.dump(2);
}

class Phi3 : public ::testing::TestWithParam<std::string> {};

TEST_P(Phi3, FusedProjectionsAreTheSameModel) {
  const std::string fam = GetParam();
  KVP_REQUIRE_REFERENCE(ref, fam);
  test::TempDir tmp;
  write_phi3(ref, tmp.file("phi3"));
  const Checkpoint phi = open_checkpoint(tmp.file("phi3")), plain = open_checkpoint(ref);
  EXPECT_EQ(phi.read_from, "Phi3ForCausalLM");
  EXPECT_EQ(family_name(phi.config), fam) << "a window makes it Mistral's decoder";
  EXPECT_EQ(phi.config.sliding_window, plain.config.sliding_window);
  EXPECT_EQ(phi.tensors.size(), plain.tensors.size());
  const auto tokens = test::read_json(ref + "/tokens.json")["input_ids"].get<std::vector<int>>();
  std::vector<std::vector<float>> logits;
  for (const Checkpoint* ck : {&plain, &phi})
    for (DType dt : {DType::F32, DType::BF16}) {
      Engine engine(Model::from_checkpoint(*ck, dt), EngineOptions{});
      const float* l = engine.forward(tokens.data(), int(tokens.size()), 0, ForwardOptions{});
      logits.emplace_back(l, l + tokens.size() * size_t(plain.config.vocab_size));
    }
  EXPECT_EQ(logits[0], logits[2]) << "fp32";
  EXPECT_EQ(logits[1], logits[3]) << "bf16";
  EXPECT_LE(test::max_abs_diff(logits[2], test::read_f32(ref + "/logits.f32")), 1e-4);
  InspectOptions io;
  io.model = tmp.file("phi3");
  const json d = inspect_model(io);
  EXPECT_EQ(d["read_from"], "Phi3ForCausalLM");
  EXPECT_TRUE(d["file"]["unused"].empty()) << d["file"]["unused"].dump();
  EXPECT_NE(inspect_text(d).find("read from Phi3ForCausalLM"), std::string::npos);
}

// The same as llama.cpp's converter writes it: arch "phi3", attn_qkv and ffn_up fused (gate's
// rows first), q/k rows unpermuted (its rope type is NEOX, halves), the window under
// phi3.attention.sliding_window. Read as transformers runs it, window kept.
TEST_P(Phi3, LlamaCppPhi3GgufIsTheSameModel) {
  const std::string fam = GetParam();
  KVP_REQUIRE_REFERENCE(ref, fam);
  test::TempDir tmp;
  const Checkpoint plain = open_checkpoint(ref);
  std::vector<std::vector<uint8_t>> bufs;
  GgufWriteOptions o;
  o.arch = "phi3";
  write_gguf(tmp.file("phi3.gguf"), plain.config, phi3_tensors(plain, bufs), nullptr, o);
  const Checkpoint phi = open_checkpoint(tmp.file("phi3.gguf"));
  EXPECT_EQ(phi.read_from, "Phi3ForCausalLM");
  EXPECT_EQ(family_name(phi.config), fam);
  EXPECT_EQ(phi.config.sliding_window, plain.config.sliding_window);
  EXPECT_EQ(phi.tensors.size(), plain.tensors.size());
  const auto tokens = test::read_json(ref + "/tokens.json")["input_ids"].get<std::vector<int>>();
  for (DType dt : {DType::F32, DType::F16}) {
    std::vector<std::vector<float>> logits;
    for (const Checkpoint* ck : {&plain, &phi}) {
      Engine engine(Model::from_checkpoint(*ck, dt), EngineOptions{});
      const float* l = engine.forward(tokens.data(), int(tokens.size()), 0, ForwardOptions{});
      logits.emplace_back(l, l + tokens.size() * size_t(plain.config.vocab_size));
    }
    EXPECT_EQ(logits[0], logits[1]) << dtype_name(dt);
    if (dt == DType::F32) EXPECT_LE(test::max_abs_diff(logits[1], test::read_f32(ref + "/logits.f32")), 1e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(References, Phi3, ::testing::Values("llama", "mistral"));

TEST(Phi3Gguf, AnAttentionFactorWithoutLongropeIsRefused) {
  KVP_REQUIRE_REFERENCE(ref, "llama");
  test::TempDir tmp;
  const Checkpoint plain = open_checkpoint(ref);
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<TensorView> t = phi3_tensors(plain, bufs);
  GgufWriteOptions o;
  o.arch = "phi3";
  o.extra_kv["phi3.rope.scaling.attn_factor"] = GgufValue::of_f32(1.19f);
  write_gguf(tmp.file("attn.gguf"), plain.config, t, nullptr, o);
  std::string e = test::error_of([&] { open_checkpoint(tmp.file("attn.gguf")); });
  EXPECT_NE(e.find("key 'phi3.rope.scaling.attn_factor' without the longrope tensors"), std::string::npos) << e;
  // A fused tensor that does not hold the config's heads is named.
  o.extra_kv = {{"phi3.attention.head_count_kv", GgufValue::of_u32(4)}};
  write_gguf(tmp.file("heads.gguf"), plain.config, t, nullptr, o);
  e = test::error_of([&] { open_checkpoint(tmp.file("heads.gguf")); });
  EXPECT_NE(e.find("tensor 'model.layers.0.self_attn.qkv_proj.weight' has shape"), std::string::npos) << e;
}

TEST(Phi3Config, PublishedConfigsReadAsTheirModelsPhi4MiniToo) {
  // microsoft/phi-4
  const ModelConfig p4 = parse_hf_config(R"({"architectures":["Phi3ForCausalLM"],"model_type":"phi3",
    "attention_bias":false,"attention_dropout":0.0,"bos_token_id":100257,"embd_pdrop":0.0,"eos_token_id":100257,
    "hidden_act":"silu","hidden_size":5120,"initializer_range":0.02,"intermediate_size":17920,
    "max_position_embeddings":16384,"num_attention_heads":40,"num_hidden_layers":40,"num_key_value_heads":10,
    "original_max_position_embeddings":16384,"pad_token_id":100257,"resid_pdrop":0.0,"rms_norm_eps":1e-05,
    "rope_scaling":null,"rope_theta":250000,"sliding_window":null,"tie_word_embeddings":false,
    "torch_dtype":"bfloat16","use_cache":true,"vocab_size":100352})",
                                         "config.json");
  EXPECT_EQ(family_name(p4), "llama");
  EXPECT_EQ(std::tie(p4.dim, p4.hidden_dim, p4.n_layers, p4.n_heads, p4.n_kv_heads, p4.head_dim, p4.vocab_size),
            std::make_tuple(5120, 17920, 40, 40, 10, 128, 100352));
  EXPECT_EQ(p4.rope_theta, 250000.0f);
  EXPECT_EQ(p4.sliding_window, 0);
  // microsoft/Phi-3-mini-4k-instruct: a window of 2047 on every layer, Mistral's.
  std::string from;
  const ModelConfig p3 = parse_hf_config(R"({"architectures":["Phi3ForCausalLM"],"model_type":"phi3",
    "attention_bias":false,"bos_token_id":1,"eos_token_id":32000,"hidden_act":"silu","hidden_size":3072,
    "intermediate_size":8192,"max_position_embeddings":4096,"num_attention_heads":32,"num_hidden_layers":32,
    "num_key_value_heads":32,"original_max_position_embeddings":4096,"pad_token_id":32000,"rms_norm_eps":1e-05,
    "rope_scaling":null,"rope_theta":10000.0,"sliding_window":2047,"tie_word_embeddings":false,"vocab_size":32064})",
                                         "config.json", nullptr, nullptr, &from);
  EXPECT_EQ(from, "Phi3ForCausalLM");
  EXPECT_EQ(family_name(p3), "mistral");
  EXPECT_EQ(p3.sliding_window, 2047);
  EXPECT_EQ(p3.eos_id, 32000);
  // microsoft/Phi-4-mini-instruct rotates 96 of its 128 dims, with longrope (its 48 short and 48
  // long factors here stand-ins of the published lists' length); read as transformers reads it.
  auto factors = [](double step) {
    std::string f;
    for (int i = 0; i < 48; ++i) f += (i ? "," : "") + fmt::format("{}", 1.0 + step * i);
    return "[" + f + "]";
  };
  const std::string mini = R"({"architectures":["Phi3ForCausalLM"],"model_type":"phi3","hidden_size":3072,
      "intermediate_size":8192,"max_position_embeddings":131072,"num_attention_heads":24,"num_hidden_layers":32,
      "num_key_value_heads":8,"original_max_position_embeddings":4096,"partial_rotary_factor":0.75,
      "rope_theta":10000.0,"sliding_window":262144,"tie_word_embeddings":true,"vocab_size":200064,
      "rope_scaling":{"long_factor":)" + factors(0.5) + R"(,"short_factor":)" + factors(0.01) +
                           R"(,"type":"longrope"}})";
  const ModelConfig m4 = parse_hf_config(mini, "config.json");
  EXPECT_EQ(family_name(m4), "mistral");
  EXPECT_EQ(m4.head_dim, 128);
  EXPECT_EQ(m4.rotary_dim, 96);
  EXPECT_EQ(m4.rope_scaling, ModelConfig::RopeScaling::LongRope);
  EXPECT_EQ(m4.rope_original_max_pos, 4096);
  EXPECT_EQ(m4.rope_factor, 32.0f);
  EXPECT_DOUBLE_EQ(m4.rope_attention_factor, std::sqrt(1.0 + std::log(32.0) / std::log(4096.0)));  // 1.1902...
  EXPECT_EQ(m4.rope_long_factors[47], float(1.0 + 0.5 * 47));
  // v5 writes the same config with its RoPE fields in rope_parameters: the same model.
  json v5 = json::parse(mini);
  v5["rope_parameters"] = v5["rope_scaling"];
  v5["rope_parameters"]["rope_theta"] = 10000.0;
  v5["rope_parameters"]["partial_rotary_factor"] = 0.75;
  v5["rope_parameters"]["original_max_position_embeddings"] = 4096;
  for (const char* k : {"rope_scaling", "rope_theta", "partial_rotary_factor", "original_max_position_embeddings"})
    v5.erase(k);
  const ModelConfig m5 = parse_hf_config(v5.dump(), "config.json");
  EXPECT_EQ(std::tie(m5.rotary_dim, m5.rope_scaling, m5.rope_original_max_pos, m5.rope_factor),
            std::tie(m4.rotary_dim, m4.rope_scaling, m4.rope_original_max_pos, m4.rope_factor));
  EXPECT_EQ(m5.rope_attention_factor, m4.rope_attention_factor);
  EXPECT_EQ(m5.rope_short_factors, m4.rope_short_factors);
  // Early Phi-3 configs say "su" (or "yarn") for longrope under "type"; Phi3Config renames them.
  for (const char* early : {"su", "yarn"}) {
    json j = json::parse(mini);
    j["rope_scaling"]["type"] = early;
    const ModelConfig e = parse_hf_config(j.dump(), "config.json");
    EXPECT_EQ(e.rope_scaling, ModelConfig::RopeScaling::LongRope) << early;
    EXPECT_EQ(e.rope_long_factors, m4.rope_long_factors) << early;
  }
  // What transformers' versions read apart, or cannot run, is refused by field.
  auto refusal = [&](const std::function<void(json&)>& edit) {
    json j = json::parse(mini);
    edit(j);
    return test::error_of([&] { parse_hf_config(j.dump(), "config.json"); });
  };
  const std::string factor = refusal([](json& j) { j["rope_scaling"]["factor"] = 16.0; });
  EXPECT_NE(factor.find("transformers v4 and v5 read this config differently (config.json field rope_scaling.factor)"),
            std::string::npos)
      << factor;
  const std::string orig = refusal([](json& j) { j["rope_scaling"]["original_max_position_embeddings"] = 8192; });
  EXPECT_NE(orig.find("disagree"), std::string::npos) << orig;
  const std::string len = refusal([](json& j) { j["rope_scaling"]["short_factor"].erase(0); });
  EXPECT_NE(len.find("longrope short_factor has 47 entries for 96 rotated dimensions (expected 48)"), std::string::npos)
      << len;
  const std::string odd = refusal([](json& j) { j["partial_rotary_factor"] = 0.7; });  // int(128 * 0.7) = 89
  EXPECT_NE(odd.find("rotates 89 of a head's 128 dimensions; an even number is needed"), std::string::npos) << odd;
  const std::string nan_factor = refusal([](json& j) { j["rope_scaling"]["long_factor"][3] = "x"; });
  EXPECT_NE(nan_factor.find("longrope long_factor holds \"x\", not a number"), std::string::npos) << nan_factor;
  // Outside Phi-3, transformers' Llama and Mistral rotate every dimension: the fields are refused.
  const std::string llama = test::error_of([] {
    parse_hf_config(R"({"model_type":"llama","hidden_size":64,"intermediate_size":160,"max_position_embeddings":512,
      "num_attention_heads":4,"num_hidden_layers":2,"vocab_size":512,"partial_rotary_factor":0.5})",
                    "config.json");
  });
  EXPECT_NE(llama.find("partial rotary embeddings are not supported (config.json field partial_rotary_factor)"),
            std::string::npos)
      << llama;
  const std::string lr = test::error_of([] {
    parse_hf_config(R"({"model_type":"llama","hidden_size":64,"intermediate_size":160,"max_position_embeddings":512,
      "num_attention_heads":4,"num_hidden_layers":2,"vocab_size":512,"rope_scaling":{"type":"longrope",
      "short_factor":[1,1,1,1,1,1,1,1],"long_factor":[1,1,1,1,1,1,1,1]}})",
                    "config.json");
  });
  EXPECT_NE(lr.find("rope_scaling type 'longrope' is not supported"), std::string::npos) << lr;
}

TEST(Phi3Config, BadFusedTensorsAreRefusedByName) {
  KVP_REQUIRE_REFERENCE(ref, "llama");
  test::TempDir tmp;
  // A separate q_proj beside the fused one.
  const Checkpoint ck = open_checkpoint(ref);
  TensorView q = ck.tensors.at("model.layers.1.self_attn.q_proj.weight");
  write_phi3(ref, tmp.file("both"), &q);
  std::string e = test::error_of([&] { open_checkpoint(tmp.file("both")); });
  EXPECT_NE(e.find("'model.layers.1.self_attn.qkv_proj.weight' and 'model.layers.1.self_attn.q_proj.weight' are both "
                   "there"),
            std::string::npos)
      << e;
  // A bias on a fused projection.
  std::vector<float> b(128, 0.0f);
  TensorView bias;
  bias.name = "model.layers.0.self_attn.qkv_proj.bias";
  bias.shape = {128};
  bias.data = b.data();
  write_phi3(ref, tmp.file("bias"), &bias);
  e = test::error_of([&] { open_checkpoint(tmp.file("bias")); });
  EXPECT_NE(e.find("'model.layers.0.self_attn.qkv_proj.bias': biases on fused projections are not supported"),
            std::string::npos)
      << e;
  // A config whose heads do not add up to the fused rows.
  write_phi3(ref, tmp.file("heads"));
  json cfg = test::read_json(tmp.file("heads/config.json"));
  cfg["num_key_value_heads"] = 4;
  std::ofstream(tmp.file("heads/config.json")) << cfg.dump();
  e = test::error_of([&] { open_checkpoint(tmp.file("heads")); });
  EXPECT_NE(e.find("tensor 'model.layers.0.self_attn.qkv_proj.weight' has shape [128, 64]; the config makes it "
                   "[192, 64]"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace kvp
