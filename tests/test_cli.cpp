// The `kvparity` command line as users and scripts see it: outputs, JSON, .npy files, and the
// exit-status contract (0 ok, 1 bad input with a one-line "error:", 2 usage).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lab/npy.h"
#include "cli_run.h"
#include "io/checkpoint.h"
#include "test_util.h"

namespace kvp {
namespace {

using CliRun = test::CliRun;

using test::kvparity;
using test::q;

TEST(Cli, GenerateGreedyTextMatchesTheReference) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  for (const char* cache : {"on", "off"}) {
    const CliRun r = kvparity("generate --model " + q(model) + " --tokenizer " + q(tok) +
                      " --prompt 'Once upon a time' --max-new-tokens 20 --cache " + cache);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out.rfind(", there was a little girl named Lily.", 0), 0u) << r.out;
  }
}

TEST(Cli, GenerateJsonCarriesIdsAndIsSeeded) {
  KVP_REQUIRE_SHARED(hf, "models/stories260K/hf");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  const std::string base = "generate --model " + q(hf) + " --tokenizer " + q(tok) +
                           " --prompt 'Once upon a time' --max-new-tokens 24 --dtype bf16 --sampler top-p --top-p 0.9"
                           " --temperature 0.8 --json";
  const CliRun a = kvparity(base + " --cache off --seed 7");
  const CliRun b = kvparity(base + " --cache off --seed 7");
  const CliRun c = kvparity(base + " --cache off --seed 8");
  ASSERT_EQ(a.status, 0) << a.err;
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out), jc = nlohmann::json::parse(c.out);
  EXPECT_EQ(ja["prompt_ids"], nlohmann::json({1, 403, 407, 261, 378}));
  EXPECT_EQ(ja["output_ids"].size(), 24u);
  EXPECT_TRUE(ja["text"].is_string());
  EXPECT_EQ(ja["output_ids"], jb["output_ids"]) << "same seed must give the same draws";
  EXPECT_NE(ja["output_ids"], jc["output_ids"]) << "a different seed should change a 24-token top-p sample";
}

TEST(Cli, EmptyPromptMeansBosOnly) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const CliRun r = kvparity("generate --model " + q(model) + " --prompt '' --max-new-tokens 5 --json");  // tok512.bin found beside
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["prompt_ids"], nlohmann::json({1}));
  EXPECT_EQ(j["output_ids"], nlohmann::json({403, 407, 261, 378, 432}));
}

TEST(Cli, TokenizeAndDetokenize) {
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  CliRun r = kvparity("tokenize --tokenizer " + q(tok) + " --text 'Once upon a time' --bos");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out), nlohmann::json({1, 403, 407, 261, 378}));
  r = kvparity("detokenize --tokenizer " + q(tok) + " --ids 1,403,407,261,378");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "Once upon a time\n");
}

TEST(Cli, ForwardWritesLogitsAndHiddenStatesAsNpy) {
  KVP_REQUIRE_SHARED(dir, "reference/llama");
  test::TempDir tmp;
  const CliRun r = kvparity("forward --model " + q(dir) + " --tokens-file " + q(dir + "/tokens.json") + " --logits-out " +
                    q(tmp.file("l.npy")) + " --hidden-out " + q(tmp.file("h.npy")));
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<int64_t> shape;
  const auto logits = read_npy_f32(tmp.file("l.npy"), &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{48, 512}));
  const auto hidden = read_npy_f32(tmp.file("h.npy"), &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{5, 48, 64}));
  std::ifstream in(dir + "/logits.f32", std::ios::binary);
  std::vector<float> ref(48 * 512);
  in.read(reinterpret_cast<char*>(ref.data()), std::streamsize(ref.size() * 4));
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, double(std::fabs(ref[i] - logits[i])));
  EXPECT_LE(worst, 1e-4);
  if (std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") == 0) {
    const std::string py = "/usr/bin/python3 -c \"import numpy as np; a=np.load('" + tmp.file("l.npy") +
                           "'); assert a.shape==(48,512) and a.dtype==np.float32\"";
    EXPECT_EQ(std::system(py.c_str()), 0) << "numpy cannot read the .npy file";
  }
}

