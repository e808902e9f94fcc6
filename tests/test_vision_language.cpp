// The text model of a vision-language checkpoint (src/io/hf_text_model.h): a reference model
// re-packed as Gemma3/Mistral3/Llava/LlavaNext*ForConditionalGeneration would be saved (a sparse
// text_config, the text weights under the wrapper's prefixes, a vision tower beside them) loads
// as the same model, runs to the same bits, and still matches transformers' own logits.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "io/checkpoint.h"
#include "io/hf_config.h"
#include "io/model_writer.h"
#include "lab/model_inspection.h"
#include "model/checkpoint_export.h"
#include "model/model.h"
#include "reference_files.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

using nlohmann::json;
using test::read_f32;
using test::read_json;

// language_model.model.* (or, for Qwen2-VL, model.* as a causal LM's) vs model.language_model.*
enum class Layout { Published, Transformers452 };

struct Wrapping {
  std::string family, wrapper_class, model_type;
  Layout layout;
  bool sharded;
  // text_config keys whose values are the text class's defaults: dropped, as the published
  // configs' text_config omits them.
  std::vector<std::string> defaults;
  bool qwen_vl = false;  // the text fields at the top of config.json, M-RoPE sections, model.* names
};

std::string wrapped_name(const std::string& canonical, Layout layout, bool qwen_vl = false) {
  if (qwen_vl && layout == Layout::Published) return canonical;
  const std::string p = layout == Layout::Published ? "language_model.model." : "model.language_model.";
  if (canonical.rfind("model.", 0) == 0) return p + canonical.substr(6);
  if (canonical.rfind("lm_head.", 0) == 0 && layout == Layout::Published) return "language_model." + canonical;
  return canonical;
}

// A vision tower's worth of tensors (names as the real checkpoints have them) in `keep`'s bytes.
std::vector<TensorView> vision_tensors(Layout layout, std::vector<float>& keep) {
  const std::string p = layout == Layout::Published ? "" : "model.";
  keep.assign(64, 0.25f);
  std::vector<TensorView> v;
  for (const char* n : {"vision_tower.vision_model.embeddings.patch_embedding.weight",
                        "vision_tower.vision_model.encoder.layers.0.self_attn.q_proj.weight",
                        "multi_modal_projector.mm_input_projection_weight"}) {
    TensorView t;
    t.name = p + n;
    t.dtype = DType::F32;
    t.shape = {8, 8};
    t.data = keep.data();
    v.push_back(t);
  }
  return v;
}

// Writes `plain` re-packed as `w` into `dir`.
void write_wrapped(const std::string& plain, const Wrapping& w, const std::string& dir) {
  const Checkpoint ck = open_checkpoint(plain);
  std::vector<float> vision_bytes;
  std::vector<TensorView> tensors = vision_tensors(w.layout, vision_bytes);
  for (const auto& [name, t] : ck.tensors) {
    TensorView v = t;
    v.name = wrapped_name(name, w.layout, w.qwen_vl);
    tensors.push_back(v);
  }
  std::filesystem::create_directories(dir);
  if (w.sharded) {
    std::map<std::string, std::string> map;
    const size_t half = tensors.size() / 2;
    const std::vector<TensorView> a(tensors.begin(), tensors.begin() + long(half)), b(tensors.begin() + long(half), tensors.end());
    write_safetensors(dir + "/model-00001-of-00002.safetensors", a);
    write_safetensors(dir + "/model-00002-of-00002.safetensors", b);
    for (const auto& t : a) map[t.name] = "model-00001-of-00002.safetensors";
    for (const auto& t : b) map[t.name] = "model-00002-of-00002.safetensors";
    write_safetensors_index(dir + "/model.safetensors.index.json", map, 0);
  } else {
    write_safetensors(dir + "/model.safetensors", tensors);
  }
  json text = read_json(plain + "/config.json");
  text.erase("architectures");
  text.erase("transformers_version");
  for (const std::string& k : w.defaults) text.erase(k);
  json top = {{"architectures", {w.wrapper_class}},
              {"model_type", w.model_type},
              {"text_config", text},
              {"vision_config", {{"hidden_size", 8}, {"model_type", "siglip_vision_model"}}},
              {"image_token_index", 5},
              {"eos_token_id", {2, 7}}};
  if (w.qwen_vl) {
    // The v4 form: the text fields at the top, M-RoPE's sections (of head_dim 16's 8 frequencies)
    // in rope_scaling; the newer form nests them in text_config with the sections in its dict.
    const json mrope = {{"type", "mrope"}, {"mrope_section", {2, 3, 3}}};
    if (w.layout == Layout::Published) {
      json flat = text;
      flat.update({{"architectures", {w.wrapper_class}}, {"model_type", w.model_type}, {"rope_scaling", mrope},
                   {"vision_config", top["vision_config"]}, {"image_token_id", 5}});
      top = flat;
    } else {
      // The head's frequencies in three sections (Qwen3's head_dim is its own: 32 in its reference).
      const int h = (text.contains("head_dim") ? text["head_dim"].get<int>()
                                               : text["hidden_size"].get<int>() / text["num_attention_heads"].get<int>()) /
                    2;
      const json sections = {h - 2 * (h * 3 / 8), h * 3 / 8, h * 3 / 8};
      top["text_config"]["model_type"] = std::string(w.model_type) + "_text";
      if (w.family == "qwen3") {
        // Qwen3-VL as 4.57 saves it: rope_scaling beside rope_theta, the sections interleaved.
        top["text_config"]["rope_scaling"] = {
            {"rope_type", "default"}, {"mrope_section", sections}, {"mrope_interleaved", true}};
      } else {
        top["text_config"]["rope_parameters"] = {{"rope_type", "default"}, {"mrope_section", sections},
                                                 {"rope_theta", text["rope_theta"]}};
        top["text_config"].erase("rope_theta");
      }
    }
  }
  std::ofstream(dir + "/config.json") << top.dump(2);
}

