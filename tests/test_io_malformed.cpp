// Hostile and broken model files: every one must give a kvp::Error naming the file (and the
// tensor or key at fault), never a crash or an out-of-bounds read (run under ASan/UBSan).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "checking_build.h"
#include "io/checkpoint.h"
#include "io/gguf.h"
#include "io/hf_config.h"
#include "io/llama2c.h"
#include "io/model_writer.h"
#include "io/safetensors.h"
#include "test_io_util.h"
#include "test_util.h"

namespace kvp {
namespace {

using test::expect_error;
using test::read_bytes;
using test::write_bytes;
using test::write_text;

// A tiny but complete Llama model, so byte-level mutation tests stay fast.
struct TinyModel {
  ModelConfig cfg;
  std::vector<std::vector<float>> bufs;
  std::vector<TensorView> tensors;
  VocabSpec vocab;

  TinyModel() {
    cfg.arch = Arch::Llama;
    cfg.dim = 8;
    cfg.hidden_dim = 16;
    cfg.n_layers = 1;
    cfg.n_heads = 2;
    cfg.n_kv_heads = 1;
    cfg.head_dim = 4;
    cfg.vocab_size = 16;
    cfg.max_seq_len = 32;
    cfg.source = "tiny";
    auto add = [&](const std::string& n, std::vector<int64_t> shape) {
      int64_t k = 1;
      for (auto d : shape) k *= d;
      bufs.emplace_back(size_t(k));
      for (int64_t i = 0; i < k; ++i) bufs.back()[size_t(i)] = float(i % 7) * 0.25f - float(bufs.size());
      tensors.push_back({n, DType::F32, shape, bufs.back().data()});
    };
    bufs.reserve(16);
    add("model.embed_tokens.weight", {16, 8});
    add("model.layers.0.input_layernorm.weight", {8});
    add("model.layers.0.self_attn.q_proj.weight", {8, 8});
    add("model.layers.0.self_attn.k_proj.weight", {4, 8});
    add("model.layers.0.self_attn.v_proj.weight", {4, 8});
    add("model.layers.0.self_attn.o_proj.weight", {8, 8});
    add("model.layers.0.post_attention_layernorm.weight", {8});
    add("model.layers.0.mlp.gate_proj.weight", {16, 8});
    add("model.layers.0.mlp.up_proj.weight", {16, 8});
    add("model.layers.0.mlp.down_proj.weight", {8, 16});
    add("model.norm.weight", {8});
    cfg.tied_embeddings = true;
    vocab.model = "gpt2";
    for (int i = 0; i < 16; ++i) vocab.tokens.push_back("t" + std::to_string(i));
    vocab.merges = {"t 1"};
    vocab.bos_id = 1;
    vocab.eos_id = 2;
  }
};

// Builds GGUF byte streams by hand, including invalid ones.
struct GgufBytes {
  std::vector<uint8_t> b;
  template <typename T>
  GgufBytes& pod(T v) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }
  GgufBytes& str(const std::string& s) {
    pod<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  GgufBytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    return pod<uint32_t>(version).pod<uint64_t>(n_tensors).pod<uint64_t>(n_kv);
  }
  GgufBytes& kv_str(const std::string& k, const std::string& v) { return str(k).pod<uint32_t>(8).str(v); }
  GgufBytes& kv_u32(const std::string& k, uint32_t v) { return str(k).pod<uint32_t>(4).pod<uint32_t>(v); }
  GgufBytes& pad(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
};

std::string save(const test::TempDir& d, const std::string& name, const std::vector<uint8_t>& bytes) {
  std::string p = d.file(name);
  write_bytes(p, bytes);
  return p;
}

// --- llama2.c ---------------------------------------------------------------------------------

TEST(IoMalformed, Llama2cTruncatedAndOversized) {
  KVP_REQUIRE_SHARED(p, "models/stories260K/stories260K.bin");
  auto bytes = read_bytes(p);
  test::TempDir d;
  auto cut = bytes;
  cut.resize(cut.size() - 4);
  std::string f = save(d, "cut.bin", cut);
  expect_error([&] { open_checkpoint(f); }, {f, "1056540", "1056536"});
  auto big = bytes;
  big.push_back(0);
  f = save(d, "big.bin", big);
  expect_error([&] { open_checkpoint(f); }, {f, "1056540", "1056541"});
  // Header only.
  f = save(d, "hdr.bin", std::vector<uint8_t>(bytes.begin(), bytes.begin() + 28));
  expect_error([&] { open_checkpoint(f); }, {f, "size mismatch"});
}

TEST(IoMalformed, UnknownFormat) {
  test::TempDir d;
  std::string f = save(d, "junk.bin", std::vector<uint8_t>(100, 0xAB));
  expect_error([&] { open_checkpoint(f); }, {f, "llama2.c"});
  f = save(d, "tiny.bin", {'x', 'y'});
  expect_error([&] { open_checkpoint(f); }, {f, "not a recognised model file"});
  f = save(d, "empty.bin", {});
  expect_error([&] { open_checkpoint(f); }, {f});
  expect_error([&] { open_checkpoint(d.file("missing.gguf")); }, {d.file("missing.gguf"), "no such file"});
  // Absurd header values must be refused before any size arithmetic.
  std::vector<int32_t> h = {1 << 30, 1 << 30, 1 << 30, 1, 1, -(1 << 30), 1 << 30};
  std::vector<uint8_t> hb(28);
  std::memcpy(hb.data(), h.data(), 28);
  f = save(d, "absurd.bin", hb);
  expect_error([&] { open_checkpoint(f); }, {f, "invalid config"});
}

// --- safetensors ------------------------------------------------------------------------------

std::vector<uint8_t> st_bytes(std::string header_json, size_t data_bytes) {
  std::vector<uint8_t> b(8);
  header_json.append((8 - header_json.size() % 8) % 8, ' ');  // so data starts 8-aligned
  uint64_t n = header_json.size();
  std::memcpy(b.data(), &n, 8);
  b.insert(b.end(), header_json.begin(), header_json.end());
  b.resize(b.size() + data_bytes, 0);
  return b;
}

TEST(IoMalformed, Safetensors) {
  test::TempDir d;
  struct Case {
    std::string header;
    size_t data;
    std::vector<std::string> want;
  };
  const Case cases[] = {
      {R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", 8, {"'w'", "outside the data section"}},
      {R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", 16, {"'w'", "needs 16"}},
      {R"({"w":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}})", 4, {"'w'", "I8"}},
      {R"({"w":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})", 4, {"'w'", "F8_E4M3"}},
      {R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4, {"'w'", "non-negative"}},
      {R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})", 4, {"'w'", "larger"}},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8, {"'w'", "outside"}},
      {R"({"w":{"dtype":"F32","shape":[1]}})", 8, {"'w'", "data_offsets"}},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})", 8, {"'w'", "aligned"}},
      {R"({"w":{"dtype":"F32")", 8, {"invalid safetensors JSON"}},
      {R"([1,2,3])", 8, {"not a JSON object"}},
  };
  int i = 0;
  for (const auto& c : cases) {
    std::string f = save(d, "c" + std::to_string(i++) + ".safetensors", st_bytes(c.header, c.data));
    SCOPED_TRACE(c.header);
    std::vector<std::string> want = c.want;
    want.push_back(f);
    auto bytes = read_bytes(f);
    try {
      parse_safetensors(bytes.data(), bytes.size(), f);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      for (const auto& w : want) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
    }
  }
  // Header length larger than the file: through open_checkpoint, as a user would meet it.
  auto b = st_bytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
  uint64_t n = 4096;
  std::memcpy(b.data(), &n, 8);
  std::string f = save(d, "long.safetensors", b);
  expect_error([&] { open_checkpoint(f); }, {f, "header length 4096"});
  // No config.json beside a valid file.
  f = save(d, "ok.safetensors", st_bytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4));
  expect_error([&] { open_checkpoint(f); }, {f, "config.json"});
}