TEST(Cli, SynthConvertAndReloadEveryFormat) {
  test::TempDir tmp;
  CliRun r = kvparity("synth --arch llama --preset tiny --dtype fp16 --format gguf --out " + q(tmp.file("t.gguf")));
  ASSERT_EQ(r.status, 0) << r.err;
  r = kvparity("synth --arch llama --preset tiny --dtype fp16 --format hf --out " + q(tmp.file("t_hf")));
  ASSERT_EQ(r.status, 0) << r.err;
  // The GGUF carries its vocabulary and the HF dir its tokenizer.json: no --tokenizer needed.
  const CliRun a = kvparity("generate --model " + q(tmp.file("t.gguf")) + " --prompt 'Once upon' --max-new-tokens 8 --dtype fp16 --json");
  const CliRun b = kvparity("generate --model " + q(tmp.file("t_hf")) + " --prompt 'Once upon' --max-new-tokens 8 --dtype fp16 --json");
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_EQ(nlohmann::json::parse(a.out)["output_ids"], nlohmann::json::parse(b.out)["output_ids"]);
  EXPECT_EQ(nlohmann::json::parse(a.out)["prompt_ids"], nlohmann::json::parse(b.out)["prompt_ids"]);
  // convert GGUF -> HF and back.
  r = kvparity("convert --model " + q(tmp.file("t.gguf")) + " --to hf --out " + q(tmp.file("back_hf")));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(tmp.file("back_hf/config.json")));
  EXPECT_TRUE(std::filesystem::exists(tmp.file("back_hf/model.safetensors")));
}

TEST(Cli, ConvertLlama2cToGgufEmbedsTheTokenizer) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  test::TempDir tmp;
  CliRun r = kvparity("convert --model " + q(model) + " --tokenizer " + q(tok) + " --to gguf --out " + q(tmp.file("s.gguf")));
  ASSERT_EQ(r.status, 0) << r.err;
  r = kvparity("generate --model " + q(tmp.file("s.gguf")) + " --prompt 'Once upon a time' --max-new-tokens 12");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind(", there was a little girl", 0), 0u) << r.out;
}

