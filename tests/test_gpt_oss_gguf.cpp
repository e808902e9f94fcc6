// GPT-OSS in GGUF: llama.cpp's "gpt-oss" files (io/gguf_gpt_oss.h) read as the model transformers
// runs, and written by kvparity in the same layout. The file under test is the one
// tests/gpt_oss_reference.py writes itself from llama.cpp's converter's rules (names, the even/odd
// split of gate_up_proj, F32 biases/sinks/router, ggml's MXFP4 nibble order), not one kvparity
// made: its logits must be the HF checkpoint's bit for bit and the replay's to 5e-5, and kvparity's
// own conversion of the checkpoint must give that file's tensors and keys.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "cli_run.h"
#include "core/mapped_file.h"
#include "gpt_oss_replay.h"
#include "io/checkpoint.h"
#include "io/gguf.h"
#include "io/model_writer.h"
#include "model/checkpoint_export.h"
#include "model/moe_names.h"
#include "test_util.h"
#include "tokenizer/vocab_spec.h"

namespace kvp {
namespace {

using test::logits_of;
using test::max_diff;
using GgufOfReplay = test::ReplayOf<false>;
using GgufOfMxfp4Replay = test::ReplayOf<true>;

constexpr double kGgufTolerance = 5e-5;  // fp32 against the float64 replay; logits of scale ~4

std::string bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The HF checkpoint and llama.cpp's file of it run as one model: the same config, and logits
// equal bit for bit in fp32 and bf16 (the same values reach the same kernels), fp32 within the
// replay's tolerance under every policy.
void expect_same_model(const std::string& dir, const test::Reference& ref) {
  const Checkpoint hf = open_checkpoint(dir);
  const Checkpoint gg = open_checkpoint(dir + "/model.gguf");
  EXPECT_EQ(gg.format, "gguf");
  test::expect_same_gpt_oss_config(hf.config, gg.config);
  for (DType dt : {DType::F32, DType::BF16}) {
    const auto la = logits_of(Model::from_checkpoint(hf, dt), KernelPolicy::Standard, ref.tokens);
    const auto lb = logits_of(Model::from_checkpoint(gg, dt), KernelPolicy::Standard, ref.tokens);
    ASSERT_EQ(la.size(), lb.size());
    EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0) << dtype_name(dt);
  }
  auto model = Model::from_checkpoint(gg, DType::F32);
  for (KernelPolicy pol :
       {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant, KernelPolicy::Portable}) {
    const std::vector<float> l = logits_of(model, pol, ref.tokens);
    EXPECT_LT(max_diff(l.data(), ref.logits, 0, l.size()), kGgufTolerance) << policy_name(pol);
  }
}

// kvparity's own conversion of the HF checkpoint holds llama.cpp's layout: the reference file's
// every tensor (name, shape, ggml type, bytes) and key (value), plus keys of its own.
void expect_conversion_matches(const std::string& dir) {
  const Checkpoint hf = open_checkpoint(dir);
  test::TempDir tmp;
  const std::string out = tmp.file("ours.gguf");
  export_checkpoint(hf, "gguf", out);
  const std::string want_bytes = bytes_of(dir + "/model.gguf"), got_bytes = bytes_of(out);
  const auto* wb = reinterpret_cast<const uint8_t*>(want_bytes.data());
  const auto* gb = reinterpret_cast<const uint8_t*>(got_bytes.data());
  const GgufFile want = parse_gguf(wb, want_bytes.size(), "reference");
  const GgufFile got = parse_gguf(gb, got_bytes.size(), out);
  ASSERT_EQ(got.tensors.size(), want.tensors.size());
  for (const GgufTensorInfo& w : want.tensors) {
    auto it = std::find_if(got.tensors.begin(), got.tensors.end(), [&](const GgufTensorInfo& g) { return g.name == w.name; });
    ASSERT_NE(it, got.tensors.end()) << w.name;
    EXPECT_EQ(it->ne, w.ne) << w.name;
    EXPECT_EQ(it->type, w.type) << w.name;
    uint64_t n = 1;
    for (uint64_t d : w.ne) n *= d;
    const size_t bytes = w.type == 39 ? size_t(n / 32 * 17) : size_t(n * 4);
    EXPECT_EQ(std::memcmp(gb + got.data_offset + it->offset, wb + want.data_offset + w.offset, bytes), 0) << w.name;
  }
  for (const auto& [k, v] : want.kv) {
    auto it = got.kv.find(k);
    ASSERT_NE(it, got.kv.end()) << k;
    EXPECT_EQ(it->second.type, v.type) << k;
    EXPECT_EQ(it->second.u, v.u) << k;
    EXPECT_EQ(it->second.f, v.f) << k;
    EXPECT_EQ(it->second.s, v.s) << k;
  }
  const Checkpoint back = open_checkpoint(out);
  const std::vector<int> toks = {5, 17, 99, 3, 42, 64, 7, 120};
  const auto la = logits_of(Model::from_checkpoint(hf, DType::F32), KernelPolicy::Standard, toks);
  const auto lb = logits_of(Model::from_checkpoint(back, DType::F32), KernelPolicy::Standard, toks);
  EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0);
}

