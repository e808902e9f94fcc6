// GGUF files kvparity writes, checked by an independent reader: tests/gguf_conformance.py parses
// the bytes per the published GGUF v3 spec and llama.cpp's loader rules (key types, tensor names,
// ne[] order, alignment, tokenizer arrays) and shares no code with src/io. Deliberately broken
// copies must make it fail, so a pass means something.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "core/dtype.h"
#include "core/quant.h"
#include "io/checkpoint.h"
#include "io/gguf.h"
#include "kernels/dequant_rows.h"
#include "model/checkpoint_export.h"
#include "model/synthetic.h"
#include "test_util.h"

namespace kvp {
namespace {

constexpr const char* kPython = "/usr/bin/python3";

using ProcResult = test::CliRun;

using test::q;

ProcResult run(const std::string& cmd) { return test::run_command(cmd); }

std::string checker() { return std::string(KVPARITY_SOURCE_DIR) + "/tests/gguf_conformance.py"; }

// The checker needs /usr/bin/python3; its absence is a failure, never a skip.
bool have_python() {
  if (std::filesystem::exists(kPython)) return true;
  ADD_FAILURE() << kPython << " is missing: the GGUF conformance checker (tests/gguf_conformance.py) cannot run";
  return false;
}

ProcResult check(const std::string& gguf, const std::string& hf_dir = "") {
  std::string cmd = std::string(kPython) + " " + q(checker()) + " " + q(gguf) + " --quiet";
  if (!hf_dir.empty()) cmd += " --hf-reference " + q(hf_dir);
  return run(cmd);
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

// Offset just past the first occurrence of the length-prefixed GGUF string `s`, or 0.
size_t find_gguf_string(const std::vector<uint8_t>& b, const std::string& s) {
  std::vector<uint8_t> pat(8 + s.size());
  const uint64_t n = s.size();
  std::memcpy(pat.data(), &n, 8);  // little-endian host (GGUF is little-endian)
  std::memcpy(pat.data() + 8, s.data(), s.size());
  auto it = std::search(b.begin(), b.end(), pat.begin(), pat.end());
  return it == b.end() ? 0 : size_t(it - b.begin()) + pat.size();
}

class GgufConformance : public ::testing::Test {
 protected:
  test::TempDir tmp;

  // kvparity synth tiny llama fp16, as GGUF and (same seed) as HF.
  std::string synth_gguf() {
    const std::string out = tmp.file("synth.gguf");
    const ProcResult r = run(std::string(KVPARITY_BIN) + " synth --arch llama --preset tiny --dtype fp16 --format gguf --out " + q(out));
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    return r.status == 0 ? out : "";
  }
};

TEST_F(GgufConformance, SynthTinyLlamaFp16Passes) {
  if (!have_python()) return;
  const std::string gguf = synth_gguf();
  ASSERT_FALSE(gguf.empty());
  const std::string hf = tmp.file("synth_hf");
  const ProcResult s = run(std::string(KVPARITY_BIN) + " synth --arch llama --preset tiny --dtype fp16 --format hf --out " + q(hf));
  ASSERT_EQ(s.status, 0) << s.out << s.err;

  const ProcResult c = check(gguf);
  EXPECT_EQ(c.status, 0) << "checker report:\n" << c.out << c.err;
  // Same weights through llama.cpp's HF->GGUF transform (names, reversed dims, q/k RoPE permute).
  const ProcResult x = check(gguf, hf);
  EXPECT_EQ(x.status, 0) << "checker report (vs synth --format hf):\n" << x.out << x.err;
}

// Qwen3 and Gemma-3: llama.cpp's tensors for them (attn_q_norm / attn_k_norm of head_dim, q of
// heads x head_dim wider than the hidden size; Gemma-3's four norms and its norms stored as 1 + w)
// and keys; and the HF directory of the same weights.
TEST_F(GgufConformance, SynthTinyQwen3Gemma3AndOlmo2Bf16Pass) {
  if (!have_python()) return;
  for (const std::string arch : {"qwen3", "gemma3", "olmo2"}) {
    SCOPED_TRACE(arch);
    const std::string gguf = tmp.file(arch + ".gguf"), hf = tmp.file(arch + "_hf");
    for (const auto& [format, out] : {std::pair{"gguf", gguf}, std::pair{"hf", hf}}) {
      const ProcResult r = run(std::string(KVPARITY_BIN) + " synth --arch " + arch + " --preset tiny --dtype bf16 --format " +
                               format + " --out " + q(out));
      ASSERT_EQ(r.status, 0) << r.out << r.err;
    }
    const ProcResult c = check(gguf);
    EXPECT_EQ(c.status, 0) << "checker report:\n" << c.out << c.err;
    EXPECT_NE(c.out.find("\"architecture\": \"" + arch + "\""), std::string::npos) << c.out;
    const ProcResult x = check(gguf, hf);
    EXPECT_EQ(x.status, 0) << "checker report (vs synth --format hf):\n" << x.out << x.err;
  }
}

// The mixtures of experts in llama.cpp's layouts: stacked experts [n_embd, n_ff, n_expert], the
// router ffn_gate_inp, Qwen2-MoE's shared expert (its gate a 1-D F32 vector), GPT-OSS's biases,
// sinks and post-attention norm, the expert keys. What
// llama.cpp's loaders take: Mixtral as `llama`; OLMoE with multi-head attention; Qwen MoEs with
// experts in every layer. The tiny models with what they cannot take (OLMoE's grouped-query
// attention, a Qwen MoE's dense layer) fail the checker by name, and synth says so in a note.
TEST_F(GgufConformance, MixturesOfExpertsPassWhereLlamaCppReadsThemAndFailByNameWhereNot) {
  if (!have_python()) return;
  const auto write = [&](ModelConfig c, const std::string& name) {
    const std::string out = tmp.file(name + ".gguf");
    export_checkpoint(synthesize_checkpoint(c, DType::BF16), "gguf", out);
    return out;
  };
  ModelConfig olmoe = synthetic_config("olmoe", "tiny");
  olmoe.n_kv_heads = olmoe.n_heads;
  ModelConfig q3 = synthetic_config("qwen3_moe", "tiny"), q2 = synthetic_config("qwen2_moe", "tiny");
  q3.moe.dense_layers.clear();
  q2.moe.dense_layers.clear();
  for (const auto& [cfg, arch] : {std::pair{synthetic_config("mixtral", "tiny"), "llama"}, std::pair{olmoe, "olmoe"},
                                  std::pair{q3, "qwen3moe"}, std::pair{q2, "qwen2moe"},
                                  std::pair{synthetic_config("gpt_oss", "tiny"), "gpt-oss"}}) {
    SCOPED_TRACE(arch);
    EXPECT_TRUE(gguf_llama_cpp_gaps(cfg).empty());
    const ProcResult c = check(write(cfg, arch));
    EXPECT_EQ(c.status, 0) << "checker report:\n" << c.out << c.err;
    EXPECT_NE(c.out.find("\"architecture\": \"" + std::string(arch) + "\""), std::string::npos) << c.out;
    EXPECT_EQ(c.out.find("always keeps 1-D tensors F32"), std::string::npos) << c.out;  // the shared gate too
  }
  for (const auto& [arch, tensor] : {std::pair{"olmoe", "blk.0.attn_k_norm.weight"},
                                     std::pair{"qwen3_moe", "blk.2.ffn_gate_inp.weight"},
                                     std::pair{"qwen2_moe", "blk.1.ffn_gate_inp_shexp.weight"}}) {
    SCOPED_TRACE(arch);
    const std::string out = tmp.file(std::string(arch) + "_tiny.gguf");
    const ProcResult r = run(std::string(KVPARITY_BIN) + " synth --arch " + arch + " --preset tiny --format gguf --out " + q(out));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("note: llama.cpp will not load or run this file as kvparity does"), std::string::npos) << r.err;
    const ProcResult c = check(out);
    EXPECT_NE(c.status, 0) << c.out;
    EXPECT_NE(c.out.find(tensor), std::string::npos) << c.out;
  }
}

// EXAONE 4.0 and Ministral 3 in the layouts llama.cpp's converter gives them: exaone4's OLMo-2
// names with per-head q/k norms, rows unpermuted, the window and its bool-a-layer pattern;
// mistral3's Llama tensors with q/k permuted, its temperature and YaRN keys. Each against the HF
// directory of the same weights.
TEST_F(GgufConformance, Exaone4AndMinistral3PassWithTheirHfDirectories) {
  if (!have_python()) return;
  ModelConfig m3 = synthetic_config("mistral", "tiny");
  m3.sliding_window = 0;
  m3.rope_scaling = ModelConfig::RopeScaling::Yarn;
  m3.rope_factor = 16.0f;
  m3.rope_original_max_pos = 64;
  m3.rope_attention_factor = 1.0;
  m3.query_temperature_beta = 0.1f;
  m3.query_temperature_context = 64;
  for (const auto& [cfg, arch] : {std::pair{synthetic_config("exaone4", "tiny"), "exaone4"}, std::pair{m3, "mistral3"}}) {
    SCOPED_TRACE(arch);
    const Checkpoint ck = synthesize_checkpoint(cfg, DType::BF16);
    const std::string gguf = tmp.file(std::string(arch) + ".gguf"), hf = tmp.file(std::string(arch) + "_hf");
    export_checkpoint(ck, "gguf", gguf);
    export_checkpoint(ck, "hf", hf);
    const ProcResult c = check(gguf, hf);
    EXPECT_EQ(c.status, 0) << "checker report:\n" << c.out << c.err;
    EXPECT_NE(c.out.find("\"architecture\": \"" + std::string(arch) + "\""), std::string::npos) << c.out;
    EXPECT_EQ(c.out.find("is not one llama.cpp reads"), std::string::npos) << c.out;  // every key one it reads
  }
}

TEST_F(GgufConformance, ConvertStories260KPasses) {
  if (!have_python()) return;
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  KVP_REQUIRE_SHARED(hf, "models/stories260K/hf");
  const std::string out = tmp.file("stories.gguf");
  const ProcResult r = run(std::string(KVPARITY_BIN) + " convert --model " + q(model) + " --tokenizer " + q(tok) +
                    " --to gguf --out " + q(out));
  ASSERT_EQ(r.status, 0) << r.out << r.err;

  const ProcResult c = check(out);
  EXPECT_EQ(c.status, 0) << "checker report:\n" << c.out << c.err;
  EXPECT_NE(c.out.find("\"n_tokens\": 512"), std::string::npos) << c.out;
  // shared/models/stories260K/hf was converted independently of kvparity (see PROVENANCE.md).
  const ProcResult x = check(out, hf);
  EXPECT_EQ(x.status, 0) << "checker report (vs shared HF checkpoint):\n" << x.out << x.err;
}

// Quantised files: the checker sizes every block type from ggml's block structs (not from
// kvparity's tables) and requires general.quantization_version once blocks are present.
TEST_F(GgufConformance, QuantisedConvertPasses) {
  if (!have_python()) return;
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  for (const char* quant : {"Q8_0", "Q4_0", "Q5_1", "Q4_K_M", "IQ4_XS", "MXFP4", "MXFP4_MOE"}) {
    const std::string out = tmp.file(std::string(quant) + ".gguf");
    const ProcResult r = run(std::string(KVPARITY_BIN) + " convert --model " + q(model) + " --tokenizer " + q(tok) +
                             " --to gguf --quant " + quant + " --out " + q(out));
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    const ProcResult c = check(out);
    EXPECT_EQ(c.status, 0) << quant << " checker report:\n" << c.out << c.err;
  }
}

// MXFP4: a mixture in the MXFP4_MOE mix passes; the checker's own decoder (gguf_format.py, from the
// OCP MX spec) gives kvparity's dequantised values bit for bit, on a quantised matrix and on one
// overwritten with every exponent byte (subnormal and infinite weights included), and it refuses
// the infinite weights no quantiser of finite weights writes.
TEST_F(GgufConformance, Mxfp4FilesPassAndTheIndependentDecoderAgreesBitwise) {
  if (!have_python()) return;
  ExportOptions eo;
  eo.quant = "MXFP4_MOE";
  const std::string moe = tmp.file("mixtral.gguf");
  export_checkpoint(synthesize_checkpoint(synthetic_config("mixtral", "tiny"), DType::BF16), "gguf", moe, eo);
  const ProcResult c = check(moe);
  EXPECT_EQ(c.status, 0) << "checker report:\n" << c.out << c.err;

  ModelConfig cfg = synthetic_config("llama", "tiny");
  cfg.dim = 256;
  cfg.head_dim = 32;
  cfg.hidden_dim = 512;  // ffn_up: 512 rows of 8 blocks, 4096 blocks in all
  cfg.n_layers = 1;
  const std::string good = tmp.file("mxfp4.gguf");
  eo.quant = "MXFP4";
  export_checkpoint(synthesize_checkpoint(cfg, DType::F32), "gguf", good, eo);
  ASSERT_EQ(check(good).status, 0);
  // The checker's values of blk.0.ffn_up.weight against kvparity's (scalar and vectorised).
  const auto agree = [&](const std::string& file, size_t* infinities) {
    const ProcResult d =
        run(std::string(kPython) + " " + q(checker()) + " " + q(file) + " --dump-mxfp4 blk.0.ffn_up.weight");
    ASSERT_EQ(d.status, 0) << d.out << d.err;
    const nlohmann::json j = nlohmann::json::parse(d.out);
    const auto py = j.at("f32_bits").get<std::vector<uint32_t>>();
    const Checkpoint ck = open_checkpoint(file);
    const TensorView& t = ck.tensors.at("model.layers.0.mlp.up_proj.weight");
    ASSERT_EQ(t.quant, QuantType::MXFP4);
    ASSERT_EQ(py.size(), size_t(t.numel()));
    std::vector<float> ours(py.size()), fast(py.size());
    view_to_f32(t, 0, ours.size(), ours.data());
    dequantize_blocks_fast(t.quant, t.data, ours.size() / 32, fast.data());
    for (size_t i = 0; i < py.size(); ++i) {
      ASSERT_EQ(f32_bits(ours[i]), py[i]) << file << " weight " << i;
      ASSERT_EQ(f32_bits(fast[i]), py[i]) << file << " weight " << i;
      *infinities += std::isinf(ours[i]);
    }
  };
  size_t inf = 0;
  agree(good, &inf);
  EXPECT_EQ(inf, 0u);
  // Block b of the matrix gets exponent byte b % 256 and random codes.
  std::vector<uint8_t> b = read_bytes(good);
  const GgufFile g = parse_gguf(b.data(), b.size(), good);
  const auto it = std::find_if(g.tensors.begin(), g.tensors.end(),
                               [](const GgufTensorInfo& t) { return t.name == "blk.0.ffn_up.weight"; });
  ASSERT_NE(it, g.tensors.end());
  ASSERT_EQ(it->type, 39u);
  uint8_t* data = b.data() + g.data_offset + it->offset;
  uint32_t rng = 12345;
  for (size_t blk = 0; blk < 4096; ++blk) {
    data[17 * blk] = uint8_t(blk % 256);
    for (size_t k = 1; k < 17; ++k) data[17 * blk + k] = uint8_t((rng = rng * 1664525u + 1013904223u) >> 24);
  }
  const std::string every = tmp.file("every_exponent.gguf");
  write_bytes(every, b);
  agree(every, &inf);
  EXPECT_GT(inf, 0u);
  const ProcResult bad = check(every);
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("decodes to an infinite weight"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("blk.0.ffn_up.weight"), std::string::npos) << bad.out;
}

TEST_F(GgufConformance, CheckerRejectsBrokenFiles) {
  if (!have_python()) return;
  const std::string good = synth_gguf();
  ASSERT_FALSE(good.empty());
  const std::vector<uint8_t> orig = read_bytes(good);
  ASSERT_GT(orig.size(), 1024u);
  ASSERT_EQ(check(good).status, 0) << "the unmodified file must pass for the negative cases to mean anything";

  auto expect_rejected = [&](const std::string& what, const std::vector<uint8_t>& bytes, const std::string& needle) {
    const std::string p = tmp.file("broken.gguf");
    write_bytes(p, bytes);
    const ProcResult c = check(p);
    EXPECT_EQ(c.status, 1) << what << ": checker should exit 1\n" << c.out << c.err;
    EXPECT_NE(c.out.find(needle), std::string::npos) << what << ": report should mention '" << needle << "'\n" << c.out;
  };

  {  // A tensor renamed to something llama.cpp does not know (same length, so the layout stays valid).
    std::vector<uint8_t> b = orig;
    const size_t at = find_gguf_string(b, "blk.0.attn_q.weight");
    ASSERT_NE(at, 0u);
    b[at - std::strlen("q.weight")] = 'x';  // blk.0.attn_x.weight
    expect_rejected("renamed tensor", b, "blk.0.attn_x.weight");
  }
  {  // A tensor offset moved off the alignment grid: the data section no longer lines up.
    std::vector<uint8_t> b = orig;
    const size_t at = find_gguf_string(b, "blk.0.attn_k.weight");
    ASSERT_NE(at, 0u);
    uint32_t nd;
    std::memcpy(&nd, &b[at], 4);
    ASSERT_TRUE(nd >= 1 && nd <= 4);
    const size_t off_at = at + 4 + 8 * nd + 4;
    uint64_t off;
    std::memcpy(&off, &b[off_at], 8);
    off += 8;
    std::memcpy(&b[off_at], &off, 8);
    expect_rejected("misaligned tensor offset", b, "not a multiple of ALIGNMENT");
  }
  {  // general.alignment that is not a power of two.
    std::vector<uint8_t> b = orig;
    const size_t at = find_gguf_string(b, "general.alignment");
    ASSERT_NE(at, 0u);
    uint32_t type, val;
    std::memcpy(&type, &b[at], 4);
    std::memcpy(&val, &b[at + 4], 4);
    ASSERT_EQ(type, 4u);  // u32
    ASSERT_EQ(val, 4096u);  // the writer page-aligns tensors (model_writer.cpp)
    val = 48;
    std::memcpy(&b[at + 4], &val, 4);
    expect_rejected("alignment 48", b, "general.alignment");
  }
  {  // llama.context_length stored as i32: llama.cpp's strict key typing refuses it.
    std::vector<uint8_t> b = orig;
    const size_t at = find_gguf_string(b, "llama.context_length");
    ASSERT_NE(at, 0u);
    uint32_t type;
    std::memcpy(&type, &b[at], 4);
    ASSERT_EQ(type, 4u);
    type = 5;  // i32, same width
    std::memcpy(&b[at], &type, 4);
    expect_rejected("context_length as i32", b, "llama.context_length");
  }
  {  // Truncated data section.
    std::vector<uint8_t> b(orig.begin(), orig.begin() + long(orig.size() / 2));
    expect_rejected("truncated file", b, "past the end");
  }
  {  // Bad magic.
    std::vector<uint8_t> b = orig;
    b[0] = 'X';
    expect_rejected("bad magic", b, "magic");
  }
  {  // Same shapes, different weights: the HF cross-check must notice.
    const std::string hf = tmp.file("other_hf");
    const ProcResult s = run(std::string(KVPARITY_BIN) +
                      " synth --arch llama --preset tiny --dtype fp16 --format hf --seed 12345 --out " + q(hf));
    ASSERT_EQ(s.status, 0) << s.out << s.err;
    const ProcResult c = check(good, hf);
    EXPECT_EQ(c.status, 1) << "different weights must fail the HF cross-check\n" << c.out << c.err;
    EXPECT_NE(c.out.find("differs from HF"), std::string::npos) << c.out;
  }
}

}  // namespace
}  // namespace kvp
