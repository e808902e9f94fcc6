// config.json as transformers v5 writes it (src/io/hf_rope_parameters.h): rope_parameters instead of
// rope_theta / rope_scaling (per layer kind for Gemma-3), "_sliding_window_pattern", "dtype",
// Qwen3-MoE's expert count as num_local_experts. Each reference model re-saved that way is the same
// model, and published v5 configs read as the models they describe.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "io/hf_config.h"
#include "model/model.h"
#include "reference_files.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

using nlohmann::json;
using test::read_f32;
using test::read_json;

// `v4` (a config.json transformers v4.51 wrote) as v5 would write it.
json as_v5(json v4) {
  const bool gemma3 = v4.value("model_type", "") == "gemma3_text";
  json scaling = v4.contains("rope_scaling") && v4["rope_scaling"].is_object() ? v4["rope_scaling"] : json::object();
  json full = {{"rope_type", "default"}};
  for (auto it = scaling.begin(); it != scaling.end(); ++it) full[it.key() == "type" ? "rope_type" : it.key()] = it.value();
  if (v4.contains("rope_theta")) full["rope_theta"] = v4["rope_theta"];
  v4.erase("rope_theta");
  v4.erase("rope_scaling");
  if (gemma3) {
    v4["rope_parameters"] = {{"full_attention", full},
                             {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", v4["rope_local_base_freq"]}}}};
    v4.erase("rope_local_base_freq");
    const int period = v4["sliding_window_pattern"];
    v4["_sliding_window_pattern"] = period;
    v4.erase("sliding_window_pattern");
    json kinds = json::array();
    for (int l = 0; l < v4["num_hidden_layers"].get<int>(); ++l)
      kinds.push_back((l + 1) % period ? "sliding_attention" : "full_attention");
    v4["layer_types"] = kinds;
  } else {
    v4["rope_parameters"] = full;
  }
  if (v4.contains("torch_dtype")) {
    v4["dtype"] = v4["torch_dtype"];
    v4.erase("torch_dtype");
  }
  if (v4.value("model_type", "") == "qwen3_moe") {  // Qwen3MoeConfig's attribute_map
    v4["num_local_experts"] = v4["num_experts"];
    v4.erase("num_experts");
  }
  v4["transformers_version"] = "5.0.0";
  return v4;
}

// The reference checkpoint with its config.json replaced (the weights linked, not copied).
std::string with_config(const std::string& ref, const json& config, const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::filesystem::create_symlink(ref + "/model.safetensors", dir + "/model.safetensors");
  std::ofstream(dir + "/config.json") << config.dump(2);
  return dir;
}

std::vector<float> logits_of(const std::string& dir, const std::vector<int>& tokens) {
  auto model = Model::load(dir, DType::F32);
  Engine engine(model, EngineOptions{});
  const float* l = engine.forward(tokens.data(), int(tokens.size()), 0, ForwardOptions{});
  return {l, l + tokens.size() * size_t(model->config.vocab_size)};
}

class ConfigV5 : public ::testing::TestWithParam<std::string> {};

TEST_P(ConfigV5, ReferenceModelResavedByV5IsTheSameModel) {
  const std::string fam = GetParam();
  KVP_REQUIRE_REFERENCE(ref, fam);
  test::TempDir tmp;
  const json v4 = read_json(ref + "/config.json");
  const auto tokens = read_json(ref + "/tokens.json")["input_ids"].get<std::vector<int>>();
  const std::vector<float> plain = logits_of(ref, tokens);
  const std::vector<float> v5 = logits_of(with_config(ref, as_v5(v4), tmp.file("v5")), tokens);
  EXPECT_EQ(plain, v5) << fam << ": the v5 config is the v4 one";
  EXPECT_LE(test::max_abs_diff(v5, read_f32(ref + "/logits.f32")), 1e-4) << "against transformers' logits";
  // A base no class defaults to: only read from rope_parameters can the two agree.
  json moved = v4;
  moved["rope_theta"] = 31337.0;
  if (fam == "gemma3") moved["rope_local_base_freq"] = 777.0;
  const std::vector<float> a = logits_of(with_config(ref, moved, tmp.file("v4-moved")), tokens);
  const std::vector<float> b = logits_of(with_config(ref, as_v5(moved), tmp.file("v5-moved")), tokens);
  EXPECT_EQ(a, b) << fam;
  EXPECT_NE(a, plain) << fam << ": the base moves the logits";
}

INSTANTIATE_TEST_SUITE_P(Families, ConfigV5,
                         ::testing::Values("llama", "mistral", "gemma2", "qwen2", "qwen3", "gemma3", "olmo2", "mixtral",
                                           "qwen2_moe", "qwen3_moe", "olmoe"));

std::string error_of_config(const std::string& body) {
  return test::error_of([&] { parse_hf_config(body, "cfg.json"); });
}

constexpr const char* kLlama = R"("model_type":"llama","hidden_size":64,"intermediate_size":160,"num_hidden_layers":2,
  "num_attention_heads":4,"max_position_embeddings":512,"vocab_size":512)";

TEST(ConfigV5Fields, Llama3ScalingAndPrecedence) {
  const ModelConfig c = parse_hf_config(fmt::format(R"({{{},"rope_parameters":{{"factor":8.0,"high_freq_factor":4.0,
    "low_freq_factor":1.0,"original_max_position_embeddings":8192,"rope_theta":500000.0,"rope_type":"llama3"}}}})",
                                                    kLlama),
                                        "cfg.json");
  EXPECT_EQ(c.rope_theta, 5e5f);
  EXPECT_EQ(c.rope_scaling, ModelConfig::RopeScaling::Llama3);
  EXPECT_EQ(c.rope_factor, 8.0f);
  EXPECT_EQ(c.rope_low_freq_factor, 1.0f);
  EXPECT_EQ(c.rope_high_freq_factor, 4.0f);
  EXPECT_EQ(c.rope_original_max_pos, 8192);
  // The dict's base wins over one beside it; a given rope_scaling replaces the dict (v5's order).
  EXPECT_EQ(parse_hf_config(fmt::format(R"({{{},"rope_theta":1.0,"rope_parameters":{{"rope_theta":2.0}}}})", kLlama), "c")
                .rope_theta,
            2.0f);
  const ModelConfig both = parse_hf_config(
      fmt::format(R"({{{},"rope_theta":3.0,"rope_scaling":{{"type":"linear","factor":2.0}},"rope_parameters":{{"rope_theta":2.0,
        "rope_type":"default"}}}})",
                  kLlama),
      "c");
  EXPECT_EQ(both.rope_theta, 3.0f);
  EXPECT_EQ(both.rope_scaling, ModelConfig::RopeScaling::Linear);
  EXPECT_EQ(parse_hf_config(fmt::format(R"({{{},"rope_parameters":null}})", kLlama), "c").rope_theta, 1e4f);
}

