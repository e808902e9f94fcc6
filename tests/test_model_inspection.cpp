// `kvparity inspect` (lab/model_inspection.h) and the weights' footprint it reports
// (model/weights.h): the footprint is what a load holds, its errors are a load's, and its
// parameter counts are the published ones of the real models whose shapes the presets copy.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "model/synthetic.h"
#include "model/weights.h"
#include "test_util.h"

namespace kvp {
namespace {

using test::kvparity;
using test::q;

// A preset's tensor names and shapes, no data: the footprint reads shapes and types only, so a 7B
// model costs nothing to describe.
Checkpoint shapes_only(const ModelConfig& c, DType dtype) { return synthetic_shapes(c, dtype); }

TEST(WeightsFootprint, ParameterCountsAreThePublishedOnesOfThePresetsModels) {
  // The parameter counts the models' own cards and `sum(p.numel())` of the Hugging Face models give.
  const std::vector<std::pair<std::string, int64_t>> published = {{"tinyllama-1.1b", 1100048384},
                                                                  {"llama2-7b", 6738415616},
                                                                  {"mistral-7b", 7248023552},
                                                                  {"gemma2-2b", 2614341888},
                                                                  {"qwen2.5-0.5b", 494032768},
                                                                  {"olmo2-1b", 1484916736},
                                                                  {"olmo2-7b", 7298617344},
                                                                  {"mixtral-8x7b", 46702792704},
                                                                  {"qwen1.5-moe-a2.7b", 14315784192},
                                                                  {"qwen3-30b-a3b", 30532122624},
                                                                  {"olmoe-1b-7b", 6919161856},
                                                                  // GptOssForCausalLM's tensors at gpt-oss-20b's
                                                                  // config, its experts dequantised
                                                                  {"gpt-oss-20b", 20914757184}};
  for (const auto& [preset, count] : published) {
    const Checkpoint ck = shapes_only(synthetic_config("", preset), DType::BF16);
    const WeightsFootprint f = weights_footprint(ck, DType::BF16);
    EXPECT_EQ(f.parameters, count) << preset;
    EXPECT_EQ(f.embedding_parameters + f.layer_parameters + f.final_norm_parameters + f.head_parameters, count)
        << preset;
    EXPECT_EQ(f.used.size(), ck.tensors.size()) << preset;
    EXPECT_EQ(f.converted_bytes, 0u) << preset;
    EXPECT_EQ(f.in_place_bytes + f.vector_bytes / 2, size_t(count) * 2) << preset;  // gains held as fp32
  }
  // Llama-2-7B at fp16 from a bf16 file: every matrix converted, 13.5 GB; a token reads all but
  // the embedding.
  const ModelConfig c7 = synthetic_config("", "llama2-7b");
  const WeightsFootprint f = weights_footprint(shapes_only(c7, DType::BF16), DType::F16);
  EXPECT_EQ(f.in_place_bytes, 0u);
  EXPECT_EQ(f.converted_bytes, size_t(6738415616 - 65 * 4096) * 2);
  EXPECT_EQ(f.decode_bytes, f.converted_bytes - size_t(32000) * 4096 * 2);
}

// The footprint against what build_weights really holds, for files of every kind of storage.
void expect_footprint_is_the_load(const Checkpoint& ck, const std::string& what) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(what + " at " + std::string(dtype_name(dt)));
    const WeightsFootprint f = weights_footprint(ck, dt);
    const ModelWeights w = build_weights(ck, dt);
    size_t owned = 0;
    for (const auto& b : w.owned) owned += b->size();
    EXPECT_EQ(f.converted_bytes + f.vector_bytes, owned);
    EXPECT_EQ(f.decode_bytes, w.matrix_bytes());
    size_t matrices = w.embed.nbytes() + (ck.config.tied_embeddings ? 0 : w.lm_head.nbytes());
    for (const auto& l : w.layers)
      for (const TensorView* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) matrices += t->nbytes();
    EXPECT_EQ(f.in_place_bytes + f.converted_bytes, matrices);
    int64_t all = 0;
    for (const auto& [name, t] : ck.tensors) all += t.numel();
    EXPECT_EQ(f.parameters, all);
  }
}

TEST(WeightsFootprint, IsWhatALoadHolds) {
  for (const char* family : {"llama", "mistral", "gemma2", "qwen2", "qwen3", "gemma3", "olmo2"})
    expect_footprint_is_the_load(open_checkpoint(test::reference_dir(family)), family);
  expect_footprint_is_the_load(open_checkpoint(test::shared_file("models/stories260K/stories260K.bin")), "llama2c");
  test::TempDir tmp;
  for (const char* quant : {"Q8_0", "Q4_K_M"}) {
    const std::string gguf = tmp.file(std::string(quant) + ".gguf");
    const auto r =
        kvparity("synth --arch qwen2 --dtype fp16 --format gguf --quant " + std::string(quant) + " --out " + q(gguf));
    ASSERT_EQ(r.status, 0) << r.err;
    expect_footprint_is_the_load(open_checkpoint(gguf), quant);
  }
  for (DType file : {DType::F16, DType::BF16})
    expect_footprint_is_the_load(synthesize_checkpoint(synthetic_config("gemma2", "tiny"), file),
                                 "gemma2 " + std::string(dtype_name(file)));
}