TEST(Cli, ConvertRefusesATokenizerLongerThanTheEmbedding) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/llama2-tokenizer/tokenizer.bin");  // 32000 tokens for 512 rows
  test::TempDir tmp;
  for (const char* to : {"gguf", "hf"}) {
    const std::string out = tmp.file(std::string("s.") + to);
    const CliRun r = kvparity("convert --model " + q(model) + " --tokenizer " + q(tok) + " --to " + to + " --out " + q(out));
    EXPECT_EQ(r.status, 1) << to;
    EXPECT_NE(r.err.find("error: " + tok + ": 32000 tokens, more than the 512 embedding rows"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << to;
  }
}

// A real model quantised by convert: the file is a conformant GGUF about half the size, reloads
// with its matrices quantised, and greedy text stays the float model's on this short run.
TEST(Cli, ConvertQuantisesAndTheQuantisedFileGenerates) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  test::TempDir tmp;
  const std::string base = "convert --model " + q(model) + " --tokenizer " + q(tok) + " --to gguf --out ";
  CliRun r = kvparity(base + q(tmp.file("f.gguf")));
  ASSERT_EQ(r.status, 0) << r.err;
  r = kvparity(base + q(tmp.file("q8.gguf")) + " --quant Q8_0");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_LT(std::filesystem::file_size(tmp.file("q8.gguf")), std::filesystem::file_size(tmp.file("f.gguf")) * 6 / 10);
  size_t quantised = 0;
  for (const auto& [name, t] : open_checkpoint(tmp.file("q8.gguf")).tensors) quantised += t.quant == QuantType::Q8_0;
  EXPECT_GE(quantised, 5u * 6u + 1u);  // ffn_down's 172-wide rows are no whole number of blocks: kept F32
  // Q4_0 is llama.cpp's mix: the output matrix (here the tied embedding) gets more bits, unless
  // --pure: Q6_K, or here its fallback Q8_0 (64-wide rows hold no 256-value block).
  for (const bool pure : {false, true}) {
    const std::string f = tmp.file(pure ? "q4p.gguf" : "q4.gguf");
    r = kvparity(base + q(f) + " --quant Q4_0" + (pure ? " --pure" : ""));
    ASSERT_EQ(r.status, 0) << r.err;
    const Checkpoint ck = open_checkpoint(f);
    EXPECT_EQ(ck.tensors.at("model.embed_tokens.weight").quant, pure ? QuantType::Q4_0 : QuantType::Q8_0);
    EXPECT_EQ(ck.tensors.at("model.layers.0.self_attn.q_proj.weight").quant, QuantType::Q4_0);
  }
  const std::string gen = " --prompt 'Once upon a time' --max-new-tokens 16 --json";
  const CliRun a = kvparity("generate --model " + q(tmp.file("f.gguf")) + gen);
  const CliRun b = kvparity("generate --model " + q(tmp.file("q8.gguf")) + gen);
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_EQ(nlohmann::json::parse(a.out)["output_ids"], nlohmann::json::parse(b.out)["output_ids"]);
  // A quantised GGUF converts back to float (dequantised) or stays quantised in a GGUF.
  r = kvparity("convert --model " + q(tmp.file("q8.gguf")) + " --to hf --out " + q(tmp.file("deq_hf")));
  ASSERT_EQ(r.status, 0) << r.err;
  r = kvparity("convert --model " + q(tmp.file("q8.gguf")) + " --to gguf --out " + q(tmp.file("again.gguf")));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(std::filesystem::file_size(tmp.file("again.gguf")), std::filesystem::file_size(tmp.file("q8.gguf")));
  // Options that cannot apply are refused before anything is written.
  r = kvparity("convert --model " + q(model) + " --to hf --quant Q8_0 --out " + q(tmp.file("no_hf")));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--quant Q8_0 needs --to gguf"), std::string::npos) << r.err;
  r = kvparity(base + q(tmp.file("no.gguf")) + " --quant Q4_K --dtype fp16");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("exclude each other"), std::string::npos) << r.err;
  r = kvparity(base + q(tmp.file("no.gguf")) + " --quant IQ2_XXS");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("IQ2_XXS"), std::string::npos) << r.err;
  r = kvparity("synth --preset tiny --format hf --quant Q8_0 --out " + q(tmp.file("no_synth")));
  EXPECT_EQ(r.status, 2);
  r = kvparity(base + q(tmp.file("no.gguf")) + " --pure");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--pure requires --quant"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(tmp.file("no.gguf")));
  EXPECT_FALSE(std::filesystem::exists(tmp.file("no_synth")));
}

TEST(Cli, BadInputExitsOneWithANamedError) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  test::TempDir tmp;
  {  // truncated checkpoint
    std::ifstream in(model, std::ios::binary);
    std::string bytes(100000, '\0');
    in.read(bytes.data(), std::streamsize(bytes.size()));
    std::ofstream(tmp.file("trunc.bin"), std::ios::binary) << bytes;
  }
  CliRun r = kvparity("generate --model " + q(tmp.file("trunc.bin")) + " --tokenizer " + q(model) + " --prompt hi");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("error:"), std::string::npos);
  EXPECT_NE(r.err.find("trunc.bin"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one-line error expected: " << r.err;

  r = kvparity("generate --model " + q(tmp.file("missing.gguf")) + " --prompt hi");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("missing.gguf"), std::string::npos) << r.err;

  // Unknown architecture in config.json.
  std::filesystem::create_directories(tmp.file("weird"));
  std::ofstream(tmp.file("weird/config.json")) << R"({"model_type": "mamba", "architectures": ["MambaForCausalLM"]})";
  std::ofstream(tmp.file("weird/model.safetensors")) << "x";
  r = kvparity("generate --model " + q(tmp.file("weird")) + " --prompt hi");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("mamba"), std::string::npos) << r.err;

  // Another model's tokenizer (Llama-2's 32000 ids for a 512-row embedding) is named before any work.
  const std::string llama2_tok = test::shared_file("models/llama2-tokenizer/tokenizer.bin");
  if (llama2_tok.empty()) return;
  r = kvparity("generate --model " + q(model) + " --tokenizer " + q(llama2_tok) + " --prompt 'Once upon a time'");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("the prompt: token 9038 at position 1 has no embedding row"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("is the tokenizer this model's?"), std::string::npos) << r.err;
}

