// Model families (issue 4): Llama, Mistral, Gemma-2, Qwen2, Qwen3 and Gemma-3 (the
// transformers reference outputs are test_family_reference.cpp's).
//  - every family x {HF dir, GGUF written by `kvparity synth`} x {cache on, off} x {fp32, bf16, fp16};
//  - export + reload round-trips bitwise; sliding-window equivalence between the cache paths for
//    sequences longer than the window; rope_scaling (linear, llama3); refusals naming the field.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/hf_config.h"
#include "kernels/elementwise.h"
#include "model/checkpoint_export.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "reference_files.h"
#include "runtime/generator.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace kvp {
namespace {

using test::HiddenCapture;
using test::max_abs_diff;
using test::read_f32;
using test::read_json;


const std::vector<std::string> kFamilies = {"llama", "mistral", "gemma2", "qwen2",
                                            "qwen3", "gemma3",  "olmo2",  "olmo3", "exaone4"};


// ---------------------------------------------------------------------------------------------
// Synthetic tiny models of every family, written in both formats as `kvparity synth` writes them.
// YaRN has no GGUF form there (gpt-oss and mistral3 aside), so OLMo-3's tiny model (YaRN on its full layer) is written unscaled here,
// in both formats; test_olmo3.cpp and test_yarn.cpp run its YaRN.
void write_synth(const std::string& arch, const std::string& format, DType dtype, const std::string& out) {
  ModelConfig cfg = synthetic_config(arch, "tiny");
  if (cfg.rope_scaling == ModelConfig::RopeScaling::Yarn) {
    cfg.rope_scaling = ModelConfig::RopeScaling::None;
    cfg.rope_local_theta = 0.0f;
  }
  const Checkpoint ck = synthesize_checkpoint(cfg, dtype);
  ExportOptions eo;
  VocabSpec vocab;
  if (format == "gguf") {
    vocab = make_synthetic_vocab(cfg.vocab_size);
    eo.vocab = &vocab;
  }
  export_checkpoint(ck, format, out, eo);
}

std::vector<float> all_logits(const std::shared_ptr<const Model>& m, const std::vector<int>& toks, KernelPolicy pol) {
  EngineOptions eo;
  eo.kernels = pol;
  eo.kv_dtype = m->dtype;
  Engine e(m, eo);
  const float* l = e.forward(toks.data(), int(toks.size()), 0, ForwardOptions{});
  return std::vector<float>(l, l + toks.size() * size_t(m->config.vocab_size));
}

class FamilySynth : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilySynth, RunsFromHfAndGgufOnBothPathsInEveryDtype) {
  const std::string arch = GetParam();
  test::TempDir tmp;
  const std::vector<int> prompt{5, 17, 42, 99, 7};
  const int n_new = 20;  // 25 positions: past the tiny Mistral/Gemma-2 window of 16
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    const std::string hf = tmp.file(arch + "_" + std::string(dtype_name(dt))), gguf = hf + ".gguf";
    write_synth(arch, "hf", dt, hf);
    write_synth(arch, "gguf", dt, gguf);
    auto m_hf = Model::load(hf, dt);
    auto m_gguf = Model::load(gguf, dt);
    EXPECT_EQ(arch_name(m_hf->config.arch), arch);
    EXPECT_EQ(arch_name(m_gguf->config.arch), arch);
    // Export + reload is bitwise: the GGUF (llama.cpp names, RoPE layout, Gemma-2 norm + 1) gives
    // the same logits as the HF directory.
    const std::vector<int> seq{1, 5, 17, 42, 99, 7, 300, 12, 64, 400, 3, 8, 77, 150, 200, 250, 11, 23, 45, 67, 89, 101};
    const auto a = all_logits(m_hf, seq, KernelPolicy::Standard);
    const auto b = all_logits(m_gguf, seq, KernelPolicy::Standard);
    EXPECT_EQ(max_abs_diff(a.data(), b.data(), a.size()), 0.0) << arch << " " << dtype_name(dt) << " hf vs gguf";
    for (const auto& [label, model] : {std::pair{"hf", m_hf}, std::pair{"gguf", m_gguf}}) {
      std::vector<int> outs[2];
      for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
        EngineOptions eo;
        eo.kernels = KernelPolicy::Standard;
        eo.kv_dtype = dt;
        Engine e(model, eo);
        GenerationConfig g;
        g.max_new_tokens = n_new;
        g.cache = mode;
        g.stop_at_eos = false;
        const auto r = e.generate(prompt, g, nullptr);
        EXPECT_EQ(int(r.output_ids.size()), n_new) << arch << " " << label << " " << dtype_name(dt);
        outs[mode == CacheMode::On ? 0 : 1] = r.output_ids;
      }
      // fp32 paths agree token for token (the peaked synthetic logits leave no near-ties).
      if (dt == DType::F32) {
        EXPECT_EQ(outs[0], outs[1]) << arch << " " << label;
      }
    }
  }
}

