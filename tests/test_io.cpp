// Loaders against the shared real checkpoints, and writer round trips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/dtype.h"
#include "io/checkpoint.h"
#include "io/gguf.h"
#include "io/hf_config.h"
#include "io/model_writer.h"
#include "io/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "test_io_util.h"
#include "test_util.h"

namespace kvp {
namespace {

using test::expect_same_config;
using test::same_bytes;

// PROVENANCE.md: HF q/k rows = llama2.c rows reshaped (n_heads, hs/2, 2, in), axes 1 and 2 swapped.
std::vector<float> interleaved_to_halves_ref(const TensorView& w, int n_heads) {
  const int64_t rows = w.shape[0], in = w.shape[1], hs = rows / n_heads;
  const float* src = static_cast<const float*>(w.data);
  std::vector<float> out(size_t(rows * in));
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < hs / 2; ++i)
      for (int64_t p = 0; p < 2; ++p)
        std::memcpy(&out[size_t((h * hs + p * (hs / 2) + i) * in)], src + (h * hs + 2 * i + p) * in,
                    size_t(in) * sizeof(float));
  return out;
}

void expect_llama2c_equals_hf(const Checkpoint& bin, const Checkpoint& hf) {
  ASSERT_EQ(bin.tensors.size(), hf.tensors.size());
  for (const auto& [name, t] : hf.tensors) {
    auto it = bin.tensors.find(name);
    ASSERT_NE(it, bin.tensors.end()) << name;
    const TensorView& b = it->second;
    ASSERT_EQ(b.shape, t.shape) << name;
    ASSERT_EQ(b.dtype, DType::F32);
    const bool is_q = name.find("q_proj") != std::string::npos, is_k = name.find("k_proj") != std::string::npos;
    if (is_q || is_k) {
      auto perm = interleaved_to_halves_ref(b, is_q ? bin.config.n_heads : bin.config.n_kv_heads);
      EXPECT_EQ(std::memcmp(perm.data(), t.data, t.nbytes()), 0) << name;
    } else {
      EXPECT_TRUE(same_bytes(b, t)) << name;
    }
  }
}

TEST(IoLlama2c, Stories260K) {
  KVP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  Checkpoint ck = open_checkpoint(path);
  EXPECT_EQ(ck.format, "llama2c");
  EXPECT_EQ(ck.qk_layout, RopeLayout::Interleaved);
  const ModelConfig& c = ck.config;
  EXPECT_EQ(c.arch, Arch::Llama);
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_seq_len, 512);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.norm_eps, 1e-5f);
  EXPECT_EQ(c.rope_theta, 10000.0f);
  EXPECT_EQ(c.bos_id, 1);
  EXPECT_EQ(c.eos_id, 2);
  EXPECT_EQ(ck.tensors.size(), 2u + 5u * 9u);
  EXPECT_EQ(ck.tensors.count("lm_head.weight"), 0u);
  EXPECT_EQ(ck.tensors.at("model.layers.4.self_attn.k_proj.weight").shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(ck.tensors.at("model.layers.0.mlp.down_proj.weight").shape, (std::vector<int64_t>{64, 172}));
  int64_t params = 0;
  for (const auto& [n, t] : ck.tensors) params += t.numel();
  EXPECT_EQ(params, 260032);
}

TEST(IoLlama2c, MatchesHfConversion) {
  for (const char* m : {"stories260K", "aidreams260K"}) {
    SCOPED_TRACE(m);
    KVP_REQUIRE_SHARED(bin, std::string("models/") + m + "/" + m + ".bin");
    KVP_REQUIRE_SHARED(hf, std::string("models/") + m + "/hf");
    Checkpoint a = open_checkpoint(bin), b = open_checkpoint(hf);
    EXPECT_EQ(b.format, "hf");
    EXPECT_EQ(b.qk_layout, RopeLayout::Halves);
    EXPECT_TRUE(b.tokenizer_path.empty());
    expect_same_config(a.config, b.config);
    expect_llama2c_equals_hf(a, b);
  }
  KVP_REQUIRE_SHARED(aid, "models/aidreams260K/aidreams260K.bin");
  Checkpoint a = open_checkpoint(aid);
  EXPECT_EQ(a.config.n_layers, 4);
  EXPECT_EQ(a.config.n_heads, 4);
  EXPECT_EQ(a.config.n_kv_heads, 4);
  EXPECT_EQ(a.config.head_dim, 16);
  EXPECT_EQ(a.config.max_seq_len, 128);
}