const std::vector<Wrapping> kWrappings = {
    {"gemma3", "Gemma3ForConditionalGeneration", "gemma3", Layout::Published, false,
     {"model_type", "rms_norm_eps", "rope_theta", "rope_local_base_freq", "bos_token_id", "eos_token_id",
      "hidden_activation", "attention_bias"}},
    {"gemma3", "Gemma3ForConditionalGeneration", "gemma3", Layout::Transformers452, true,
     {"rope_theta", "bos_token_id", "eos_token_id"}},
    {"llama", "LlavaForConditionalGeneration", "llava", Layout::Published, false,
     {"model_type", "rope_theta", "bos_token_id", "eos_token_id", "tie_word_embeddings"}},
    {"mistral", "Mistral3ForConditionalGeneration", "mistral3", Layout::Transformers452, false,
     {"model_type", "rope_theta", "bos_token_id", "eos_token_id", "tie_word_embeddings"}},
    {"qwen2", "LlavaNextForConditionalGeneration", "llava_next", Layout::Published, true,
     {"rope_theta", "use_sliding_window", "max_window_layers"}},
    {"qwen2", "Qwen2VLForConditionalGeneration", "qwen2_vl", Layout::Published, false, {}, true},
    {"qwen2", "Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl", Layout::Transformers452, true, {}, true},
    {"qwen3", "Qwen3VLForConditionalGeneration", "qwen3_vl", Layout::Transformers452, true, {}, true},
};

class VisionLanguage : public ::testing::TestWithParam<size_t> {};