// Cache ON vs OFF with the window: the reference policy in fp32 gives (nearly) the same logits at
// every step of a sequence 3x longer than the window, and the window really changes the result.
class FamilyWindow : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyWindow, SlidingWindowPathsAgreePastTheWindow) {
  const std::string arch = GetParam();
  ModelConfig cfg = synthetic_config(arch, "tiny");
  ASSERT_GT(cfg.sliding_window, 0) << arch;
  auto model = Model::from_checkpoint(synthesize_checkpoint(cfg, DType::F32), DType::F32);
  const std::vector<int> prompt{1, 9, 33, 70};
  const int n_new = 3 * cfg.sliding_window;
  std::vector<std::vector<float>> logits[2];
  std::vector<int> ids[2];
  for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
    EngineOptions eo;
    eo.kernels = KernelPolicy::Reference;
    Engine e(model, eo);
    GenerationConfig g;
    g.max_new_tokens = n_new;
    g.cache = mode;
    g.stop_at_eos = false;
    const int k = mode == CacheMode::On ? 0 : 1;
    ids[k] = e.generate(prompt, g, nullptr, [&](const StepInfo& s) {
      logits[k].emplace_back(s.logits, s.logits + s.vocab);
    }).output_ids;
  }
  EXPECT_EQ(ids[0], ids[1]);
  ASSERT_EQ(logits[0].size(), logits[1].size());
  for (size_t s = 0; s < logits[0].size(); ++s) {
    const auto& a = logits[0][s];
    const auto& b = logits[1][s];
    double scale = 0;
    for (float v : a) scale = std::max(scale, double(std::fabs(v)));
    EXPECT_LE(max_abs_diff(a.data(), b.data(), a.size()), 1e-5 * std::max(1.0, scale)) << arch << " step " << s;
  }
  // The same weights without a window give other logits once a query no longer sees position 0.
  ModelConfig full = cfg;
  full.sliding_window = 0;
  auto no_window = Model::from_checkpoint(synthesize_checkpoint(full, DType::F32), DType::F32);
  std::vector<int> seq = prompt;
  seq.insert(seq.end(), ids[0].begin(), ids[0].end());
  const auto w = all_logits(model, seq, KernelPolicy::Reference);
  const auto nw = all_logits(no_window, seq, KernelPolicy::Reference);
  const size_t V = size_t(cfg.vocab_size), W = size_t(cfg.sliding_window);
  EXPECT_EQ(max_abs_diff(w.data(), nw.data(), W * V), 0.0) << "rows before the window edge";
  EXPECT_GT(max_abs_diff(w.data() + W * V, nw.data() + W * V, (seq.size() - W) * V), 1e-3) << "rows past it";
  // The standard policy (split-KV decode, tiled prefill) honours the window too.
  const auto st = all_logits(model, seq, KernelPolicy::Standard);
  EXPECT_LE(max_abs_diff(w.data(), st.data(), w.size()), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Families, FamilySynth, ::testing::ValuesIn(kFamilies));
INSTANTIATE_TEST_SUITE_P(Families, FamilyWindow, ::testing::Values("mistral", "gemma2", "gemma3", "olmo3", "exaone4"));