TEST_F(GgufOfReplay, LlamaCppsFileIsTheCheckpointsModel) {
  ASSERT_FALSE(ref_->tokens.empty());
  expect_same_model(dir_->path(), *ref_);
}

TEST_F(GgufOfReplay, KvparitysConversionIsLlamaCppsLayout) { expect_conversion_matches(dir_->path()); }

TEST_F(GgufOfMxfp4Replay, LlamaCppsMxfp4FileIsTheCheckpointsModel) {
  ASSERT_FALSE(ref_->tokens.empty());
  expect_same_model(dir_->path(), *ref_);
  // The experts stay MXFP4 in both, block for block: kvparity's repacking of HF's nibbles is the
  // converter's (the replay's Python, written from it).
  const Checkpoint hf = open_checkpoint(dir_->path());
  const Checkpoint gg = open_checkpoint(dir_->path() + "/model.gguf");
  for (ExpertMatrix m : {ExpertMatrix::Gate, ExpertMatrix::Up, ExpertMatrix::Down}) {
    const std::string n = expert_matrix_name(hf.config, 1, 3, m);
    const TensorView &a = hf.tensors.at(n), &b = gg.tensors.at(n);
    ASSERT_EQ(a.quant, QuantType::MXFP4) << n;
    ASSERT_EQ(b.quant, QuantType::MXFP4) << n;
    ASSERT_EQ(a.shape, b.shape) << n;
    EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes()), 0) << n;
  }
}

TEST_F(GgufOfMxfp4Replay, KvparitysConversionKeepsTheMxfp4Blocks) { expect_conversion_matches(dir_->path()); }

// What a gpt-oss GGUF cannot say is refused by name before a byte is written; what kvparity cannot
// read as transformers' model is refused by the key or tensor that says it.
TEST_F(GgufOfReplay, WhatTheFileCannotSayIsRefused) {
  const Checkpoint hf = open_checkpoint(dir_->path());
  test::TempDir tmp;
  auto refused_write = [&](Checkpoint ck, const char* what) {
    const std::string out = tmp.file("refused.gguf");
    const std::string e = test::error_of([&] { export_checkpoint(ck, "gguf", out); });
    EXPECT_NE(e.find(what), std::string::npos) << e;
    EXPECT_FALSE(std::filesystem::exists(out)) << what;
  };
  Checkpoint limit = hf;
  limit.config.moe.swiglu_limit = 5.0f;
  refused_write(limit, "clamps its SwiGLU at 7");
  Checkpoint truncated = hf;
  truncated.config.rope_yarn_truncate = true;
  refused_write(truncated, "untruncated");

  // Keys of llama.cpp's own YaRN formula and a window pattern that is not every other layer.
  for (auto [key, value, what] : {std::tuple{"gpt-oss.rope.scaling.yarn_log_multiplier", GgufValue::of_f32(0.1f),
                                             "yarn_log_multiplier"},
                                  std::tuple{"gpt-oss.attention.sliding_window_pattern", GgufValue::of_u32(3),
                                             "sliding_window_pattern"}}) {
    GgufWriteOptions go;
    go.extra_kv[key] = value;
    std::vector<TensorView> none;
    const std::string out = tmp.file(std::string(what) + ".gguf");
    // A file with the config's keys and no tensors is enough: the keys are read first.
    write_gguf(out, hf.config, none, nullptr, go);
    const std::string e = test::error_of([&] { open_checkpoint(out); });
    EXPECT_NE(e.find(what), std::string::npos) << e;
  }
}