// --- HF directories and config.json ----------------------------------------------------------

const char* kLlamaConfig = R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":8,
  "intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":1,"vocab_size":16,
  "max_position_embeddings":32,"rms_norm_eps":1e-5,"tie_word_embeddings":true})";

std::string with(const std::string& base, const std::string& extra) {
  return base.substr(0, base.size() - 1) + "," + extra + "}";
}

TEST(IoMalformed, HfConfig) {
  test::TempDir d;
  const std::string f = d.file("config.json");
  auto check = [&](const std::string& text, std::initializer_list<std::string> want) {
    SCOPED_TRACE(text);
    write_text(f, text);
    std::vector<std::string> w(want);
    try {
      read_hf_config(f);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
      for (const auto& x : w) EXPECT_NE(std::string(e.what()).find(x), std::string::npos) << e.what();
    }
  };
  write_text(f, kLlamaConfig);
  ModelConfig ok = read_hf_config(f);
  EXPECT_EQ(ok.head_dim, 4);
  EXPECT_EQ(ok.norm_eps, 1e-5f);

  std::string gptneox = kLlamaConfig;
  gptneox.replace(gptneox.find("\"llama\""), 7, "\"gpt_neox\"");
  check(gptneox, {"unsupported architecture 'gpt_neox'", "(model_type)"});
  check(R"({"architectures":["PhiMoEForCausalLM"],"hidden_size":8})", {"'PhiMoEForCausalLM'", "(architectures)"});
  // A known class by name alone is read as its family; what it lacks is named.
  check(R"({"architectures":["MixtralForCausalLM"],"hidden_size":8})", {"missing required field 'intermediate_size'"});
  check(R"({"hidden_size":8})", {"model_type"});
  std::string no_hidden = kLlamaConfig;
  no_hidden.replace(no_hidden.find("\"hidden_size\":8,"), 16, "");
  check(no_hidden, {"'hidden_size'"});
  // "linear", "llama3" and "yarn" are implemented (tests/test_families.cpp, tests/test_yarn.cpp);
  // other types are refused.
  check(with(kLlamaConfig, R"("rope_scaling":{"type":"dynamic","factor":2.0})"),
        {"rope_scaling type 'dynamic' is not supported (config.json field rope_scaling)"});
  check(with(kLlamaConfig, R"("rope_scaling":{"rope_type":"yarn","factor":8.0,"truncate":"yes"})"),
        {"truncate", "rope_scaling.truncate"});
  check(with(kLlamaConfig, R"("rope_scaling":{"rope_type":"llama3","factor":8.0})"),
        {"'llama3'", "low_freq_factor", "rope_scaling"});
  check(with(kLlamaConfig, R"("num_local_experts":8)"), {"num_local_experts"});
  check(with(kLlamaConfig, R"("hidden_act":"gelu")"), {"hidden_act", "gelu"});
  check(with(kLlamaConfig, R"("attention_bias":true)"), {"attention_bias"});
  check(with(kLlamaConfig, R"("mlp_bias":true)"), {"mlp_bias"});
  check(with(kLlamaConfig, R"("quantization_config":{"bits":4})"), {"quantization_config"});
  check(with(kLlamaConfig, R"("vocab_size":"big")"), {"vocab_size"});
  check(with(kLlamaConfig, R"("num_key_value_heads":3)"), {"key/value heads"});
  check(with(kLlamaConfig, R"("hidden_size":99999999999)"), {"hidden_size", "out of range"});
  check("{not json", {"invalid JSON"});
  check("[]", {"JSON object"});
  std::string qwen = kLlamaConfig;
  qwen.replace(qwen.find("\"llama\""), 7, "\"qwen2\"");
  check(with(qwen, R"("use_sliding_window":true,"sliding_window":4,"max_window_layers":1,"num_hidden_layers":2)"),
        {"max_window_layers"});
  // The accepted qwen2 window forms.
  write_text(f, with(qwen, R"("use_sliding_window":true,"sliding_window":4,"max_window_layers":0)"));
  EXPECT_EQ(read_hf_config(f).sliding_window, 4);
  write_text(f, with(qwen, R"("use_sliding_window":false,"sliding_window":4)"));
  EXPECT_EQ(read_hf_config(f).sliding_window, 0);
  // eos as a list: the first entry.
  write_text(f, with(kLlamaConfig, R"("eos_token_id":[3,7])"));
  EXPECT_EQ(read_hf_config(f).eos_id, 3);
}