TEST(WeightsFootprint, RefusesWhatALoadRefusesWithItsError) {
  Checkpoint ck = synthesize_checkpoint(synthetic_config("llama", "tiny"), DType::F32);
  auto error_of = [&](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  Checkpoint wrong = ck;
  wrong.tensors["model.layers.1.mlp.up_proj.weight"].shape[0] += 1;
  Checkpoint missing = ck;
  missing.tensors.erase("model.layers.0.self_attn.k_proj.weight");
  for (const Checkpoint* bad : {&wrong, &missing}) {
    const std::string load = error_of([&] { build_weights(*bad, DType::F16); });
    ASSERT_FALSE(load.empty());
    EXPECT_EQ(error_of([&] { weights_footprint(*bad, DType::F16); }), load);
  }
}

TEST(InspectCli, DescribesAModelAsJsonAndText) {
  const std::string model = test::shared_file("models/stories260K/stories260K.bin");
  const auto r = kvparity("inspect --model " + q(model) + " --json --cache-capacity 100 --batch-size 3");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto d = nlohmann::json::parse(r.out);
  EXPECT_EQ(d["format"], "llama2c");
  EXPECT_EQ(d["family"], "llama");
  EXPECT_EQ(d["shape"]["layers"], 5);
  EXPECT_EQ(d["shape"]["kv_heads"], 4);
  EXPECT_EQ(d["attention"]["kind"], "grouped-query");
  EXPECT_EQ(d["rope"]["qk_rows"], "interleaved");
  EXPECT_TRUE(d["head"]["tied"].get<bool>());
  EXPECT_TRUE(d["special_tokens"]["bos_ends_generation"].get<bool>());
  EXPECT_EQ(d["file"]["unused"].size(), 0u);
  EXPECT_EQ(d["parameters"]["head"], 0);
  EXPECT_NE(d["tokenizer"]["source"].get<std::string>().find("tok512.bin"), std::string::npos);
  EXPECT_EQ(d["tokenizer"]["vocab_size"], 512);
  EXPECT_EQ(d["memory"]["cache_capacity"], 100);
  ASSERT_EQ(d["memory"]["rows"].size(), 3u);
  // 2 (K, V) x 5 layers x 4 KV heads x head_dim 8, in 4 or 2 bytes; x 100 positions x 3 sequences.
  EXPECT_EQ(d["memory"]["rows"][0]["kv_bytes_per_position"], 2 * 5 * 4 * 8 * 4);
  EXPECT_EQ(d["memory"]["rows"][1]["kv_bytes_per_position"], 2 * 5 * 4 * 8 * 2);
  EXPECT_EQ(d["memory"]["rows"][1]["kv_cache_bytes"], 2 * 5 * 4 * 8 * 2 * 100 * 3);
  EXPECT_EQ(d["memory"]["rows"][0]["weights_converted_bytes"], 0);  // an fp32 file at fp32
  EXPECT_GT(d["memory"]["rows"][1]["weights_converted_bytes"], 0);

  const auto t = kvparity("inspect --model " + q(model));
  ASSERT_EQ(t.status, 0) << t.err;
  for (const char* s : {"family       llama", "tied to the embedding", "8 heads of 8, 4 KV heads", "512 tokens",
                        "static KV cache of 512 positions x 1 sequence", "BOS 1 \"\\n<s>\\n\""})
    EXPECT_NE(t.out.find(s), std::string::npos) << s << "\n" << t.out;

  // A family's features, from the references' configs.
  const auto g = kvparity("inspect --json --model " + q(test::shared_file("reference/gemma2")));
  ASSERT_EQ(g.status, 0) << g.err;
  const auto gd = nlohmann::json::parse(g.out);
  EXPECT_EQ(gd["attention"]["window_layers"], "even");
  EXPECT_GT(gd["attention"]["logit_softcap"].get<double>(), 0);
  EXPECT_GT(gd["head"]["final_logit_softcap"].get<double>(), 0);
  EXPECT_EQ(gd["norm"]["gain"], "1 + w");
  EXPECT_TRUE(gd["tokenizer"]["source"].is_null());
  const auto g3 = kvparity("inspect --json --model " + q(test::reference_dir("gemma3")));
  ASSERT_EQ(g3.status, 0) << g3.err;
  const auto g3d = nlohmann::json::parse(g3.out);
  EXPECT_EQ(g3d["family"], "gemma3");
  EXPECT_EQ(g3d["attention"]["window_layers"], "periodic");
  EXPECT_EQ(g3d["attention"]["window_period"], 3);
  EXPECT_EQ(g3d["attention"]["qk_norm"], true);
  EXPECT_EQ(g3d["attention"]["logit_softcap"], 0.0);
  EXPECT_EQ(g3d["rope"]["local_theta"], 10000.0);
  EXPECT_EQ(g3d["rope"]["scaling"], "linear");
  EXPECT_EQ(g3d["norm"]["gain"], "1 + w");
  const auto g3t = kvparity("inspect --model " + q(test::reference_dir("gemma3")));
  ASSERT_EQ(g3t.status, 0) << g3t.err;
  for (const char* s : {"window 16 in all but one of every 3 layers", "windowed layers theta 10000, unscaled",
                        "q/k normalised per head"})
    EXPECT_NE(g3t.out.find(s), std::string::npos) << s << "\n" << g3t.out;
}

// A preset described before it is made: Mixtral-8x7B's 93 GB are sized from their shapes alone, as
// the bf16 checkpoint synth would write (every number the footprint's of that checkpoint).
TEST(InspectCli, DescribesASynthPresetWithoutGeneratingIt) {
  const auto r = kvparity("inspect --synth mixtral-8x7b --cache-capacity 4096 --batch-size 2 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json d = nlohmann::json::parse(r.out);
  EXPECT_EQ(d["family"], "mixtral");
  EXPECT_EQ(d["parameters"]["total"], 46702792704LL);
  EXPECT_EQ(d["experts"]["experts"], 8);
  EXPECT_EQ(d["file"]["bytes"], size_t(46702792704LL) * 2);
  EXPECT_EQ(d["tokenizer"]["vocab_size"], 32000);
  const nlohmann::json& bf16 = d["memory"]["rows"][2];
  ASSERT_EQ(bf16["dtype"], "bf16");
  const WeightsFootprint f =
      weights_footprint(synthetic_shapes(synthetic_config("", "mixtral-8x7b"), DType::BF16), DType::BF16);
  EXPECT_EQ(bf16["decode_read_bytes"], f.decode_bytes);
  // 2 of 8 experts a token: a decoded token reads about a quarter of the experts' bytes.
  EXPECT_LT(bf16["decode_read_bytes"].get<double>(), 0.3 * d["file"]["bytes"].get<double>());
  EXPECT_EQ(bf16["kv_cache_bytes"], size_t(2) * 32 * 8 * 128 * 2 * 4096 * 2);  // K and V, 32 layers, 8 heads of 128
  // Qwen3-30B-A3B's intermediate_size: read by no layer, all of them sparse; Mixtral's is its experts'.
  EXPECT_NE(kvparity("inspect --synth qwen3-30b-a3b").out.find("MLP 6144 (no dense layer reads it)"), std::string::npos);
  EXPECT_NE(kvparity("inspect --synth mixtral-8x7b").out.find("MLP 14336, vocab"), std::string::npos);
  const auto tiny = kvparity("inspect --synth tiny --arch olmoe");
  ASSERT_EQ(tiny.status, 0) << tiny.err;
  EXPECT_NE(tiny.out.find("family       olmoe"), std::string::npos) << tiny.out;
  EXPECT_NE(tiny.out.find("shapes only"), std::string::npos) << tiny.out;
}

TEST(InspectCli, BadInputIsAnErrorNamingIt) {
  const std::string model = test::shared_file("models/stories260K/stories260K.bin");
  test::TempDir tmp;
  struct Case {
    std::string args;
    int status;
    std::string message;
  } cases[] = {
      {"--model " + q(tmp.file("none.gguf")), 1, "none.gguf"},
      {"--model " + q(model) + " --kv-dtype q8_0", 1, "head_dim is 8"},
      {"--model " + q(model) + " --batch-size 0", 2, "--batch-size"},
      {"--model " + q(model) + " --kv-dtype q7", 2, "--kv-dtype"},
      {"--model " + q(model) + " --tokenizer " + q(tmp.file("tok.json")), 1, "tok.json"},
      {"", 2, "--model or --synth"},
      {"--model " + q(model) + " --synth tiny", 2, "--synth"},
      {"--synth mixtral-8x22b", 2, "--synth"},
      {"--synth llama2-7b --arch gemma2", 2, "gemma2"},
      {"--arch olmoe", 2, "--synth"},
  };
  for (const auto& c : cases) {
    const auto r = kvparity("inspect " + c.args);
    EXPECT_EQ(r.status, c.status) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find("error:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

}  // namespace
}  // namespace kvp