TEST(ConfigV5Fields, PublishedV5ConfigsReadAsTheirModels) {
  // jrcastropy/functiongemma-270m-it-simple-tool-calling (transformers 5.0.0), Gemma-3 270M's shape.
  const ModelConfig g = parse_hf_config(R"({"architectures":["Gemma3ForCausalLM"],"model_type":"gemma3_text",
    "_sliding_window_pattern":6,"dtype":"bfloat16","head_dim":256,"hidden_size":640,"intermediate_size":2048,
    "layer_types":["sliding_attention","sliding_attention","sliding_attention","sliding_attention","sliding_attention",
      "full_attention","sliding_attention","sliding_attention","sliding_attention","sliding_attention","sliding_attention",
      "full_attention","sliding_attention","sliding_attention","sliding_attention","sliding_attention","sliding_attention",
      "full_attention"],
    "max_position_embeddings":32768,"num_attention_heads":4,"num_hidden_layers":18,"num_key_value_heads":1,
    "query_pre_attn_scalar":256,"rope_parameters":{"full_attention":{"rope_theta":1000000.0,"rope_type":"default"},
      "sliding_attention":{"rope_theta":10000.0,"rope_type":"default"}},
    "sliding_window":512,"transformers_version":"5.0.0","vocab_size":262144})",
                                        "config.json");
  EXPECT_EQ(g.rope_theta, 1e6f);
  EXPECT_EQ(g.rope_local_theta, 1e4f);
  EXPECT_EQ(g.rope_scaling, ModelConfig::RopeScaling::None);
  EXPECT_EQ(g.sliding_window, 512);
  EXPECT_EQ(g.sliding_window_period, 6);
  // voidful/llm-codec (Qwen3, 5.3.0): a base of 5e6 only rope_parameters holds.
  EXPECT_EQ(parse_hf_config(R"({"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","hidden_size":64,
    "intermediate_size":160,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,
    "max_position_embeddings":512,"vocab_size":512,"pad_token_id":null,"dtype":"bfloat16",
    "rope_parameters":{"rope_theta":5000000,"rope_type":"default"},"sliding_window":null,"use_sliding_window":false})",
                            "config.json")
                .rope_theta,
            5e6f);
  // tech-dev-ai/test (Qwen3-MoE, 5.8.0): num_local_experts, no max_window_layers.
  const ModelConfig q = parse_hf_config(R"({"architectures":["Qwen3MoeForCausalLM"],"model_type":"qwen3_moe",
    "hidden_size":64,"intermediate_size":160,"moe_intermediate_size":48,"num_hidden_layers":2,"num_attention_heads":4,
    "num_key_value_heads":2,"head_dim":16,"max_position_embeddings":512,"vocab_size":512,"num_local_experts":128,
    "num_experts_per_tok":8,"norm_topk_prob":true,"rope_parameters":{"rope_theta":1000000.0,"rope_type":"default"},
    "sliding_window":null,"dtype":"bfloat16"})",
                                        "config.json");
  EXPECT_EQ(q.moe.n_experts, 128);
  EXPECT_EQ(q.rope_theta, 1e6f);
  // Fu01978/SmolMoE-4x360M-Instruct (Mixtral, 5.0.0): rope_parameters and no rope_theta beside it.
  EXPECT_EQ(parse_hf_config(R"({"architectures":["MixtralForCausalLM"],"model_type":"mixtral","hidden_size":64,
    "intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
    "max_position_embeddings":512,"vocab_size":512,"num_local_experts":4,"num_experts_per_tok":2,
    "rope_parameters":{"rope_theta":100000,"rope_type":"default"}})",
                            "config.json")
                .rope_theta,
            1e5f);
  // Without any base, the classes' defaults: Mixtral's and Gemma-3's 1e6.
  EXPECT_EQ(parse_hf_config(R"({"model_type":"mixtral","hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,
    "num_attention_heads":4,"max_position_embeddings":512,"vocab_size":512})",
                            "c")
                .rope_theta,
            1e6f);
  // A writer that leaves the flat keys' defaults beside the per-kind entries.
  const ModelConfig mixed = parse_hf_config(R"({"model_type":"gemma3_text","hidden_size":64,"intermediate_size":160,
    "num_hidden_layers":6,"num_attention_heads":4,"max_position_embeddings":512,"vocab_size":512,"head_dim":16,
    "rope_parameters":{"full_attention":{"factor":8.0,"rope_theta":1000000.0,"rope_type":"linear"},"rope_theta":null,
      "rope_type":"default","sliding_attention":{"rope_theta":10000.0,"rope_type":"default"}}})",
                                            "c");
  EXPECT_EQ(mixed.rope_scaling, ModelConfig::RopeScaling::Linear);
  EXPECT_EQ(mixed.rope_factor, 8.0f);
}