TEST(IoMalformed, HfDirectory) {
  TinyModel m;
  test::TempDir d;
  expect_error([&] { open_checkpoint(d.path()); }, {d.path(), "config.json"});
  write_text(d.file("config.json"), kLlamaConfig);
  expect_error([&] { open_checkpoint(d.path()); }, {d.path(), "model.safetensors"});
  write_safetensors(d.file("a.safetensors"), {m.tensors[0]});
  auto index = [&](const std::string& wm) {
    write_text(d.file("model.safetensors.index.json"), R"({"metadata":{},"weight_map":)" + wm + "}");
  };
  index(R"({"model.embed_tokens.weight":"a.safetensors","model.norm.weight":"b.safetensors"})");
  expect_error([&] { open_checkpoint(d.path()); }, {"b.safetensors", "model.norm.weight", "missing"});
  index(R"({"model.embed_tokens.weight":"a.safetensors","model.norm.weight":"a.safetensors"})");
  expect_error([&] { open_checkpoint(d.path()); }, {"a.safetensors", "model.norm.weight", "not in that shard"});
  index(R"({"model.norm.weight":"../../etc/passwd"})");
  expect_error([&] { open_checkpoint(d.path()); }, {"model.safetensors.index.json", "plain file name"});
  index(R"({"model.norm.weight":7})");
  expect_error([&] { open_checkpoint(d.path()); }, {"model.safetensors.index.json", "model.norm.weight"});
  write_text(d.file("model.safetensors.index.json"), "{");
  expect_error([&] { open_checkpoint(d.path()); }, {"model.safetensors.index.json", "invalid JSON"});
}