// ---------------------------------------------------------------------------------------------
TEST(FamilyPresets, RealShapesAndArchitectureChecks) {
  const ModelConfig g = synthetic_config("gemma2", "gemma2-2b");
  EXPECT_EQ(g.n_layers, 26);
  EXPECT_EQ(g.dim, 2304);
  EXPECT_EQ(g.n_heads, 8);
  EXPECT_EQ(g.n_kv_heads, 4);
  EXPECT_EQ(g.head_dim, 256);
  EXPECT_EQ(g.hidden_dim, 9216);
  EXPECT_EQ(g.vocab_size, 256000);
  EXPECT_EQ(g.query_pre_attn_scalar, 256.0f);
  EXPECT_EQ(g.attn_logit_softcapping, 50.0f);
  EXPECT_EQ(g.final_logit_softcapping, 30.0f);
  EXPECT_EQ(g.sliding_window, 4096);
  EXPECT_EQ(g.window_for_layer(0), 4096);
  EXPECT_EQ(g.window_for_layer(1), 0);
  EXPECT_TRUE(g.tied_embeddings);
  const ModelConfig q = synthetic_config("", "qwen2.5-0.5b");
  EXPECT_EQ(q.arch, Arch::Qwen2);
  EXPECT_EQ(q.n_layers, 24);
  EXPECT_EQ(q.dim, 896);
  EXPECT_EQ(q.n_heads, 14);
  EXPECT_EQ(q.n_kv_heads, 2);
  EXPECT_EQ(q.hidden_dim, 4864);
  EXPECT_EQ(q.vocab_size, 151936);
  EXPECT_TRUE(q.tied_embeddings && q.qkv_bias);
  EXPECT_EQ(q.rope_theta, 1e6f);
  const ModelConfig q3 = synthetic_config("", "qwen3-0.6b");  // Qwen/Qwen3-0.6B
  EXPECT_EQ(q3.arch, Arch::Qwen3);
  EXPECT_EQ(q3.n_layers, 28);
  EXPECT_EQ(q3.dim, 1024);
  EXPECT_EQ(q3.n_heads, 16);
  EXPECT_EQ(q3.n_kv_heads, 8);
  EXPECT_EQ(q3.head_dim, 128);  // q_dim 2048, twice the hidden size
  EXPECT_EQ(q3.hidden_dim, 3072);
  EXPECT_EQ(q3.vocab_size, 151936);
  EXPECT_TRUE(q3.tied_embeddings && q3.qk_norm() && !q3.qkv_bias);
  EXPECT_EQ(q3.rope_theta, 1e6f);
  const ModelConfig g3 = synthetic_config("", "gemma3-1b");  // google/gemma-3-1b-pt
  EXPECT_EQ(g3.arch, Arch::Gemma3);
  EXPECT_EQ(g3.n_layers, 26);
  EXPECT_EQ(g3.dim, 1152);
  EXPECT_EQ(g3.n_heads, 4);
  EXPECT_EQ(g3.n_kv_heads, 1);
  EXPECT_EQ(g3.head_dim, 256);
  EXPECT_EQ(g3.hidden_dim, 6912);
  EXPECT_EQ(g3.vocab_size, 262144);
  EXPECT_EQ(g3.sliding_window, 512);
  EXPECT_EQ(g3.window_for_layer(4), 512);
  EXPECT_EQ(g3.window_for_layer(5), 0);  // every 6th layer global
  EXPECT_EQ(g3.rope_local_theta, 10000.0f);
  EXPECT_EQ(g3.rope_theta, 1e6f);
  const ModelConfig mi = synthetic_config("mistral", "mistral-7b");
  EXPECT_EQ(mi.vocab_size, 32768);
  EXPECT_EQ(mi.sliding_window, 0);
  EXPECT_EQ(mi.n_kv_heads, 8);
  EXPECT_EQ(mi.hidden_dim, 14336);
  EXPECT_EQ(mi.rope_theta, 1e6f);
  const ModelConfig l = synthetic_config("llama", "llama2-7b");
  EXPECT_EQ(l.n_layers, 32);
  EXPECT_EQ(l.hidden_dim, 11008);
  const ModelConfig o7 = synthetic_config("", "olmo2-7b");  // allenai/OLMo-2-1124-7B
  EXPECT_EQ(o7.arch, Arch::Olmo2);
  EXPECT_FALSE(o7.pre_norms());
  EXPECT_TRUE(o7.post_norms() && o7.qk_norm() && !o7.qk_norm_per_head());
  EXPECT_EQ(o7.vocab_size, 100352);
  EXPECT_EQ(o7.rope_theta, 500000.0f);
  EXPECT_FALSE(o7.tied_embeddings);
  // The mixtures of experts: every layer sparse, the experts' shapes and renormalisation the models'.
  const ModelConfig mx = synthetic_config("", "mixtral-8x7b");  // mistralai/Mixtral-8x7B-v0.1
  EXPECT_EQ(mx.arch, Arch::Mistral);
  EXPECT_EQ(mx.sliding_window, 0);
  EXPECT_EQ(mx.moe.n_experts, 8);
  EXPECT_EQ(mx.moe.n_used, 2);
  EXPECT_EQ(mx.moe.expert_hidden_dim, 14336);
  EXPECT_TRUE(mx.moe.norm_topk_prob);
  const ModelConfig q15 = synthetic_config("qwen2_moe", "qwen1.5-moe-a2.7b");  // Qwen/Qwen1.5-MoE-A2.7B
  EXPECT_EQ(q15.arch, Arch::Qwen2);
  EXPECT_TRUE(q15.qkv_bias && !q15.tied_embeddings && !q15.moe.norm_topk_prob);
  EXPECT_EQ(q15.moe.n_experts, 60);
  EXPECT_EQ(q15.moe.n_used, 4);
  EXPECT_EQ(q15.moe.expert_hidden_dim, 1408);
  EXPECT_EQ(q15.moe.shared_hidden_dim, 5632);
  const ModelConfig q30 = synthetic_config("", "qwen3-30b-a3b");  // Qwen/Qwen3-30B-A3B
  EXPECT_EQ(q30.arch, Arch::Qwen3);
  EXPECT_EQ(q30.q_dim(), 4096);
  EXPECT_EQ(q30.moe.n_experts, 128);
  EXPECT_EQ(q30.moe.n_used, 8);
  EXPECT_EQ(q30.moe.expert_hidden_dim, 768);
  const ModelConfig oe = synthetic_config("olmoe", "olmoe-1b-7b");  // allenai/OLMoE-1B-7B-0924
  EXPECT_EQ(oe.arch, Arch::Olmoe);
  EXPECT_EQ(oe.moe.n_experts, 64);
  EXPECT_EQ(oe.moe.n_used, 8);
  EXPECT_FALSE(oe.moe.norm_topk_prob);
  for (const ModelConfig* m : {&mx, &q15, &q30, &oe})
    for (int layer = 0; layer < m->n_layers; ++layer) EXPECT_TRUE(m->moe_layer(layer)) << m->source << " " << layer;
  const std::string wrong = test::error_of([] { synthetic_config("llama", "mixtral-8x7b"); });
  EXPECT_NE(wrong.find("mixtral"), std::string::npos) << wrong;
  const std::string unknown = test::error_of([] { synthetic_config("", "mixtral-8x22b"); });
  EXPECT_NE(unknown.find("olmoe-1b-7b"), std::string::npos) << unknown;  // the known ones listed
  const std::string e = test::error_of([] { synthetic_config("llama", "gemma2-2b"); });
  EXPECT_NE(e.find("gemma2-2b"), std::string::npos) << e;
  EXPECT_NE(e.find("gemma2"), std::string::npos) << e;
  // The synthetic vocabulary at the large families' sizes (and quickly).
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(make_synthetic_vocab(256000).tokens.size(), 256000u);
  EXPECT_FALSE(make_synthetic_tokenizer_json(151936).empty());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);
}