TEST(ConfigV5Fields, WhatV5CanSayAndKvparityCannotIsRefusedByField) {
  auto has = [](const std::string& e, const std::string& what) {
    return e.find(what) != std::string::npos ? ::testing::AssertionSuccess() : ::testing::AssertionFailure() << e;
  };
  EXPECT_TRUE(has(error_of_config(fmt::format(R"({{{},"rope_parameters":{{"rope_type":"longrope","factor":4.0}}}})", kLlama)),
                  "rope_scaling type 'longrope' is not supported (config.json field rope_parameters)"));
  EXPECT_TRUE(has(error_of_config(fmt::format(R"({{{},"rope_parameters":{{"rope_type":"linear"}}}})", kLlama)),
                  "needs a number 'factor' (config.json field rope_parameters.factor)"));
  EXPECT_TRUE(has(error_of_config(fmt::format(R"({{{},"rope_parameters":{{"full_attention":{{}}}}}})", kLlama)),
                  "RoPE parameters per layer kind are not supported for this family"));
  EXPECT_TRUE(has(error_of_config(fmt::format(R"({{{},"rope_parameters":[1]}})", kLlama)),
                  "field 'rope_parameters' must be a JSON object"));
  EXPECT_TRUE(has(error_of_config(fmt::format(R"({{{},"rope_parameters":{{"rope_theta":"big"}}}})", kLlama)),
                  "field 'rope_parameters.rope_theta' must be a number"));
  const std::string gemma3 = R"("model_type":"gemma3_text","hidden_size":64,"intermediate_size":160,
    "num_hidden_layers":6,"num_attention_heads":4,"max_position_embeddings":512,"vocab_size":512,"head_dim":16)";
  EXPECT_TRUE(has(error_of_config(fmt::format(
                      R"({{{},"rope_parameters":{{"sliding_attention":{{"rope_type":"linear","factor":2.0}}}}}})", gemma3)),
                  "a scaled RoPE ('linear') on the sliding-window layers is not supported"));
  EXPECT_TRUE(has(error_of_config(fmt::format(
                      R"({{{},"rope_parameters":{{"full_attention":{{"rope_type":"llama3","factor":2.0}}}}}})", gemma3)),
                  "(config.json field rope_parameters.full_attention)"));
  EXPECT_TRUE(has(error_of_config(fmt::format(R"({{{},"rope_parameters":{{"full_attention":{{}},"factor":2.0}}}})", gemma3)),
                  "field 'rope_parameters.factor' beside per-layer-kind entries"));
  EXPECT_TRUE(has(error_of_config(R"({"model_type":"qwen3_moe","hidden_size":64,"intermediate_size":160,
    "num_hidden_layers":2,"num_attention_heads":4,"max_position_embeddings":512,"vocab_size":512,"num_experts":8,
    "num_local_experts":16})"),
                  "fields 'num_experts' = 8 and 'num_local_experts' = 16 disagree"));
}

}  // namespace
}  // namespace kvp