TEST(Cli, PromptLongerThanTheContextIsRefused) {
  KVP_REQUIRE_SHARED(model, "models/aidreams260K/aidreams260K.bin");
  std::string prompt;
  for (int i = 0; i < 200; ++i) prompt += "dream ";
  const CliRun r = kvparity("generate --model " + q(model) + " --prompt '" + prompt + "' --max-new-tokens 4");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("does not fit the context"), std::string::npos) << r.err;
}

TEST(Cli, UsageErrorsExitTwo) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  EXPECT_EQ(kvparity("").status, 2);
  EXPECT_EQ(kvparity("generate").status, 2);  // --model is required
  EXPECT_EQ(kvparity("frobnicate").status, 2);
  EXPECT_EQ(kvparity("generate --model " + q(model) + " --dtype fp8").status, 2);
  CliRun r = kvparity("generate --model " + q(model) + " --sampler top-p --top-p 1.5");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--top-p"), std::string::npos) << r.err;
  r = kvparity("generate --model " + q(model) + " --sampler temperature --temperature -1");
  EXPECT_EQ(r.status, 2);
  r = kvparity("generate --model " + q(model) + " --sampler top-k --top-k 0");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(kvparity("generate --model " + q(model) + " --kernels fastest").status, 2);
  // An empty --stop would match at once; it is refused rather than skipped.
  r = kvparity("generate --model " + q(model) + " --stop ''");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--stop: an empty string"), std::string::npos) << r.err;
}

TEST(Cli, DemoRunsOnTheBuiltInModel) {
  const CliRun r = kvparity("demo --max-new-tokens 8");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* dt : {"fp32", "fp16", "bf16"}) EXPECT_NE(r.out.find(dt), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("max |Δlogit|"), std::string::npos);
}

TEST(Cli, BenchPrintsJsonWithTheDocumentedFields) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const CliRun r = kvparity("bench --model " + q(model) +
                    " --dtype fp32,fp16 --kernels standard --threads 1 --prompt-tokens 8 --decode-tokens 4"
                    " --cache-off-tokens 8 --repeats 1 --bandwidth-gbs 10 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  for (const char* k : {"kernels", "dtype", "threads", "prefill_tok_s", "decode_tok_s", "cache_off_step_s",
                        "model_bytes", "kv_bytes", "bandwidth_bound_tok_s"})
    EXPECT_TRUE(j[0].contains(k)) << k;
  // The bound counts weights and the KV cache the timed steps read: --bandwidth-gbs 10 over both.
  EXPECT_GT(j[0]["kv_bytes"].get<double>(), 0.0);
  EXPECT_NEAR(j[0]["bandwidth_bound_tok_s"].get<double>(),
              10e9 / (j[0]["model_bytes"].get<double>() + j[0]["kv_bytes"].get<double>()), 1e-6);
  EXPECT_GT(j[0]["decode_tok_s"].get<double>(), 0.0);
  EXPECT_EQ(j[0]["logits"], "last");
  const CliRun all = kvparity("bench --model " + q(model) +
                              " --prompt-tokens 4 --decode-tokens 1 --cache-off-tokens 4 --repeats 1 --bandwidth-gbs 10"
                              " --logits all");
  ASSERT_EQ(all.status, 0) << all.err;
  EXPECT_NE(all.out.find("logits of every row"), std::string::npos) << all.out;
}