TEST_P(VisionLanguage, TextModelLoadsAsThePlainModelAndMatchesTransformers) {
  const Wrapping& w = kWrappings[GetParam()];
  KVP_REQUIRE_REFERENCE(ref, w.family);
  test::TempDir tmp;
  const std::string dir = tmp.file("wrapped");
  write_wrapped(ref, w, dir);
  const Checkpoint plain = open_checkpoint(ref), wrapped = open_checkpoint(dir);
  EXPECT_EQ(wrapped.text_model_of, w.wrapper_class);
  EXPECT_TRUE(plain.text_model_of.empty());
  const ModelConfig &a = plain.config, &b = wrapped.config;
  EXPECT_EQ(family_name(b), w.family);
  EXPECT_EQ(std::tie(a.dim, a.hidden_dim, a.n_layers, a.n_heads, a.n_kv_heads, a.head_dim, a.vocab_size, a.max_seq_len),
            std::tie(b.dim, b.hidden_dim, b.n_layers, b.n_heads, b.n_kv_heads, b.head_dim, b.vocab_size, b.max_seq_len));
  EXPECT_EQ(std::tie(a.rope_theta, a.rope_local_theta, a.rope_factor, a.norm_eps, a.sliding_window,
                     a.sliding_window_period, a.query_pre_attn_scalar, a.tied_embeddings, a.bos_id, a.eos_id),
            std::tie(b.rope_theta, b.rope_local_theta, b.rope_factor, b.norm_eps, b.sliding_window,
                     b.sliding_window_period, b.query_pre_attn_scalar, b.tied_embeddings, b.bos_id, b.eos_id));
  const bool flat = w.qwen_vl && w.layout == Layout::Published;  // its eos_token_id is the text model's
  if (!flat) EXPECT_TRUE(b.ends_generation(7)) << "the wrapper's own eos_token_id ends a generation too";
  // The vision tower is kept under its own names and never read.
  const std::string tower = w.layout == Layout::Published ? "vision_tower" : "model.vision_tower";
  EXPECT_TRUE(wrapped.tensors.count(tower + ".vision_model.embeddings.patch_embedding.weight"));

  const auto tokens = read_json(ref + "/tokens.json")["input_ids"].get<std::vector<int>>();
  const auto ref_logits = read_f32(ref + "/logits.f32");
  std::vector<std::vector<float>> logits;
  for (const Checkpoint* ck : {&plain, &wrapped}) {
    Engine engine(Model::from_checkpoint(*ck, DType::F32), EngineOptions{});
    const float* l = engine.forward(tokens.data(), int(tokens.size()), 0, ForwardOptions{});
    logits.emplace_back(l, l + tokens.size() * size_t(a.vocab_size));
  }
  EXPECT_EQ(logits[0], logits[1]) << w.wrapper_class << ": the text model is the plain model, bit for bit";
  ASSERT_EQ(ref_logits.size(), logits[1].size());
  EXPECT_LE(test::max_abs_diff(logits[1], ref_logits), 1e-4) << "against transformers' " << w.family << " logits";

  InspectOptions io;
  io.model = dir;
  const json d = inspect_model(io);
  EXPECT_EQ(d["text_model_of"], w.wrapper_class);
  EXPECT_EQ(d["file"]["unused"].size(), 3u) << d["file"]["unused"].dump();
  EXPECT_NE(inspect_text(d).find("the text model of " + w.wrapper_class), std::string::npos);

  // Converted, it is the text model alone: no vision tower, a plain *ForCausalLM config.
  export_checkpoint(wrapped, "hf", tmp.file("text"), ExportOptions{});
  const Checkpoint back = open_checkpoint(tmp.file("text"));
  EXPECT_TRUE(back.text_model_of.empty());
  EXPECT_EQ(back.tensors.size(), plain.tensors.size());
  for (const auto& [name, t] : back.tensors) EXPECT_TRUE(plain.tensors.count(name)) << name;
}

INSTANTIATE_TEST_SUITE_P(Wrappers, VisionLanguage, ::testing::Range(size_t(0), kWrappings.size()),
                         [](const auto& info) {
                           const Wrapping& w = kWrappings[info.param];
                           return w.wrapper_class + (w.layout == Layout::Published ? "Published" : "Transformers452");
                         });