TEST(FamilyGeneration, EmptyPromptUsesBosOrIsRefused) {
  auto qwen = Model::from_checkpoint(synthesize_checkpoint(synthetic_config("qwen2", "tiny"), DType::F32), DType::F32);
  ASSERT_EQ(qwen->config.bos_id, -1);
  Engine e(qwen, EngineOptions{});
  GenerationConfig g;
  g.max_new_tokens = 2;
  const std::string err = test::error_of([&] { e.generate({}, g, nullptr); });
  EXPECT_NE(err.find("no BOS"), std::string::npos) << err;
  auto gemma = Model::from_checkpoint(synthesize_checkpoint(synthetic_config("gemma2", "tiny"), DType::F32), DType::F32);
  Engine e2(gemma, EngineOptions{});
  EXPECT_EQ(e2.generate({}, g, nullptr).prompt_ids, std::vector<int>{2});
}

// ---------------------------------------------------------------------------------------------
constexpr const char* kLlama = R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,
  "intermediate_size":160,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
  "vocab_size":512,"max_position_embeddings":512,"rms_norm_eps":1e-5,"rope_theta":500000.0)";

std::string cfg_with(const char* base, const std::string& extra) { return std::string(base) + "," + extra + "}"; }

TEST(FamilyConfig, RopeScalingLinearAndLlama3) {
  const ModelConfig lin = parse_hf_config(cfg_with(kLlama, R"("rope_scaling":{"type":"linear","factor":2.0})"), "t");
  EXPECT_EQ(lin.rope_scaling, ModelConfig::RopeScaling::Linear);
  EXPECT_EQ(lin.rope_factor, 2.0f);
  const ModelConfig l3 = parse_hf_config(
      cfg_with(kLlama, R"("rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,)"
                       R"("high_freq_factor":4.0,"original_max_position_embeddings":8192})"),
      "t");
  EXPECT_EQ(l3.rope_scaling, ModelConfig::RopeScaling::Llama3);
  EXPECT_EQ(l3.rope_original_max_pos, 8192);

  // Linear: position 2p with factor 2 is exactly position p unscaled (the scalings are powers of 2).
  const int hd = 64, half = hd / 2;
  RopeTable plain(hd, 4096, 500000.0f);
  RopeScalingSpec ls;
  ls.type = RopeScalingSpec::Type::Linear;
  ls.factor = 2.0f;
  RopeTable scaled(hd, 4096, 500000.0f, ls);
  for (int p : {1, 7, 100, 1000})
    for (int i = 0; i < half; ++i) {
      EXPECT_EQ(scaled.cos_row(2 * p)[i], plain.cos_row(p)[i]);
      EXPECT_EQ(scaled.sin_row(2 * p)[i], plain.sin_row(p)[i]);
    }
  // Llama3: high frequencies (wavelength < 8192/4) unchanged, low ones (> 8192) divided by 8,
  // the band between interpolated (neither).
  RopeScalingSpec s3;
  s3.type = RopeScalingSpec::Type::Llama3;
  s3.factor = 8.0f;
  RopeTable l3t(hd, 4096, 500000.0f, s3);
  int high = 0, low = 0, mid = 0;
  for (int i = 0; i < half; ++i) {
    const double inv = 1.0 / std::pow(500000.0, 2.0 * i / hd);
    const double wavelen = 2 * M_PI / inv;
    if (wavelen < 8192.0 / 4) {
      ++high;
      EXPECT_EQ(l3t.sin_row(1)[i], plain.sin_row(1)[i]) << i;
    } else if (wavelen > 8192.0) {
      ++low;
      EXPECT_EQ(l3t.sin_row(8)[i], plain.sin_row(1)[i]) << i;
    } else {
      ++mid;
      EXPECT_LT(l3t.sin_row(1)[i], plain.sin_row(1)[i]) << i;
      EXPECT_GT(l3t.sin_row(8)[i], plain.sin_row(1)[i]) << i;
    }
  }
  EXPECT_GT(high, 0);
  EXPECT_GT(low, 0);
  EXPECT_GT(mid, 0);

  // config.json and GGUF round trips of both scaling types.
  test::TempDir tmp;
  ModelConfig c = synthetic_config("llama", "tiny");
  c.rope_scaling = ModelConfig::RopeScaling::Llama3;
  c.rope_factor = 8.0f;
  c.rope_original_max_pos = 64;
  const Checkpoint ck = synthesize_checkpoint(c, DType::F32);
  export_checkpoint(ck, "hf", tmp.file("l3"));
  auto m = Model::load(tmp.file("l3"), DType::F32);
  EXPECT_EQ(m->config.rope_scaling, ModelConfig::RopeScaling::Llama3);
  EXPECT_EQ(m->config.rope_original_max_pos, 64);
  std::vector<int> toks;
  for (int i = 0; i < 80; ++i) toks.push_back(1 + (i * 37) % 500);  // past original_max_position_embeddings
  const auto a = all_logits(m, toks, KernelPolicy::Reference);
  for (float v : a) ASSERT_TRUE(std::isfinite(v));

  // GGUF carries llama3 scaling as llama.cpp does, per-frequency divisors in rope_freqs.weight: the
  // same angles up to the last bit of the division, so the logits agree to fp32 noise.
  export_checkpoint(ck, "gguf", tmp.file("l3.gguf"));
  auto g = Model::load(tmp.file("l3.gguf"), DType::F32);
  EXPECT_EQ(g->config.rope_scaling, ModelConfig::RopeScaling::FreqFactors);
  ASSERT_EQ(g->config.rope_freq_factors.size(), size_t(c.head_dim / 2));
  EXPECT_EQ(g->config.rope_freq_factors.front(), 1.0f);  // the highest frequency is left alone
  EXPECT_FLOAT_EQ(g->config.rope_freq_factors.back(), 8.0f);
  const auto b = all_logits(g, toks, KernelPolicy::Reference);
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, double(std::fabs(a[i] - b[i])));
    scale = std::max(scale, double(std::fabs(a[i])));
  }
  EXPECT_LT(worst, 1e-5 * scale) << "max |logit| " << scale;
  // ...and the scaling matters: without it the logits move far more.
  ModelConfig plain_cfg = c;
  plain_cfg.rope_scaling = ModelConfig::RopeScaling::None;
  Checkpoint plain_ck = ck;
  plain_ck.config = plain_cfg;
  export_checkpoint(plain_ck, "hf", tmp.file("plain"));
  const auto p = all_logits(Model::load(tmp.file("plain"), DType::F32), toks, KernelPolicy::Reference);
  double moved = 0;
  for (size_t i = 0; i < a.size(); ++i) moved = std::max(moved, double(std::fabs(a[i] - p[i])));
  EXPECT_GT(moved, 100 * worst + 1e-3);
  // A GGUF model's frequency factors have no config.json form.
  const std::string err = test::error_of([&] { export_checkpoint(open_checkpoint(tmp.file("l3.gguf")), "hf", tmp.file("back")); });
  EXPECT_NE(err.find("rope_freqs"), std::string::npos) << err;

  // Linear scaling is two GGUF keys; HF and GGUF give bitwise-equal logits.
  ModelConfig lc = synthetic_config("llama", "tiny");
  lc.rope_scaling = ModelConfig::RopeScaling::Linear;
  lc.rope_factor = 4.0f;
  const Checkpoint lck = synthesize_checkpoint(lc, DType::F32);
  export_checkpoint(lck, "hf", tmp.file("lin"));
  export_checkpoint(lck, "gguf", tmp.file("lin.gguf"));
  auto lg = Model::load(tmp.file("lin.gguf"), DType::F32);
  EXPECT_EQ(lg->config.rope_scaling, ModelConfig::RopeScaling::Linear);
  EXPECT_EQ(lg->config.rope_factor, 4.0f);
  EXPECT_EQ(all_logits(Model::load(tmp.file("lin"), DType::F32), toks, KernelPolicy::Reference),
            all_logits(lg, toks, KernelPolicy::Reference));
}