// --batch-cache-off: one cache-OFF step of the batch's sequences in one pass (the GSM8K study's
// step under --batch-size), timed beside the batched decode; it needs a batch.
TEST(Cli, BenchTimesABatchedCacheOffStep) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string bench = "bench --model " + q(model) +
                            " --prompt-tokens 4 --decode-tokens 2 --cache-off-tokens 6 --repeats 1 --bandwidth-gbs 10";
  const CliRun j = kvparity(bench + " --batch-size 3 --batch-cache-off --json");
  ASSERT_EQ(j.status, 0) << j.err;
  const auto rows = nlohmann::json::parse(j.out);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_GT(rows[0]["batch_cache_off_step_s"].get<double>(), 0.0);
  EXPECT_GT(rows[0]["batch_decode_tok_s"].get<double>(), 0.0);
  const CliRun t = kvparity(bench + " --batch-size 3 --batch-cache-off");
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("B=3 cache-off s"), std::string::npos) << t.out;
  // Without it the column and the field stay out of the way.
  const CliRun plain = kvparity(bench + " --batch-size 3 --json");
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(nlohmann::json::parse(plain.out)[0]["batch_cache_off_step_s"].get<double>(), 0.0);
  const CliRun alone = kvparity(bench + " --batch-cache-off");
  EXPECT_EQ(alone.status, 2);
  EXPECT_NE(alone.err.find("--batch-cache-off"), std::string::npos) << alone.err;
  EXPECT_NE(alone.err.find("error:"), std::string::npos) << alone.err;
}

TEST(Cli, QuantisedKvCachesRunAndRefuseWhatTheyCannotHold) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string gen = "generate --model " + q(model) + " --prompt 'Once upon a time' --max-new-tokens 6 ";
  for (const char* kv : {"fp8_e4m3", "fp8_e5m2"}) {
    const CliRun r = kvparity(gen + "--kv-dtype " + kv + " --json");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["kv_dtype"], kv);
  }
  EXPECT_EQ(kvparity(gen + "--kv-dtype fp8_e4m3 --kv-scale 0.5").status, 0);
  // stories260K's head_dim is 8: no room for a 32-value block.
  const CliRun bad = kvparity(gen + "--kv-dtype q8_0");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("head_dim is 8"), std::string::npos) << bad.err;
  const CliRun b = kvparity("bench --model " + q(model) +
                            " --dtype fp16 --kv-dtype fp16,fp8_e5m2 --prompt-tokens 4 --decode-tokens 2"
                            " --cache-off-tokens 4 --repeats 1 --bandwidth-gbs 10 --json");
  ASSERT_EQ(b.status, 0) << b.err;
  const auto j = nlohmann::json::parse(b.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["kv_dtype"], "fp16");
  EXPECT_EQ(j[1]["kv_dtype"], "fp8_e5m2");
}

TEST(Cli, BenchLoadTimesLoadingAgainstMappingAndTouchingTheFile) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const CliRun r = kvparity("bench --load --model " + q(model) + " --dtype fp32,fp16 --repeats 2 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["dtype"], "fp32");
  EXPECT_EQ(j[1]["dtype"], "fp16");
  for (const auto& row : j) {
    EXPECT_EQ(row["file_bytes"].get<double>(), double(std::filesystem::file_size(model)));
    EXPECT_GT(row["map_touch_s"].get<double>(), 0.0);
    EXPECT_GT(row["load_s"].get<double>(), 0.0);
    EXPECT_GE(row["ready_s"].get<double>(), row["load_s"].get<double>());
    EXPECT_NEAR(row["ready_over_map_touch"].get<double>(),
                row["ready_s"].get<double>() / row["map_touch_s"].get<double>(), 1e-9);
  }
  const CliRun t = kvparity("bench --load --model " + q(model) + " --repeats 1");
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("ready/floor"), std::string::npos) << t.out;
}