// --- GGUF -------------------------------------------------------------------------------------

TEST(IoMalformed, GgufHeaders) {
  test::TempDir d;
  auto check = [&](const std::string& name, const std::vector<uint8_t>& b, std::initializer_list<std::string> want) {
    SCOPED_TRACE(name);
    std::string f = save(d, name, b);
    std::vector<std::string> w(want);
    w.push_back(f);
    try {
      open_checkpoint(f);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      for (const auto& x : w) EXPECT_NE(std::string(e.what()).find(x), std::string::npos) << e.what();
    }
  };
  check("v1.gguf", GgufBytes().header(0, 0, 1).b, {"version 1"});
  check("v9.gguf", GgufBytes().header(0, 0, 9).b, {"version 9"});
  check("many_tensors.gguf", GgufBytes().header(uint64_t(1) << 60, 0).pad(64).b, {"1152921504606846976 tensors"});
  check("many_kv.gguf", GgufBytes().header(0, uint64_t(1) << 60).pad(64).b, {"metadata entries"});
  check("long_key.gguf", GgufBytes().header(0, 1).pod<uint64_t>(uint64_t(1) << 40).pad(16).b, {"string length"});
  check("long_str.gguf", GgufBytes().header(0, 1).str("general.name").pod<uint32_t>(8).pod<uint64_t>(uint64_t(1) << 40).pad(8).b,
        {"general.name", "string length 1099511627776"});
  check("long_arr.gguf",
        GgufBytes().header(0, 1).str("tokenizer.ggml.tokens").pod<uint32_t>(9).pod<uint32_t>(8).pod<uint64_t>(uint64_t(1) << 60).pad(8).b,
        {"tokenizer.ggml.tokens", "cannot fit"});
  check("bad_type.gguf", GgufBytes().header(0, 1).str("k").pod<uint32_t>(13).pad(8).b, {"'k'", "unknown value type 13"});
  check("bad_elem.gguf", GgufBytes().header(0, 1).str("k").pod<uint32_t>(9).pod<uint32_t>(99).pod<uint64_t>(1).pad(8).b,
        {"'k'", "element type 99"});
  {
    GgufBytes g;
    g.header(0, 1).str("deep").pod<uint32_t>(9);
    for (int i = 0; i < 20; ++i) g.pod<uint32_t>(9).pod<uint64_t>(1);
    g.pad(64);
    check("deep.gguf", g.b, {"'deep'", "nested deeper"});
  }
  check("bool.gguf", GgufBytes().header(0, 1).str("k").pod<uint32_t>(7).pod<uint8_t>(5).pad(8).b, {"'k'", "bool"});
  check("dupkey.gguf", GgufBytes().header(0, 2).kv_u32("a", 1).kv_u32("a", 2).pad(8).b, {"duplicate", "'a'"});
  check("align.gguf", GgufBytes().header(0, 1).kv_u32("general.alignment", 3).pad(8).b, {"general.alignment"});
  check("trunc_kv.gguf", GgufBytes().header(0, 1).str("general.architecture").pod<uint32_t>(8).pod<uint64_t>(5).b,
        {"string length"});
  // Tensor infos.
  auto tensor = [](uint32_t nd, std::vector<uint64_t> ne, uint32_t type, uint64_t off) {
    GgufBytes g;
    g.header(1, 1).kv_str("general.architecture", "llama").str("token_embd.weight").pod<uint32_t>(nd);
    for (auto x : ne) g.pod<uint64_t>(x);
    g.pod<uint32_t>(type).pod<uint64_t>(off);
    g.pad((32 - g.b.size() % 32) % 32).pad(64);
    return g.b;
  };
  // Quantised types read (core/quant.h) still need whole blocks per row and their bytes present;
  // the types not read are refused by name.
  check("q4.gguf", tensor(2, {8, 2}, 2, 0), {"'token_embd.weight'", "Q4_0", "blocks"});
  check("q4k.gguf", tensor(2, {256, 2}, 12, 0), {"'token_embd.weight'", "outside the data section"});
  // MXFP4 (17-byte blocks of 32): rows of 48 values, and 8 blocks (136 bytes) where 64 are left.
  check("mxfp4_rows.gguf", tensor(2, {48, 2}, 39, 0), {"'token_embd.weight'", "MXFP4", "32-value blocks"});
  check("mxfp4_short.gguf", tensor(2, {64, 4}, 39, 0), {"'token_embd.weight'", "outside the data section"});
  check("iq2.gguf", tensor(2, {256, 2}, 16, 0), {"'token_embd.weight'", "IQ2_XXS", "not supported"});
  check("q8k.gguf", tensor(2, {256, 2}, 15, 0), {"'token_embd.weight'", "Q8_K", "not supported"});
  check("tq1.gguf", tensor(2, {256, 2}, 34, 0), {"'token_embd.weight'", "TQ1_0", "not supported"});
  check("type99.gguf", tensor(2, {8, 2}, 99, 0), {"'token_embd.weight'", "type 99"});
  check("ndims.gguf", tensor(5, {1, 1, 1, 1, 1}, 0, 0), {"'token_embd.weight'", "5 dimensions"});
  check("zerodim.gguf", tensor(2, {0, 4}, 0, 0), {"'token_embd.weight'", "zero"});
  check("hugedim.gguf", tensor(2, {uint64_t(1) << 62, uint64_t(1) << 62}, 0, 0), {"'token_embd.weight'"});
  check("outside.gguf", tensor(2, {8, 4}, 0, 0), {"'token_embd.weight'", "outside the data section"});
  check("wrapoff.gguf", tensor(1, {4}, 0, ~uint64_t(31)), {"'token_embd.weight'", "outside"});
  check("misoff.gguf", tensor(1, {4}, 0, 4), {"'token_embd.weight'", "alignment"});
}