// Qwen3Config's defaults where config.json leaves a field out (transformers v4.51: head_dim 128, not
// hidden / heads; no bos/eos; untied), and the layer kinds newer transformers write out.
TEST(FamilyConfig, Qwen3DefaultsAndLayerKinds) {
  const std::string base = R"({"architectures":["Qwen3ForCausalLM"],"hidden_size":64,"intermediate_size":160,
    "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":512,
    "max_position_embeddings":512)";
  const ModelConfig c = parse_hf_config(base + "}", "cfg.json");
  EXPECT_EQ(c.arch, Arch::Qwen3);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_TRUE(c.qk_norm());
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(c.bos_id, -1);
  EXPECT_EQ(c.eos_id, -1);
  EXPECT_EQ(c.sliding_window, 0);
  const ModelConfig full =
      parse_hf_config(base + R"(,"sliding_window":8,"layer_types":["full_attention","full_attention"]})", "cfg.json");
  EXPECT_EQ(full.sliding_window, 0);
  const ModelConfig all = parse_hf_config(
      base + R"(,"sliding_window":8,"layer_types":["sliding_attention","sliding_attention"]})", "cfg.json");
  EXPECT_EQ(all.sliding_window, 8);
  // A Qwen2 config gets no q/k norms.
  EXPECT_FALSE(parse_hf_config(R"({"model_type":"qwen2","hidden_size":64,"intermediate_size":160,
    "num_hidden_layers":2,"num_attention_heads":4,"vocab_size":512,"max_position_embeddings":512})", "cfg.json")
                   .qk_norm());
}