TEST(IoSafetensors, SingleFileWithConfigBeside) {
  KVP_REQUIRE_SHARED(p, "models/stories260K/hf/model.safetensors");
  Checkpoint ck = open_checkpoint(p);
  EXPECT_EQ(ck.format, "safetensors");
  EXPECT_EQ(ck.config.n_layers, 5);
  EXPECT_EQ(ck.tensors.size(), 47u);
}

TEST(IoHf, ReferenceFamilies) {
  struct Want {
    const char* dir;
    Arch arch;
    int head_dim;
    bool tied;
    float eps;
    int bos, eos, window;
    bool bias;
    size_t n_tensors;
    int layers = 4;
  };
  const Want wants[] = {
      {"llama", Arch::Llama, 16, false, 1e-5f, 1, 2, 0, false, 3 + 4 * 9},
      {"mistral", Arch::Mistral, 16, false, 1e-5f, 1, 2, 16, false, 3 + 4 * 9},
      {"gemma2", Arch::Gemma2, 32, true, 1e-6f, 2, 1, 16, false, 2 + 4 * 11},
      {"qwen2", Arch::Qwen2, 16, true, 1e-5f, -1, -1, 0, true, 2 + 4 * 12},
      {"qwen3", Arch::Qwen3, 32, true, 1e-6f, -1, -1, 0, false, 2 + 4 * 11},  // + q_norm, k_norm
      {"gemma3", Arch::Gemma3, 32, true, 1e-6f, 2, 1, 16, false, 2 + 6 * 13, 6},  // Gemma-2's + q/k norms
      {"olmo2", Arch::Olmo2, 16, false, 1e-6f, 1, 2, 0, false, 3 + 4 * 11},  // no pre-norms; post-norms, q/k norms
  };
  for (const auto& w : wants) {
    SCOPED_TRACE(w.dir);
    KVP_REQUIRE_REFERENCE(dir, w.dir);
    Checkpoint ck = open_checkpoint(dir);
    const ModelConfig& c = ck.config;
    EXPECT_EQ(c.arch, w.arch);
    EXPECT_EQ(c.dim, 64);
    EXPECT_EQ(c.hidden_dim, 160);
    EXPECT_EQ(c.n_layers, w.layers);
    EXPECT_EQ(c.n_heads, 4);
    EXPECT_EQ(c.n_kv_heads, 2);
    EXPECT_EQ(c.head_dim, w.head_dim);
    EXPECT_EQ(c.vocab_size, 512);
    EXPECT_EQ(c.max_seq_len, 512);
    EXPECT_EQ(c.rope_theta, w.arch == Arch::Gemma3 ? 1e6f : 10000.0f);  // Gemma-3's global layers'
    EXPECT_EQ(c.norm_eps, w.eps);
    if (w.arch == Arch::Gemma3) {
      EXPECT_EQ(c.rope_local_theta, 10000.0f);
      EXPECT_EQ(c.rope_scaling, ModelConfig::RopeScaling::Linear);
      EXPECT_EQ(c.rope_factor, 8.0f);
      EXPECT_EQ(c.sliding_window_period, 3);
      for (int l = 0; l < 6; ++l) EXPECT_EQ(c.window_for_layer(l), l == 2 || l == 5 ? 0 : 16) << "layer " << l;
      EXPECT_EQ(c.query_pre_attn_scalar, 24.0f);
      EXPECT_EQ(c.attn_logit_softcapping, 0.0f);
      EXPECT_EQ(c.final_logit_softcapping, 0.0f);
      EXPECT_TRUE(c.qk_norm());
    }
    EXPECT_EQ(c.tied_embeddings, w.tied);
    EXPECT_EQ(c.bos_id, w.bos);
    EXPECT_EQ(c.eos_id, w.eos);
    EXPECT_EQ(c.sliding_window, w.window);
    EXPECT_EQ(c.qkv_bias, w.bias);
    EXPECT_EQ(ck.tensors.size(), w.n_tensors);
    EXPECT_EQ(ck.tensors.count("lm_head.weight"), w.tied ? 0u : 1u);
    EXPECT_EQ(ck.tensors.at("model.layers.3.self_attn.q_proj.weight").shape,
              (std::vector<int64_t>{4 * w.head_dim, 64}));
    if (w.arch == Arch::Gemma2) {
      EXPECT_EQ(ck.extras.at("query_pre_attn_scalar"), 32.0);
      EXPECT_EQ(ck.extras.at("attn_logit_softcapping"), 50.0);
      EXPECT_EQ(ck.extras.at("final_logit_softcapping"), 30.0);
      EXPECT_FALSE(ck.norm_weights_include_one);
    } else {
      EXPECT_TRUE(ck.extras.empty());
    }
    if (w.bias) {
      EXPECT_EQ(ck.tensors.at("model.layers.0.self_attn.k_proj.bias").shape, (std::vector<int64_t>{32}));
    }
  }
}