TEST(IoMalformed, GgufSemantics) {
  TinyModel m;
  test::TempDir d;
  const std::string good = d.file("good.gguf");
  write_gguf(good, m.cfg, m.tensors, &m.vocab);
  Checkpoint ck = open_checkpoint(good);
  EXPECT_EQ(ck.config.vocab_size, 16);
  EXPECT_EQ(ck.vocab->model, "gpt2");
  EXPECT_EQ(ck.vocab->add_space_prefix, m.vocab.add_space_prefix);

  auto write_with = [&](const std::string& name, std::map<std::string, GgufValue> kv, bool with_vocab = true) {
    GgufWriteOptions o;
    o.extra_kv = std::move(kv);
    std::string p = d.file(name);
    write_gguf(p, m.cfg, m.tensors, with_vocab ? &m.vocab : nullptr, o);
    return p;
  };
  std::string f = write_with("arch.gguf", {{"general.architecture", GgufValue::of_str("gptneox")}});
  expect_error([&] { open_checkpoint(f); }, {"unsupported architecture 'gptneox'", f, "general.architecture"});
  f = write_with("rope.gguf", {{"llama.rope.scaling.type", GgufValue::of_str("yarn")}});
  expect_error([&] { open_checkpoint(f); }, {f, "YaRN", "rope.scaling.type", "Hugging Face checkpoint"});
  f = write_with("linear.gguf", {{"llama.rope.scaling.type", GgufValue::of_str("linear")}});
  expect_error([&] { open_checkpoint(f); }, {f, "rope.scaling.factor"});
  f = write_with("none.gguf", {{"llama.rope.scaling.type", GgufValue::of_str("none")}});
  EXPECT_NO_THROW(open_checkpoint(f));
  f = write_with("ffarr.gguf", {{"llama.feed_forward_length", GgufValue::of_array(GgufType::U32, {GgufValue::of_u32(16)})}});
  expect_error([&] { open_checkpoint(f); }, {f, "llama.feed_forward_length", "per-layer"});
  f = write_with("ctxstr.gguf", {{"llama.context_length", GgufValue::of_str("32")}});
  expect_error([&] { open_checkpoint(f); }, {f, "llama.context_length", "integer"});
  f = write_with("layers.gguf", {{"llama.block_count", GgufValue::of_u32(0)}});
  expect_error([&] { open_checkpoint(f); }, {f, "llama.block_count", "out of range"});
  // A fuzzer's find: 2^24 layers made the per-layer loops run for seconds before validation.
  f = write_with("manylayers.gguf", {{"llama.block_count", GgufValue::of_u32(1u << 24)}});
  expect_error([&] { open_checkpoint(f); }, {f, "llama.block_count", "16777216"});
  f = write_with("bosid.gguf", {{"tokenizer.ggml.bos_token_id", GgufValue::of_u32(999)}});
  expect_error([&] { open_checkpoint(f); }, {f, "999"});
  f = write_with("tokmodel.gguf", {{"tokenizer.ggml.model", GgufValue::of_str("bert")}});
  expect_error([&] { open_checkpoint(f); }, {f, "tokenizer.ggml.model", "bert"});
  f = write_with("scores.gguf", {{"tokenizer.ggml.scores", GgufValue::of_array(GgufType::F32, {GgufValue::of_f32(1)})}});
  expect_error([&] { open_checkpoint(f); }, {f, "tokenizer.ggml.scores"});
  f = write_with("noeps.gguf", {{"llama.attention.layer_norm_rms_epsilon", GgufValue::of_str("x")}});
  expect_error([&] { open_checkpoint(f); }, {f, "layer_norm_rms_epsilon"});
  f = write_with("partial.gguf", {{"llama.rope.dimension_count", GgufValue::of_u32(2)}});
  expect_error([&] { open_checkpoint(f); }, {f, "rope.dimension_count"});

  // llama.cpp writes "no such token" as 0xFFFFFFFF (its -1 stored in a u32).
  f = write_with("noneid.gguf", {{"tokenizer.ggml.padding_token_id", GgufValue::of_u32(0xFFFFFFFFu)},
                                 {"tokenizer.ggml.unknown_token_id", GgufValue::of_u32(0xFFFFFFFFu)}});
  ck = open_checkpoint(f);
  EXPECT_EQ(ck.vocab->pad_id, -1);
  EXPECT_EQ(ck.vocab->unk_id, -1);
  f = write_with("bigid.gguf", {{"tokenizer.ggml.padding_token_id", GgufValue::of_u32(0xFFFFFFFEu)}});
  expect_error([&] { open_checkpoint(f); }, {f, "padding_token_id"});
  // Keys kvparity does not know are ignored, whatever their value type.
  std::map<std::string, GgufValue> unknown;
  for (uint32_t t = 0; t <= 12; ++t) {
    GgufValue v;
    v.type = GgufType(t);
    if (v.type == GgufType::Array) v = GgufValue::of_array(GgufType::Array, {GgufValue::of_array(GgufType::I16, {})});
    if (v.type == GgufType::String) v.s = "x";
    unknown["vendor.key_of_type_" + std::to_string(t)] = v;
  }
  f = write_with("unknown.gguf", unknown);
  ck = open_checkpoint(f);
  EXPECT_EQ(ck.config.vocab_size, 16);

  // An unknown tensor name.
  auto t = m.tensors;
  t.push_back(t[1]);
  t.back().name = "model.layers.0.self_attn.rotary_emb.inv_freq";
  expect_error([&] { write_gguf(d.file("bad.gguf"), m.cfg, t, nullptr); }, {d.file("bad.gguf"), "rotary_emb"});
  EXPECT_FALSE(std::filesystem::exists(d.file("bad.gguf")));
  EXPECT_FALSE(std::filesystem::exists(d.file("bad.gguf.tmp")));
}