// Gemma3TextConfig's defaults (v4.51: window 4096 on all but every 6th layer, local RoPE base 10000,
// query_pre_attn_scalar 256, head_dim 256, no caps, tied), pattern 1 (every layer global), the
// layer kinds newer configs list, the attention cap v4.51 does not apply, and the rope scaling it does.
TEST(FamilyConfig, Gemma3DefaultsPatternsAndLayerKinds) {
  const std::string base = R"({"architectures":["Gemma3ForCausalLM"],"model_type":"gemma3_text","hidden_size":64,
    "intermediate_size":160,"num_hidden_layers":7,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":512,
    "max_position_embeddings":512)";
  const ModelConfig c = parse_hf_config(base + "}", "cfg.json");
  EXPECT_EQ(c.arch, Arch::Gemma3);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.query_pre_attn_scalar, 256.0f);
  EXPECT_TRUE(c.qk_norm() && c.tied_embeddings && c.gemma_family());
  EXPECT_EQ(c.bos_id, 2);
  EXPECT_EQ(c.eos_id, 1);
  EXPECT_EQ(c.attn_logit_softcapping, 0.0f);
  EXPECT_EQ(c.final_logit_softcapping, 0.0f);
  EXPECT_EQ(c.rope_local_theta, 10000.0f);
  for (int l = 0; l < 7; ++l) {
    EXPECT_EQ(c.window_for_layer(l), l == 5 ? 0 : 4096) << "layer " << l;
    EXPECT_EQ(c.local_rope(l), l != 5) << "layer " << l;
  }
  // Pattern 1: (l + 1) % 1 == 0, every layer global with the global RoPE.
  const ModelConfig global = parse_hf_config(base + R"(,"sliding_window_pattern":1})", "cfg.json");
  for (int l = 0; l < 7; ++l) EXPECT_FALSE(global.window_for_layer(l) > 0 || global.local_rope(l)) << l;
  // Newer configs' layer kinds: the pattern read off them, or refused.
  const ModelConfig kinds = parse_hf_config(
      base + R"(,"sliding_window":8,"layer_types":["sliding_attention","sliding_attention","full_attention",
      "sliding_attention","sliding_attention","full_attention","sliding_attention"]})",
      "cfg.json");
  EXPECT_EQ(kinds.sliding_window_period, 3);
  EXPECT_EQ(kinds.window_for_layer(6), 8);
  EXPECT_EQ(kinds.window_for_layer(5), 0);
  std::string e = test::error_of([&] {
    parse_hf_config(base + R"(,"layer_types":["sliding_attention","full_attention","full_attention",
      "sliding_attention","sliding_attention","full_attention","sliding_attention"]})",
                    "cfg.json");
  });
  EXPECT_NE(e.find("layer_types"), std::string::npos) << e;
  // v4.51's Gemma3Attention does not pass the attention cap on, so neither does kvparity; the final
  // cap is applied.
  const ModelConfig caps =
      parse_hf_config(base + R"(,"attn_logit_softcapping":50.0,"final_logit_softcapping":30.0})", "cfg.json");
  EXPECT_EQ(caps.attn_logit_softcapping, 0.0f);
  EXPECT_EQ(caps.final_logit_softcapping, 30.0f);
  const ModelConfig scaled =
      parse_hf_config(base + R"(,"rope_scaling":{"rope_type":"linear","factor":8.0}})", "cfg.json");
  EXPECT_EQ(scaled.rope_scaling, ModelConfig::RopeScaling::Linear);
  e = test::error_of([&] {
    parse_hf_config(base + R"(,"rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,
      "high_freq_factor":4.0,"original_max_position_embeddings":8192}})",
                    "cfg.json");
  });
  EXPECT_NE(e.find("rope_scaling"), std::string::npos) << e;
  // The multimodal Gemma-3 (model_type gemma3) is read as its text model (test_vision_language.cpp).
  std::string wrapper;
  EXPECT_EQ(parse_hf_config(R"({"architectures":["Gemma3ForConditionalGeneration"],"model_type":"gemma3",
      "text_config":{"hidden_size":64},"vision_config":{"hidden_size":32}})",
                            "cfg.json", nullptr, &wrapper)
                .dim,
            64);
  EXPECT_EQ(wrapper, "Gemma3ForConditionalGeneration");
  e = test::error_of([&] { parse_hf_config(base + R"(,"use_bidirectional_attention":true})", "cfg.json"); });
  EXPECT_NE(e.find("use_bidirectional_attention"), std::string::npos) << e;
  // What config.json cannot say is refused when writing it, naming the file.
  test::TempDir tmp;
  const std::string out = tmp.file("config.json");
  ModelConfig no_window = synthetic_config("gemma3", "tiny");
  no_window.sliding_window = 0;
  e = test::error_of([&] { write_hf_config(out, no_window, "float32", {}); });
  EXPECT_NE(e.find("local layers but no window"), std::string::npos) << e;
  ModelConfig scaled_local = synthetic_config("gemma3", "tiny");
  scaled_local.rope_local_theta = 0.0f;
  e = test::error_of([&] { write_hf_config(out, scaled_local, "float32", {}); });
  EXPECT_NE(e.find("scaled RoPE on its local layers"), std::string::npos) << e;
  EXPECT_NE(e.find(out), std::string::npos) << e;
  ModelConfig llama3 = synthetic_config("gemma3", "tiny");
  llama3.rope_scaling = ModelConfig::RopeScaling::Llama3;
  e = test::error_of([&] { write_hf_config(out, llama3, "float32", {}); });
  EXPECT_NE(e.find("only linear RoPE scaling"), std::string::npos) << e;
  // Pattern 1 and a window on every layer round-trip as transformers reads them.
  ModelConfig all_local = synthetic_config("gemma3", "tiny");
  all_local.sliding_window_period = 1;
  write_hf_config(out, all_local, "float32", {});
  const ModelConfig back = read_hf_config(out);
  for (int l = 0; l < all_local.n_layers; ++l) {
    EXPECT_EQ(back.window_for_layer(l), 16) << l;
    EXPECT_TRUE(back.local_rope(l)) << l;
  }
}