// --- writers -------------------------------------------------------------------------------

std::vector<TensorView> as_list(const Checkpoint& ck) {
  std::vector<TensorView> v;
  for (const auto& [n, t] : ck.tensors) v.push_back(t);
  return v;
}

void expect_same_tensors(const Checkpoint& a, const Checkpoint& b) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [n, t] : a.tensors) {
    auto it = b.tensors.find(n);
    ASSERT_NE(it, b.tensors.end()) << n;
    EXPECT_TRUE(same_bytes(t, it->second)) << n;
  }
}

TEST(IoWriter, SafetensorsRoundTripMixedDtypes) {
  KVP_REQUIRE_SHARED(dir, "reference/llama");
  Checkpoint src = open_checkpoint(dir);
  // fp16 / bf16 copies of two tensors, to cover every supported dtype.
  const TensorView& e = src.tensors.at("model.embed_tokens.weight");
  std::vector<uint16_t> h(size_t(e.numel())), bf(size_t(e.numel()));
  from_f32(DType::F16, static_cast<const float*>(e.data), h.data(), h.size());
  from_f32(DType::BF16, static_cast<const float*>(e.data), bf.data(), bf.size());
  std::vector<TensorView> list = as_list(src);
  list.push_back({"extra.f16", DType::F16, e.shape, h.data()});
  list.push_back({"extra.bf16", DType::BF16, e.shape, bf.data()});
  list.push_back({"extra.scalar", DType::F32, {}, e.data});
  test::TempDir tmp;
  const std::string p = tmp.file("model.safetensors");
  write_safetensors(p, list, {{"format", "pt"}, {"note", "x"}});
  EXPECT_FALSE(std::filesystem::exists(p + ".tmp"));
  auto bytes = test::read_bytes(p);
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  std::map<std::string, std::string> meta;
  auto back = parse_safetensors(bytes.data(), bytes.size(), p, &meta);
  EXPECT_EQ(meta.at("note"), "x");
  ASSERT_EQ(back.size(), list.size());
  for (const auto& t : list) {
    auto it = std::find_if(back.begin(), back.end(), [&](const TensorView& b) { return b.name == t.name; });
    ASSERT_NE(it, back.end()) << t.name;
    EXPECT_TRUE(same_bytes(t, *it)) << t.name;
  }
}

TEST(IoWriter, HfConfigRoundTrip) {
  for (const char* fam : {"llama", "mistral", "gemma2", "qwen2", "qwen3", "gemma3", "olmo2"}) {
    SCOPED_TRACE(fam);
    KVP_REQUIRE_REFERENCE(ref, fam);
    const std::string cfgp = ref + "/config.json";
    std::map<std::string, double> ex;
    ModelConfig c = read_hf_config(cfgp, &ex);
    test::TempDir tmp;
    write_hf_config(tmp.file("config.json"), c, "bfloat16", ex);
    std::map<std::string, double> ex2;
    ModelConfig d = read_hf_config(tmp.file("config.json"), &ex2);
    expect_same_config(c, d);
    EXPECT_EQ(ex, ex2);
    std::string txt;
    { auto b = test::read_bytes(tmp.file("config.json")); txt.assign(b.begin(), b.end()); }
    EXPECT_NE(txt.find("\"torch_dtype\": \"bfloat16\""), std::string::npos);
    EXPECT_NE(txt.find("\"rms_norm_eps\": 1e-0"), std::string::npos) << txt;
  }
}