// An HF directory's floor maps every file its tensors live in (it used to mmap the directory).
TEST(Cli, BenchLoadOfADirectoryMapsItsWeightFiles) {
  test::TempDir tmp;
  const std::string dir = tmp.file("hf");
  ASSERT_EQ(kvparity("synth --preset tiny --arch mistral --dtype bf16 --out " + q(dir)).status, 0);
  const CliRun r = kvparity("bench --load --model " + q(dir) + " --dtype fp16,bf16 --repeats 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  for (const auto& row : j)
    EXPECT_EQ(row["file_bytes"].get<double>(), double(std::filesystem::file_size(dir + "/model.safetensors")));
  EXPECT_EQ(open_checkpoint(dir).files, std::vector<std::string>{dir + "/model.safetensors"});
}

// A study that cannot run stops before it writes anything: compare used to write its manifest and
// empty logs, and eval gsm8k its manifest, before looking for the tokenizer or checking the
// tensors' shapes (the folder then held a study of a model that never ran).
TEST(Cli, AStudyThatCannotRunStopsBeforeItWrites) {
  test::TempDir tmp;
  const std::string model = tmp.file("hf"), bad = tmp.file("bad"), out = tmp.file("out");
  ASSERT_EQ(kvparity("synth --preset tiny --out " + q(model)).status, 0);
  std::filesystem::copy(model, bad);
  std::filesystem::remove(model + "/tokenizer.json");
  {  // a config whose MLP width the tensors do not have
    std::ifstream in(bad + "/config.json");
    auto c = nlohmann::json::parse(in);
    c["intermediate_size"] = c["intermediate_size"].get<int>() + 8;
    std::ofstream(bad + "/config.json") << c.dump();
  }
  std::ofstream(tmp.file("broken.json")) << "{\"model\": ";
  KVP_REQUIRE_SHARED(gsm8k, "data/gsm8k/test.jsonl");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--model " + q(model), "no tokenizer found"},
      {"--model " + q(model) + " --tokenizer " + q(tmp.file("broken.json")), "broken.json"},
      {"--model " + q(bad), "gate_proj.weight' has shape"}};
  for (const auto& [source, message] : cases)
    for (const std::string& cmd : std::vector<std::string>{
             "compare --prompts builtin:facts --max-new-tokens 4", "profile --prompt Hello --step 1",
             "patch --prompt Hello --max-new-tokens 4", "eval gsm8k --shots 0 --limit 1 --data " + q(gsm8k)}) {
      const CliRun r = kvparity(cmd + " " + source + " --out " + q(out));
      EXPECT_EQ(r.status, 1) << cmd << " " << source << "\n" << r.err;
      EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
      EXPECT_FALSE(std::filesystem::exists(out)) << cmd << " " << source << " wrote into " << out;
      std::filesystem::remove_all(out);
    }
  // compare's prompts, all of them checked first: one too long for the context, one whose tokens
  // the embedding has no rows for (another model's tokenizer), named by id.
  std::ofstream(tmp.file("long.jsonl")) << "{\"id\": \"ok\", \"prompt\": \"Once\"}\n{\"id\": \"long\", \"prompt\": \""
                                        << std::string(4000, 'x') << "\"}\n";
  KVP_REQUIRE_SHARED(llama2_tokenizer, "models/llama2-tokenizer/tokenizer.bin");
  ASSERT_EQ(kvparity("synth --preset tiny --out " + q(tmp.file("hf2"))).status, 0);
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--model " + q(tmp.file("hf2")) + " --prompts " + q(tmp.file("long.jsonl")), "prompt 'long': "},
           {"--model " + q(tmp.file("hf2")) + " --tokenizer " + q(llama2_tokenizer) + " --prompts builtin:facts",
            "has no embedding row"}}) {
    const CliRun r = kvparity("compare --max-new-tokens 4 " + args + " --out " + q(out));
    EXPECT_EQ(r.status, 1) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << args << " wrote into " << out;
    std::filesystem::remove_all(out);
  }
  // The same mismatch in a GSM8K study, named by problem.
  const CliRun g = kvparity("eval gsm8k --shots 0 --limit 2 --max-new-tokens 4 --data " + q(gsm8k) + " --model " +
                            q(tmp.file("hf2")) + " --tokenizer " + q(llama2_tokenizer) + " --out " + q(out));
  EXPECT_EQ(g.status, 1) << g.err;
  EXPECT_NE(g.err.find("problem 0's prompt: token"), std::string::npos) << g.err;
  EXPECT_NE(g.err.find("has no embedding row"), std::string::npos) << g.err;
  EXPECT_FALSE(std::filesystem::exists(out)) << "eval gsm8k wrote into " << out;
}

}  // namespace
}  // namespace kvp