// A Qwen3 checkpoint without a head's gain, or with one of the wrong length, is refused naming the tensor.
TEST(FamilyConfig, Qwen3HeadNormTensorsAreRequiredWithTheirShape) {
  Checkpoint ck = synthesize_checkpoint(synthetic_config("qwen3", "tiny"), DType::F32);
  Checkpoint missing = ck;
  missing.tensors.erase("model.layers.2.self_attn.k_norm.weight");
  std::string e = test::error_of([&] { Model::from_checkpoint(missing, DType::F32); });
  EXPECT_NE(e.find("model.layers.2.self_attn.k_norm.weight"), std::string::npos) << e;
  Checkpoint wrong = ck;
  wrong.tensors["model.layers.1.self_attn.q_norm.weight"].shape = {16};
  e = test::error_of([&] { Model::from_checkpoint(wrong, DType::F32); });
  EXPECT_NE(e.find("model.layers.1.self_attn.q_norm.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("[32]"), std::string::npos) << e;
  Checkpoint interleaved = ck;
  interleaved.qk_layout = RopeLayout::Interleaved;
  e = test::error_of([&] { Model::from_checkpoint(interleaved, DType::F32); });
  EXPECT_NE(e.find("halves"), std::string::npos) << e;
}

TEST(FamilyConfig, UnsupportedFeaturesAreRefusedNamingTheField) {
  struct Case {
    std::string json;
    std::vector<std::string> want;
  };
  const std::string qwen = R"({"architectures":["Qwen2ForCausalLM"],"model_type":"qwen2","hidden_size":64,
    "intermediate_size":160,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
    "vocab_size":512,"max_position_embeddings":512)";
  const std::string qwen3 = R"({"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","hidden_size":64,
    "intermediate_size":160,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
    "vocab_size":512,"max_position_embeddings":512)";
  const Case cases[] = {
      {cfg_with(kLlama, R"("rope_scaling":{"type":"dynamic","factor":2.0})"), {"'dynamic'", "rope_scaling"}},
      {cfg_with(kLlama, R"("rope_scaling":{"rope_type":"yarn","factor":-4.0})"), {"factor", "rope_scaling.factor"}},
      {cfg_with(kLlama, R"("rope_scaling":{"rope_type":"longrope"})"), {"'longrope'", "rope_scaling"}},
      {cfg_with(kLlama, R"("rope_scaling":{"type":"linear"})"), {"factor", "rope_scaling"}},
      {cfg_with(qwen.c_str(), R"("rope_scaling":{"type":"dynamic","factor":2.0})"), {"'dynamic'", "rope_scaling"}},
      {cfg_with(kLlama, R"("num_local_experts":8)"), {"mixture-of-experts", "num_local_experts"}},
      {cfg_with(qwen.c_str(), R"("num_experts":60)"), {"mixture-of-experts", "num_experts"}},
      {cfg_with(kLlama, R"("vision_config":{"hidden_size":32})"), {"multimodal", "vision_config"}},
      {cfg_with(qwen3.c_str(), R"("attention_bias":true)"), {"attention biases", "attention_bias"}},
      {cfg_with(qwen3.c_str(), R"("num_experts":128,"num_experts_per_tok":8)"), {"mixture-of-experts"}},
      {cfg_with(qwen3.c_str(), R"("rope_scaling":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":0})"),
       {"original_max_position_embeddings", "rope_scaling"}},
      {cfg_with(qwen3.c_str(), R"("use_sliding_window":true,"sliding_window":8,"max_window_layers":1)"),
       {"only some layers", "max_window_layers"}},
      {cfg_with(qwen3.c_str(), R"("sliding_window":8,"layer_types":["full_attention","sliding_attention"])"),
       {"only some layers", "layer_types"}},
      {cfg_with(qwen3.c_str(), R"("layer_types":["full_attention"])"), {"one kind per layer", "layer_types"}},
      {cfg_with(qwen3.c_str(), R"("layer_types":["full_attention","chunked_attention"])"),
       {"\"chunked_attention\"", "layer_types"}},
  };
  for (const auto& c : cases) {
    const std::string err = test::error_of([&] { parse_hf_config(c.json, "cfg.json"); });
    ASSERT_FALSE(err.empty()) << c.json;
    for (const auto& w : c.want) EXPECT_NE(err.find(w), std::string::npos) << "'" << w << "' not in: " << err;
  }
}

}  // namespace
}  // namespace kvp