TEST(IoWriter, ShardedHfDirectory) {
  KVP_REQUIRE_SHARED(dir, "reference/llama");
  Checkpoint src = open_checkpoint(dir);
  test::TempDir tmp;
  std::vector<TensorView> a, b;
  std::map<std::string, std::string> wm;
  uint64_t total = 0;
  for (const auto& [n, t] : src.tensors) {
    bool first = n.find("layers.0.") != std::string::npos || n.find("layers.1.") != std::string::npos ||
                 n.find("embed") != std::string::npos;
    (first ? a : b).push_back(t);
    wm[n] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    total += t.nbytes();
  }
  write_safetensors(tmp.file("model-00001-of-00002.safetensors"), a);
  write_safetensors(tmp.file("model-00002-of-00002.safetensors"), b);
  write_safetensors_index(tmp.file("model.safetensors.index.json"), wm, total);
  std::filesystem::copy_file(dir + "/config.json", tmp.file("config.json"));
  test::write_text(tmp.file("tokenizer.json"), "{}");
  Checkpoint back = open_checkpoint(tmp.path());
  EXPECT_EQ(back.format, "hf");
  EXPECT_EQ(back.tokenizer_path, tmp.file("tokenizer.json"));
  EXPECT_EQ(back.keepalive.size(), 2u);  // each shard mapped once
  EXPECT_EQ(back.files, (std::vector<std::string>{tmp.file("model-00001-of-00002.safetensors"),
                                                  tmp.file("model-00002-of-00002.safetensors")}));
  expect_same_config(src.config, back.config);
  expect_same_tensors(src, back);
}

VocabSpec small_vocab(int n) {
  VocabSpec v;
  v.model = "llama";
  v.pre = "default";
  for (int i = 0; i < n; ++i) {
    v.tokens.push_back(i < 3 ? std::vector<std::string>{"<unk>", "<s>", "</s>"}[size_t(i)]
                             : "\xe2\x96\x81tok" + std::to_string(i));
    v.scores.push_back(-float(i) * 0.5f);
    v.token_types.push_back(i < 3 ? (i == 0 ? 2 : 3) : 1);
  }
  v.merges = {"a b", "\xc4\xa0 t"};
  v.bos_id = 1;
  v.eos_id = 2;
  v.unk_id = 0;
  v.pad_id = -1;
  v.add_bos = true;
  v.add_space_prefix = false;
  return v;
}

void expect_same_vocab(const VocabSpec& a, const VocabSpec& b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.pre, b.pre);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.scores, b.scores);
  EXPECT_EQ(a.token_types, b.token_types);
  EXPECT_EQ(a.merges, b.merges);
  EXPECT_EQ(a.bos_id, b.bos_id);
  EXPECT_EQ(a.eos_id, b.eos_id);
  EXPECT_EQ(a.unk_id, b.unk_id);
  EXPECT_EQ(a.pad_id, b.pad_id);
  EXPECT_EQ(a.add_bos, b.add_bos);
  EXPECT_EQ(a.add_space_prefix, b.add_space_prefix);
}