// The published configs' text_config, as sparse as they ship: what the omitted fields mean.
TEST(VisionLanguageConfig, SparseTextConfigsTakeTheirClassDefaults) {
  // google/gemma-3-4b-it
  const ModelConfig g = parse_hf_config(R"({"architectures":["Gemma3ForConditionalGeneration"],
    "boi_token_index":255999,"eoi_token_index":256000,"eos_token_id":[1,106],"image_token_index":262144,
    "mm_tokens_per_image":256,"model_type":"gemma3",
    "text_config":{"hidden_size":2560,"intermediate_size":10240,"model_type":"gemma3_text","num_hidden_layers":34,
                   "rope_scaling":{"factor":8.0,"rope_type":"linear"},"sliding_window":1024},
    "torch_dtype":"bfloat16","vision_config":{"hidden_size":1152,"model_type":"siglip_vision_model"}})",
                                        "config.json");
  EXPECT_EQ(family_name(g), "gemma3");
  EXPECT_EQ(std::tie(g.dim, g.hidden_dim, g.n_layers, g.n_heads, g.n_kv_heads, g.head_dim, g.vocab_size, g.max_seq_len),
            std::make_tuple(2560, 10240, 34, 8, 4, 256, 262208, 131072));
  EXPECT_EQ(g.rope_theta, 1e6f);
  EXPECT_EQ(g.rope_local_theta, 1e4f);
  EXPECT_EQ(g.rope_scaling, ModelConfig::RopeScaling::Linear);
  EXPECT_EQ(g.rope_factor, 8.0f);
  EXPECT_EQ(g.sliding_window, 1024);
  EXPECT_EQ(g.sliding_window_period, 6);
  EXPECT_EQ(g.query_pre_attn_scalar, 256.0f);
  EXPECT_EQ(g.norm_eps, 1e-6f);
  EXPECT_TRUE(g.tied_embeddings);
  EXPECT_EQ(g.bos_id, 2);
  EXPECT_EQ(g.eos_id, 1);
  EXPECT_TRUE(g.ends_generation(106)) << "<end_of_turn>, from the wrapper's eos_token_id";
  // llava-hf/llava-1.5-7b-hf: Vicuna-7B's text_config names only what differs from LlamaConfig.
  std::string which;
  const ModelConfig l = parse_hf_config(R"({"architectures":["LlavaForConditionalGeneration"],"model_type":"llava",
    "image_token_index":32000,"projector_hidden_act":"gelu","vision_feature_layer":-2,
    "text_config":{"_name_or_path":"lmsys/vicuna-7b-v1.5","architectures":["LlamaForCausalLM"],
                   "max_position_embeddings":4096,"model_type":"llama","rms_norm_eps":1e-05,"torch_dtype":"float16",
                   "vocab_size":32064},
    "vision_config":{"hidden_size":1024,"model_type":"clip_vision_model"}})",
                                        "config.json", nullptr, &which);
  EXPECT_EQ(which, "LlavaForConditionalGeneration");
  EXPECT_EQ(family_name(l), "llama");
  EXPECT_EQ(std::tie(l.dim, l.hidden_dim, l.n_layers, l.n_heads, l.n_kv_heads, l.vocab_size, l.max_seq_len),
            std::make_tuple(4096, 11008, 32, 32, 32, 32064, 4096));
  EXPECT_EQ(l.norm_eps, 1e-5f);
  EXPECT_EQ(l.rope_theta, 1e4f);
  EXPECT_FALSE(l.tied_embeddings);
  // A Mistral3 text_config that omits its window and KV heads has MistralConfig's.
  const ModelConfig m = parse_hf_config(R"({"architectures":["Mistral3ForConditionalGeneration"],
    "text_config":{"model_type":"mistral","hidden_size":5120,"head_dim":128,"num_hidden_layers":40,
                   "intermediate_size":32768,"vocab_size":131072,"rope_theta":1000000000.0}})",
                                        "config.json");
  EXPECT_EQ(std::tie(m.n_heads, m.n_kv_heads, m.head_dim, m.max_seq_len, m.sliding_window),
            std::make_tuple(32, 8, 128, 131072, 4096));
  EXPECT_EQ(m.rope_theta, 1e9f);
  // Qwen3-VL at Qwen3-4B's shape: head_dim 128 of its own (hidden / heads is 80), so the interleaved
  // sections [24, 20, 20] cover its 64 frequencies; the text model is Qwen3's.
  const ModelConfig q = parse_hf_config(R"({"architectures":["Qwen3VLForConditionalGeneration"],"model_type":"qwen3_vl",
    "image_token_id":151655,"tie_word_embeddings":true,
    "text_config":{"attention_bias":false,"bos_token_id":151643,"eos_token_id":151645,"head_dim":128,
                   "hidden_act":"silu","hidden_size":2560,"intermediate_size":9728,"max_position_embeddings":262144,
                   "model_type":"qwen3_vl_text","num_attention_heads":32,"num_hidden_layers":36,
                   "num_key_value_heads":8,"rms_norm_eps":1e-06,"rope_theta":5000000,
                   "rope_scaling":{"mrope_interleaved":true,"mrope_section":[24,20,20],"rope_type":"default"},
                   "tie_word_embeddings":true,"vocab_size":151936},
    "vision_config":{"deepstack_visual_indexes":[5,11,17],"model_type":"qwen3_vl"}})",
                                        "config.json", nullptr, &which);
  EXPECT_EQ(which, "Qwen3VLForConditionalGeneration");
  EXPECT_EQ(family_name(q), "qwen3");
  EXPECT_EQ(std::tie(q.dim, q.n_heads, q.n_kv_heads, q.head_dim, q.n_layers, q.vocab_size),
            std::make_tuple(2560, 32, 8, 128, 36, 151936));
  EXPECT_EQ(q.rope_theta, 5e6f);
  EXPECT_EQ(q.rope_scaling, ModelConfig::RopeScaling::None);
  EXPECT_TRUE(q.tied_embeddings);
}