// Metadata arrays of numbers and bools are kept packed as the file stores them; every element
// type reads back exactly (extremes included) through GgufValue::at, and the writer rejects a
// mixed array.
TEST(IoMalformed, GgufMetadataArraysOfEveryTypeRoundTrip) {
  TinyModel m;
  test::TempDir d;
  auto u = [](GgufType t, uint64_t v) { GgufValue x; x.type = t; x.u = v; return x; };
  auto i = [](GgufType t, int64_t v) { GgufValue x; x.type = t; x.i = v; return x; };
  auto f = [](GgufType t, double v) { GgufValue x; x.type = t; x.f = v; return x; };
  auto f64_bits = [](double x) { uint64_t b; std::memcpy(&b, &x, 8); return b; };
  using T = GgufType;
  std::map<std::string, std::vector<GgufValue>> arrays{
      {"x.u8", {u(T::U8, 0), u(T::U8, 255)}},
      {"x.i8", {i(T::I8, -128), i(T::I8, 127)}},
      {"x.u16", {u(T::U16, 65535), u(T::U16, 1)}},
      {"x.i16", {i(T::I16, -32768), i(T::I16, 32767)}},
      {"x.u32", {u(T::U32, 0xFFFFFFFFu), u(T::U32, 7)}},
      {"x.i32", {i(T::I32, INT32_MIN), i(T::I32, INT32_MAX)}},
      {"x.u64", {u(T::U64, UINT64_MAX), u(T::U64, 3)}},
      {"x.i64", {i(T::I64, INT64_MIN), i(T::I64, INT64_MAX)}},
      {"x.f32", {f(T::F32, -0.0), f(T::F32, 3.5), f(T::F32, 1e-45)}},
      {"x.f64", {f(T::F64, 1e300), f(T::F64, -2.25)}},
      {"x.bool", {u(T::Bool, 1), u(T::Bool, 0), u(T::Bool, 1)}},
  };
  GgufWriteOptions o;
  for (const auto& [k, items] : arrays) o.extra_kv[k] = GgufValue::of_array(items[0].type, items);
  o.extra_kv["x.str"] = GgufValue::of_strings({"", "a", std::string(300, 'z')});
  const std::string p = d.file("arrays.gguf");
  write_gguf(p, m.cfg, m.tensors, nullptr, o);
  auto bytes = read_bytes(p);
  const GgufFile g = parse_gguf(bytes.data(), bytes.size(), p);
  for (const auto& [k, items] : arrays) {
    SCOPED_TRACE(k);
    const GgufValue& v = g.kv.at(k);
    ASSERT_EQ(v.type, GgufType::Array);
    ASSERT_EQ(v.elem, items[0].type);
    ASSERT_EQ(v.size(), items.size());
    for (size_t e = 0; e < items.size(); ++e) {
      const GgufValue got = v.at(e);
      EXPECT_EQ(got.type, items[e].type);
      EXPECT_EQ(got.u, items[e].u);
      EXPECT_EQ(got.i, items[e].i);
      EXPECT_EQ(f64_bits(got.f), f64_bits(items[e].type == T::F32 ? double(float(items[e].f)) : items[e].f));
    }
    EXPECT_THROW(v.at(items.size()), std::out_of_range);
  }
  const GgufValue& sv = g.kv.at("x.str");
  ASSERT_EQ(sv.size(), 3u);
  EXPECT_EQ(sv.at(2).s, std::string(300, 'z'));
  EXPECT_EQ(sv.strings[1], "a");

  // A bool array element other than 0/1 is refused, naming the key: turn the u8 array's element
  // type into bool in the file bytes (the key is followed by u32 Array, u32 element type).
  const std::string key = "x.u8";
  auto at = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
  ASSERT_NE(at, bytes.end());
  const size_t elem_type_at = size_t(at - bytes.begin()) + key.size() + 4;
  ASSERT_EQ(bytes[elem_type_at], uint8_t(T::U8));
  bytes[elem_type_at] = uint8_t(T::Bool);
  expect_error([&] { parse_gguf(bytes.data(), bytes.size(), p); }, {p, "x.u8", "bool value 255"});

  expect_error([&] { GgufValue::of_array(T::U32, {u(T::U32, 1), i(T::I32, 2)}); }, {"u32", "i32"});
}