// A GGUF carries one token per embedding row (llama.cpp takes the token count for the vocabulary
// size): a shorter tokenizer is padded with unused "[PAD<id>]" tokens, as llama.cpp's converter
// pads Qwen2.5's; a longer one is not this model's, and nothing is written.
TEST(IoWriter, GgufVocabularyHasOneTokenPerEmbeddingRow) {
  KVP_REQUIRE_SHARED(p, "reference/qwen2");
  Checkpoint src = open_checkpoint(p);
  const int rows = src.config.vocab_size;
  test::TempDir tmp;
  VocabSpec short_v = small_vocab(rows - 5);
  write_gguf(tmp.file("short.gguf"), src.config, as_list(src), &short_v);
  Checkpoint back = open_checkpoint(tmp.file("short.gguf"));
  ASSERT_TRUE(back.vocab.has_value());
  ASSERT_EQ(back.vocab->tokens.size(), size_t(rows));
  for (int id = 0; id < rows; ++id) {
    const bool pad = id >= rows - 5;
    SCOPED_TRACE(id);
    EXPECT_EQ(back.vocab->tokens[size_t(id)], pad ? "[PAD" + std::to_string(id) + "]" : short_v.tokens[size_t(id)]);
    EXPECT_EQ(back.vocab->scores[size_t(id)], pad ? -1000.0f : short_v.scores[size_t(id)]);
    EXPECT_EQ(back.vocab->token_types[size_t(id)], pad ? int32_t(TokenType::Unused) : short_v.token_types[size_t(id)]);
  }
  expect_same_tensors(src, back);
  // The padding tokens are never produced from text, and decode to their own spelling.
  const auto tok = tokenizer_from_vocab(*back.vocab);
  for (int id : tok->encode("tok7 tok9", false)) EXPECT_LT(id, rows - 5);
  EXPECT_EQ(tok->vocab_size(), rows);

  VocabSpec long_v = small_vocab(rows + 1);
  const std::string out = tmp.file("long.gguf");
  try {
    write_gguf(out, src.config, as_list(src), &long_v);
    ADD_FAILURE() << "a tokenizer longer than the embedding was written";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(rows + 1) + " tokens, more than the model's " +
                                         std::to_string(rows) + " embedding rows"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
}

TEST(IoWriter, GgufRoundTripAllFamilies) {
  struct Src {
    const char* rel;
    RopeLayout layout;
  };
  for (const Src& s : {Src{"models/stories260K/stories260K.bin", RopeLayout::Interleaved},
                       Src{"reference/llama", RopeLayout::Interleaved}, Src{"reference/mistral", RopeLayout::Interleaved},
                       Src{"reference/gemma2", RopeLayout::Halves}, Src{"reference/qwen2", RopeLayout::Halves},
                       Src{"reference/qwen3", RopeLayout::Halves}, Src{"reference/gemma3", RopeLayout::Halves}}) {
    SCOPED_TRACE(s.rel);
    const std::string rel = s.rel;
    const std::string p = rel == "reference/qwen3" || rel == "reference/gemma3" ? test::reference_dir(rel.substr(10))
                                                                                : test::shared_file(rel);
    if (p.empty()) return;
    Checkpoint src = open_checkpoint(p);
    VocabSpec v = small_vocab(src.config.vocab_size);
    v.bos_id = src.config.bos_id;
    v.eos_id = src.config.eos_id;
    test::TempDir tmp;
    const std::string out = tmp.file("m.gguf");
    GgufWriteOptions opt;
    opt.name = "roundtrip";
    opt.extras = src.extras;
    write_gguf(out, src.config, as_list(src), &v, opt);
    EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
    Checkpoint back = open_checkpoint(out);
    EXPECT_EQ(back.format, "gguf");
    EXPECT_EQ(back.qk_layout, s.layout);
    expect_same_config(src.config, back.config);
    expect_same_tensors(src, back);
    ASSERT_TRUE(back.vocab.has_value());
    expect_same_vocab(v, *back.vocab);
    EXPECT_EQ(back.extras, src.extras);
    EXPECT_EQ(back.norm_weights_include_one, src.config.gemma_family());
    // Alignment and llama.cpp names, checked on the raw parse.
    auto bytes = test::read_bytes(out);
    GgufFile g = parse_gguf(bytes.data(), bytes.size(), out);
    EXPECT_EQ(g.version, 3u);
    EXPECT_EQ(g.data_offset % 32, 0u);
    EXPECT_EQ(g.kv.at("general.name").s, "roundtrip");
    bool saw_embd = false;
    for (const auto& ti : g.tensors) {
      EXPECT_EQ(ti.offset % 32, 0u);
      if (ti.name == "token_embd.weight") {
        saw_embd = true;
        EXPECT_EQ(ti.ne, (std::vector<uint64_t>{uint64_t(src.config.dim), uint64_t(src.config.vocab_size)}));
      }
    }
    EXPECT_TRUE(saw_embd);
    if (src.config.arch == Arch::Gemma2) {
      EXPECT_EQ(g.kv.at("general.architecture").s, "gemma2");
      EXPECT_EQ(g.kv.at("gemma2.attn_logit_softcapping").f, 50.0);
      EXPECT_EQ(g.kv.count("gemma2.attention.sliding_window"), 1u);
      bool saw_post = false;
      for (const auto& ti : g.tensors) saw_post |= ti.name == "blk.1.post_ffw_norm.weight";
      EXPECT_TRUE(saw_post);
    }
    if (src.config.arch == Arch::Mistral) {
      EXPECT_EQ(g.kv.at("general.architecture").s, "llama");
    }
    if (src.config.arch == Arch::Gemma3) {
      EXPECT_EQ(g.kv.at("general.architecture").s, "gemma3");
      EXPECT_EQ(g.kv.at("gemma3.attention.sliding_window_pattern").u, 3u);
      EXPECT_EQ(g.kv.at("gemma3.rope.freq_base_swa").f, 10000.0);
      EXPECT_EQ(g.kv.at("gemma3.rope.scaling.type").s, "linear");
    }
    if (src.config.qk_norm()) {
      int head_norms = 0;
      for (const auto& ti : g.tensors)
        if (ti.name.find("_norm.weight") != std::string::npos && ti.name.find("attn_") != std::string::npos &&
            ti.name.find("attn_norm") == std::string::npos) {
          EXPECT_EQ(ti.ne, (std::vector<uint64_t>{uint64_t(src.config.head_dim)})) << ti.name;
          ++head_norms;
        }
      EXPECT_EQ(head_norms, 2 * src.config.n_layers);
      EXPECT_EQ(g.kv.at("general.architecture").s, arch_name(src.config.arch));
    }
  }
}

TEST(IoWriter, GgufHalfPrecisionAndNoVocab) {
  KVP_REQUIRE_SHARED(p, "reference/qwen2");
  Checkpoint src = open_checkpoint(p);
  std::vector<std::vector<uint16_t>> bufs;
  std::vector<TensorView> list;
  int i = 0;
  for (const auto& [n, t] : src.tensors) {
    DType d = (i++ % 2) ? DType::BF16 : DType::F16;
    bufs.emplace_back(size_t(t.numel()));
    from_f32(d, static_cast<const float*>(t.data), bufs.back().data(), size_t(t.numel()));
    list.push_back({n, d, t.shape, bufs.back().data()});
  }
  test::TempDir tmp;
  write_gguf(tmp.file("h.gguf"), src.config, list, nullptr);
  Checkpoint back = open_checkpoint(tmp.file("h.gguf"));
  EXPECT_FALSE(back.vocab.has_value());
  EXPECT_EQ(back.config.bos_id, -1);
  for (const auto& t : list) EXPECT_TRUE(same_bytes(t, back.tensors.at(t.name))) << t.name;
}

TEST(IoWriter, GgufNameMapping) {
  EXPECT_EQ(hf_to_gguf_name("model.layers.12.post_attention_layernorm.weight", "llama"), "blk.12.ffn_norm.weight");
  EXPECT_EQ(hf_to_gguf_name("model.layers.12.post_attention_layernorm.weight", "gemma2"),
            "blk.12.post_attention_norm.weight");
  EXPECT_EQ(hf_to_gguf_name("model.layers.0.pre_feedforward_layernorm.weight", "gemma2"), "blk.0.ffn_norm.weight");
  EXPECT_EQ(hf_to_gguf_name("model.layers.3.self_attn.v_proj.bias", "qwen2"), "blk.3.attn_v.bias");
  EXPECT_EQ(hf_to_gguf_name("model.layers.5.self_attn.q_norm.weight", "qwen3"), "blk.5.attn_q_norm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.5.attn_k_norm.weight", "qwen3"), "model.layers.5.self_attn.k_norm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.5.attn_k_norm.weight", "qwen2"), "");  // not part of a qwen2 model
  EXPECT_EQ(gguf_arch_for(Arch::Qwen3), "qwen3");
  EXPECT_EQ(gguf_to_hf_name("blk.7.attn_output.weight", "llama"), "model.layers.7.self_attn.o_proj.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.7.post_ffw_norm.weight", "llama"), "");
  EXPECT_EQ(gguf_to_hf_name("blk.x.attn_q.weight", "llama"), "");
  EXPECT_EQ(gguf_to_hf_name("rope_freqs.weight", "llama"), "");
  EXPECT_EQ(gguf_arch_for(Arch::Mistral), "llama");
}

}  // namespace
}  // namespace kvp