TEST(VisionLanguageConfig, OtherWrappersAndTextModelsAreRefusedByName) {
  auto err = [](const std::string& body) { return test::error_of([&] { parse_hf_config(body, "cfg.json"); }); };
  // Qwen3-VL-MoE's experts are stored transposed ([experts, hidden, 2 x expert width]): not read.
  EXPECT_NE(err(R"({"architectures":["Qwen3VLMoeForConditionalGeneration"],"model_type":"qwen3_vl_moe",
                  "text_config":{"model_type":"qwen3_vl_moe_text"}})")
                .find("vision-language model 'Qwen3VLMoeForConditionalGeneration' is not supported"),
            std::string::npos);
  // PaliGemma's prefix attends both ways: not Gemma's causal text model.
  EXPECT_NE(err(R"({"architectures":["PaliGemmaForConditionalGeneration"],"model_type":"paligemma",
                  "text_config":{"model_type":"gemma2"}})")
                .find("vision-language model 'PaliGemmaForConditionalGeneration' is not supported (config.json field "
                      "text_config)"),
            std::string::npos);
  EXPECT_NE(err(R"({"architectures":["Gemma3ForConditionalGeneration"],"text_config":{"model_type":"llama"}})")
                .find("the text model 'llama' of Gemma3ForConditionalGeneration is not supported"),
            std::string::npos);
  EXPECT_NE(err(R"({"architectures":["LlavaForConditionalGeneration"],"text_config":{"model_type":"phi3"}})")
                .find("the text model 'phi3' of LlavaForConditionalGeneration is not supported"),
            std::string::npos);
  EXPECT_NE(err(R"({"architectures":["LlavaForConditionalGeneration"],"text_config":[1]})")
                .find("field 'text_config' must be a JSON object"),
            std::string::npos);
  // Errors in the text model's fields say they are the text_config's.
  EXPECT_NE(err(R"({"architectures":["LlavaForConditionalGeneration"],"text_config":{"hidden_size":"big"}})")
                .find("cfg.json (text_config of LlavaForConditionalGeneration): field 'hidden_size' must be an integer"),
            std::string::npos);
  EXPECT_NE(err(R"({"architectures":["Gemma3ForConditionalGeneration"],"eos_token_id":"x","text_config":{}})")
                .find("field 'eos_token_id' must be a token id"),
            std::string::npos);
  // Qwen-VL's M-RoPE sections must cover the head's frequencies; the interleaved kind is Qwen3-VL's
  // alone; a known family's config with a vision_config is still refused by that field.
  const std::string qwen_vl = R"({"architectures":["Qwen2VLForConditionalGeneration"],"model_type":"qwen2_vl",
    "hidden_size":64,"intermediate_size":160,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
    "max_position_embeddings":512,"vocab_size":512,"vision_config":{},)";
  EXPECT_NE(err(qwen_vl + R"("rope_scaling":{"type":"mrope","mrope_section":[2,3,4]}})")
                .find("field 'rope_scaling.mrope_section' = [2,3,4] covers 9 of the head's 8 frequencies"),
            std::string::npos);
  EXPECT_NE(err(qwen_vl + R"("rope_scaling":{"type":"mrope","mrope_section":[2,3,3],"mrope_interleaved":true}})")
                .find("interleaved M-RoPE is Qwen3-VL's, not this model's (config.json field "
                      "rope_scaling.mrope_interleaved)"),
            std::string::npos);
  EXPECT_NE(err(qwen_vl + R"("text_config":{"model_type":"llama"}})")
                .find("the text model 'llama' of Qwen2VLForConditionalGeneration is not supported"),
            std::string::npos);
  EXPECT_NE(err(R"({"model_type":"qwen2","hidden_size":64,"vision_config":{}})")
                .find("multimodal models are not supported (config.json field vision_config)"),
            std::string::npos);
}