TEST(IoMalformed, WriterErrorsNamePath) {
  TinyModel m;
  const std::string p = "/nonexistent-dir-kvparity/x.safetensors";
  expect_error([&] { write_safetensors(p, m.tensors); }, {p, "cannot create"});
  expect_error([&] { write_gguf("/nonexistent-dir-kvparity/x.gguf", m.cfg, m.tensors, nullptr); },
               {"/nonexistent-dir-kvparity/x.gguf"});
  expect_error([&] { write_hf_config("/nonexistent-dir-kvparity/config.json", m.cfg); },
               {"/nonexistent-dir-kvparity/config.json"});
  if (std::filesystem::exists("/dev/full")) {
    // A full disk surfaces at write or at close; either way the error names the file.
    test::TempDir d;
    std::filesystem::create_symlink("/dev/full", d.file("full.safetensors.tmp"));
    expect_error([&] { write_safetensors(d.file("full.safetensors"), m.tensors); }, {d.file("full.safetensors")});
    EXPECT_FALSE(std::filesystem::exists(d.file("full.safetensors")));
  }
}

// Every truncation and many random corruptions of small valid files: errors only, no crash.
template <typename F>
void mutate_all(const std::vector<uint8_t>& good, F&& parse) {
  for (size_t n = 0; n < good.size(); ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + long(n));
    try { parse(cut); } catch (const Error&) {}
  }
  std::mt19937 rng(1234);
  // The sanitizer build, whose fuzz stage mutates these parsers' inputs for longer, takes a third.
  const int mutations = test::kCheckingBuild ? 1000 : 3000;
  for (int iter = 0; iter < mutations; ++iter) {
    auto b = good;
    int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      size_t at = rng() % b.size();
      // Favour the header, where the structure lives.
      if (rng() % 2) at %= std::min<size_t>(b.size(), 512);
      b[at] = uint8_t(rng() % 3 == 0 ? 0xFF : rng());
    }
    try { parse(b); } catch (const Error&) {}
  }
}