// Tensors in the wrong layout or under a name no gpt-oss layer has: the error names the tensor.
TEST_F(GgufOfReplay, MisshapenOrMissingTensorsAreRefusedByName) {
  const std::string good = bytes_of(dir_->path() + "/model.gguf");
  test::TempDir tmp;
  // A tensor's info in the header: its name (u64 length, bytes), n_dims (u32), ne[]. `edit` gets
  // the offset just past the name.
  auto with = [&](const std::string& name, auto&& edit) {
    std::string b = good;
    const uint64_t len = name.size();
    const std::string needle = std::string(reinterpret_cast<const char*>(&len), sizeof len) + name;
    const size_t at = b.find(needle);
    EXPECT_NE(at, std::string::npos) << name;
    if (at != std::string::npos) edit(b, at + needle.size());
    const std::string out = tmp.file("edited.gguf");
    std::ofstream(out, std::ios::binary) << b;
    return out;
  };
  const std::string swapped = with("blk.2.ffn_up_exps.bias", [](std::string& b, size_t p) {
    uint64_t ne[2];
    std::memcpy(ne, b.data() + p + 4, 16);
    std::swap(ne[0], ne[1]);
    std::memcpy(b.data() + p + 4, ne, 16);
  });
  std::string e = test::error_of([&] { open_checkpoint(swapped); });
  EXPECT_NE(e.find("blk.2.ffn_up_exps.bias"), std::string::npos) << e;
  const std::string renamed = with("blk.1.ffn_gate_inp.weight", [](std::string& b, size_t p) {
    b.replace(p - 25, 25, "blk.1.ffn_gate_inq.weight");  // the same length
  });
  e = test::error_of([&] { open_checkpoint(renamed); });
  EXPECT_NE(e.find("blk.1.ffn_gate_inq.weight"), std::string::npos) << e;
}

// A gpt-oss vocabulary's <|call|> and <|endoftext|> end a generation beside its EOS (<|return|>),
// as its generation_config.json and llama.cpp's end-of-generation tokens have it; and it adds no
// BOS unless the file says so.
TEST_F(GgufOfReplay, TheHarmonyEndTokensEndAGenerationAndNoBosIsAdded) {
  const Checkpoint hf = open_checkpoint(dir_->path());
  VocabSpec v;
  v.model = "gpt2";
  v.pre = "gpt-4o";
  for (int i = 0; i < hf.config.vocab_size; ++i) v.tokens.push_back("t" + std::to_string(i));
  v.tokens[100] = "<|return|>";
  v.tokens[101] = "<|call|>";
  v.tokens[102] = "<|endoftext|>";
  v.token_types.assign(v.tokens.size(), 1);
  for (int i : {100, 101, 102}) v.token_types[size_t(i)] = 3;
  v.eos_id = 100;
  v.add_bos = false;
  test::TempDir tmp;
  ExportOptions eo;
  eo.vocab = &v;
  export_checkpoint(hf, "gguf", tmp.file("v.gguf"), eo);
  const ModelConfig c = open_checkpoint(tmp.file("v.gguf")).config;
  EXPECT_EQ(c.eos_id, 100);
  for (int id : {100, 101, 102}) EXPECT_TRUE(c.ends_generation(id)) << id;
  EXPECT_FALSE(c.ends_generation(103));
  // Without tokenizer.ggml.add_bos_token (ggml-org's gpt-oss files have none), llama.cpp's default:
  // no BOS for a byte-level vocabulary, but for Llama-3's pre-tokenizer.
  const std::string bytes = bytes_of(tmp.file("v.gguf"));
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  GgufFile g = parse_gguf(data, bytes.size(), "v.gguf");
  ASSERT_EQ(g.kv.erase("tokenizer.ggml.add_bos_token"), 1u);
  EXPECT_FALSE(gguf_to_checkpoint(g, data, bytes.size(), "v.gguf").vocab->add_bos);
  g.kv["tokenizer.ggml.pre"] = GgufValue::of_str("llama-bpe");
  EXPECT_TRUE(gguf_to_checkpoint(g, data, bytes.size(), "v.gguf").vocab->add_bos);
}

// synth writes gpt_oss as GGUF, and inspect reads it back.
TEST(GptOssGgufCli, SynthWritesAGgufThatRuns) {
  test::TempDir tmp;
  const std::string out = tmp.file("tiny.gguf");
  test::CliRun r = test::run_kvparity("synth --arch gpt_oss --format gguf --out " + test::q(out));
  ASSERT_EQ(r.status, 0) << r.err;
  r = test::run_kvparity("inspect --model " + test::q(out));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("gpt_oss"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kvp