// llama.cpp's qwen2vl and qwen3vl GGUFs: Qwen2's and Qwen3's files with M-RoPE sections, which for
// text are plain RoPE: the references written so read as the plain models, bit for bit.
TEST(VisionLanguageGguf, QwenVlFilesAreTheirTextModels) {
  for (const auto& [fam, arch] : {std::pair{"qwen2", "qwen2vl"}, std::pair{"qwen3", "qwen3vl"}}) {
    KVP_REQUIRE_REFERENCE(ref, fam);
    test::TempDir tmp;
    const Checkpoint plain = open_checkpoint(ref);
    const int h = plain.config.head_dim / 2;
    std::vector<TensorView> tensors;
    for (const auto& [name, t] : plain.tensors) tensors.push_back(t);
    auto sections = [](std::vector<int32_t> v) {
      std::vector<GgufValue> a;
      for (int32_t x : v) a.push_back(GgufValue::of_i32(x));
      return GgufValue::of_array(GgufType::I32, a);
    };
    GgufWriteOptions o;
    o.arch = arch;
    o.extra_kv[std::string(arch) + ".rope.dimension_sections"] = sections({h - 2 * (h * 3 / 8), h * 3 / 8, h * 3 / 8, 0});
    write_gguf(tmp.file("vl.gguf"), plain.config, tensors, nullptr, o);
    const Checkpoint vl = open_checkpoint(tmp.file("vl.gguf"));
    EXPECT_EQ(family_name(vl.config), fam);
    const auto tokens = read_json(ref + "/tokens.json")["input_ids"].get<std::vector<int>>();
    for (DType dt : {DType::F32, DType::BF16}) {
      std::vector<std::vector<float>> logits;
      for (const Checkpoint* ck : {&plain, &vl}) {
        Engine engine(Model::from_checkpoint(*ck, dt), EngineOptions{});
        const float* l = engine.forward(tokens.data(), int(tokens.size()), 0, ForwardOptions{});
        logits.emplace_back(l, l + tokens.size() * size_t(plain.config.vocab_size));
      }
      EXPECT_EQ(logits[0], logits[1]) << arch << " " << dtype_name(dt);
    }
    // Sections that do not cover the head are refused by key; so is a file without them.
    o.extra_kv[std::string(arch) + ".rope.dimension_sections"] = sections({h, 1, 0, 0});
    write_gguf(tmp.file("bad.gguf"), plain.config, tensors, nullptr, o);
    std::string e = test::error_of([&] { open_checkpoint(tmp.file("bad.gguf")); });
    EXPECT_NE(e.find(std::string(arch) + ".rope.dimension_sections' covers " + std::to_string(h + 1)), std::string::npos)
        << e;
    o.extra_kv.clear();
    write_gguf(tmp.file("none.gguf"), plain.config, tensors, nullptr, o);
    e = test::error_of([&] { open_checkpoint(tmp.file("none.gguf")); });
    EXPECT_NE(e.find("missing required key '" + std::string(arch) + ".rope.dimension_sections'"), std::string::npos) << e;
  }
}

TEST(VisionLanguageConfig, TwoTensorsForOneTextModelNameAreRefused) {
  KVP_REQUIRE_REFERENCE(ref, "gemma3");
  test::TempDir tmp;
  const std::string dir = tmp.file("both");
  write_wrapped(ref, kWrappings[0], dir);
  // Add the same embedding again under the transformers-4.52 name.
  const Checkpoint ck = open_checkpoint(dir);
  std::vector<TensorView> ts;
  for (const auto& [name, t] : ck.tensors) ts.push_back(t);
  for (auto& t : ts) t.name = wrapped_name(t.name, Layout::Published);
  TensorView again = ck.tensors.at("model.embed_tokens.weight");
  again.name = "model.language_model.embed_tokens.weight";
  ts.push_back(again);
  write_safetensors(dir + "/model.safetensors", ts);
  const std::string e = test::error_of([&] { open_checkpoint(dir); });
  EXPECT_NE(e.find("are both the text model's 'model.embed_tokens.weight'"), std::string::npos) << e;
}

}  // namespace
}  // namespace kvp