TEST(IoMalformed, MutatedFilesNeverCrash) {
  TinyModel m;
  test::TempDir d;
  write_gguf(d.file("t.gguf"), m.cfg, m.tensors, &m.vocab);
  write_safetensors(d.file("t.safetensors"), m.tensors);
  mutate_all(read_bytes(d.file("t.gguf")), [](const std::vector<uint8_t>& b) {
    GgufFile g = parse_gguf(b.data(), b.size(), "mut.gguf");
    gguf_to_checkpoint(g, b.data(), b.size(), "mut.gguf");
  });
  mutate_all(read_bytes(d.file("t.safetensors")), [](const std::vector<uint8_t>& b) {
    parse_safetensors(b.data(), b.size(), "mut.safetensors");
  });
  // llama2.c: 7-int header + floats for the tiny model (dim 8, hidden 16, 1 layer, 2 heads, 1 kv, vocab 16, seq 4).
  std::vector<int32_t> h = {8, 16, 1, 2, 1, 16, 4};
  size_t floats = 16 * 8 + 8 + 64 + 2 * 32 + 64 + 8 + 3 * 128 + 8 + 4 * 4;
  std::vector<uint8_t> bin(28 + floats * 4, 0);
  std::memcpy(bin.data(), h.data(), 28);
  Checkpoint ok = parse_llama2c(bin.data(), bin.size(), "tiny.bin");
  EXPECT_EQ(ok.config.head_dim, 4);
  mutate_all(bin, [](const std::vector<uint8_t>& b) { parse_llama2c(b.data(), b.size(), "mut.bin"); });
}

}  // namespace
}  // namespace kvp
