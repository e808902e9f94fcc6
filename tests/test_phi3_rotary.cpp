// Phi-3's own rotary embedding (src/io/hf_phi3.h): a partial rotary factor (Phi-4-mini rotates 96 of
// 128 dimensions) and LongRoPE (the 128k Phi-3 models, Phi-3.5-mini, Phi-4-mini). Against
// tests/phi3_rotary_reference.py, an independent float64 numpy replay of transformers' eager
// Phi3ForCausalLM on a tiny checkpoint it writes (12 of 16 dimensions rotating; longrope switching
// to its long factors at position 8): the cache-free logits under every policy, the cached
// generation call by call, and the cache-free one step by step. Past the switch the two paths
// differ by construction (the cache keeps keys rotated the short way), in fp32 and under the
// invariant policy too, which stays bitwise before it.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cli_run.h"
#include "io/checkpoint.h"
#include "io/hf_config.h"
#include "kernels/elementwise.h"
#include "kernels/kernels.h"
#include "lab/model_inspection.h"
#include "model/synthetic.h"
#include "model/model.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

using nlohmann::json;

constexpr double kTolerance = 1e-4;  // fp32 against float64 (measured 5.6e-5); logits of scale ~3

struct Phi3RotaryRef {
  std::vector<int> tokens;
  std::vector<double> logits, cached_steps, uncached_steps;  // [tokens | steps, vocab]
  int vocab = 0, prefill = 0, original_max = 0;
  json stats;
};

class Phi3Rotary : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    ref_ = new Phi3RotaryRef();
    const std::string script = std::string(KVPARITY_SOURCE_DIR) + "/tests/phi3_rotary_reference.py";
    const test::CliRun r = test::run_command("/usr/bin/python3 " + test::q(script) + " " + test::q(dir_->path()) + " 11 --gguf");
    ASSERT_EQ(r.status, 0) << "tests/phi3_rotary_reference.py (needs /usr/bin/python3 with numpy): " << r.out << r.err;
    std::ifstream f(dir_->path() + "/reference.json");
    const json j = json::parse(f);
    ref_->tokens = j["tokens"].get<std::vector<int>>();
    ref_->logits = j["logits"].get<std::vector<double>>();
    ref_->cached_steps = j["cached_steps"].get<std::vector<double>>();
    ref_->uncached_steps = j["uncached_steps"].get<std::vector<double>>();
    ref_->vocab = j["vocab"].get<int>();
    ref_->prefill = j["prefill"].get<int>();
    ref_->original_max = j["original_max_position_embeddings"].get<int>();
    ref_->stats = j["stats"];
  }
  static void TearDownTestSuite() {
    delete ref_;
    delete dir_;
  }
  static double max_diff(const float* got, const std::vector<double>& want, size_t first, size_t n) {
    double d = 0.0;
    for (size_t i = 0; i < n; ++i) d = std::max(d, std::fabs(double(got[i]) - want[first + i]));
    return d;
  }
  static std::shared_ptr<Model> model(DType dt = DType::F32) {
    return Model::from_checkpoint(open_checkpoint(dir_->path()), dt);
  }
  // The cached path as the replay's: a prefill, then one token a call; each call's last row.
  static std::vector<float> cached(std::shared_ptr<const Model> m, KernelPolicy pol) {
    EngineOptions eo;
    eo.kernels = pol;
    Engine e(m, eo);
    ForwardOptions fo;
    fo.all_logits = false;
    const size_t V = size_t(m->config.vocab_size);
    const float* l = e.forward(ref_->tokens.data(), ref_->prefill, 0, fo);
    std::vector<float> out(l, l + V);
    for (int t = ref_->prefill; t < int(ref_->tokens.size()); ++t) {
      l = e.forward(ref_->tokens.data() + t, 1, t, fo);
      out.insert(out.end(), l, l + V);
    }
    return out;
  }
  // The cache-free path: tokens[:t + 1] in one call for each of the same t; its last row.
  static std::vector<float> uncached(std::shared_ptr<const Model> m, KernelPolicy pol) {
    EngineOptions eo;
    eo.kernels = pol;
    Engine e(m, eo);
    const size_t V = size_t(m->config.vocab_size);
    std::vector<float> out;
    for (int t = ref_->prefill - 1; t < int(ref_->tokens.size()); ++t) {
      const float* l = e.forward_uncached(ref_->tokens.data(), t + 1, ForwardOptions{});
      out.insert(out.end(), l + size_t(t) * V, l + size_t(t + 1) * V);
    }
    return out;
  }
  static inline test::TempDir* dir_ = nullptr;
  static inline Phi3RotaryRef* ref_ = nullptr;
};

TEST_F(Phi3Rotary, ConfigReadsAsTransformersDoes) {
  ASSERT_FALSE(ref_->tokens.empty());
  const ModelConfig c = open_checkpoint(dir_->path()).config;
  EXPECT_EQ(c.rotary_dim, 12);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.rope_scaling, ModelConfig::RopeScaling::LongRope);
  EXPECT_EQ(c.rope_original_max_pos, 8);
  EXPECT_EQ(c.rope_factor, 8.0f);  // max_position_embeddings / original
  EXPECT_EQ(c.rope_attention_factor, ref_->stats["attention_factor"].get<double>());
  EXPECT_EQ(c.rope_short_factors.size(), 6u);
  // The check has teeth: the replay's logits move far past the tolerance without the switch or
  // the attention factor, and the paths part after the switch only.
  EXPECT_GT(ref_->stats["never_switching_change"].get<double>(), 0.5);
  EXPECT_GT(ref_->stats["no_attention_factor_change"].get<double>(), 0.5);
  EXPECT_LT(ref_->stats["paths_before_switch"].get<double>(), 1e-12);
  EXPECT_GT(ref_->stats["paths_after_switch"].get<double>(), 0.5);
}

TEST_F(Phi3Rotary, Fp32LogitsMatchTheReplayUnderEveryPolicy) {
  ASSERT_FALSE(ref_->tokens.empty());
  auto m = model();
  for (KernelPolicy pol : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant,
                           KernelPolicy::Portable}) {
    EngineOptions eo;
    eo.kernels = pol;
    Engine e(m, eo);
    const float* l = e.forward_uncached(ref_->tokens.data(), int(ref_->tokens.size()), ForwardOptions{});
    const double d = max_diff(l, ref_->logits, 0, ref_->logits.size());
    EXPECT_LT(d, kTolerance) << policy_name(pol);
    RecordProperty(std::string("max_diff_") + policy_name(pol), std::to_string(d));
  }
}

// Both generation paths call by call, each against the replay's own: the cached one keeps the short
// rotation of the keys it cached before the switch, the cache-free one rotates them again.
TEST_F(Phi3Rotary, BothPathsMatchTheReplayCallByCall) {
  ASSERT_FALSE(ref_->tokens.empty());
  auto m = model();
  for (KernelPolicy pol : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant}) {
    const std::vector<float> on = cached(m, pol), off = uncached(m, pol);
    ASSERT_EQ(on.size(), ref_->cached_steps.size());
    ASSERT_EQ(off.size(), ref_->uncached_steps.size());
    EXPECT_LT(max_diff(on.data(), ref_->cached_steps, 0, on.size()), kTolerance) << policy_name(pol) << " cache ON";
    EXPECT_LT(max_diff(off.data(), ref_->uncached_steps, 0, off.size()), kTolerance)
        << policy_name(pol) << " cache OFF";
  }
}

// Under `invariant` the paths are bitwise equal up to the switch, in every dtype, and part from the
// step whose call first reaches position original_max_position_embeddings: not rounding but a
// different rotation of the cached keys (so by far more than fp16's rounding).
TEST_F(Phi3Rotary, InvariantPathsAreBitwiseUntilTheSwitchAndPartAtIt) {
  ASSERT_FALSE(ref_->tokens.empty());
  const size_t V = size_t(ref_->vocab);
  const size_t switch_step = size_t(ref_->original_max - (ref_->prefill - 1));
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    auto m = model(dt);
    const std::vector<float> on = cached(m, KernelPolicy::Invariant), off = uncached(m, KernelPolicy::Invariant);
    const size_t steps = on.size() / V;
    for (size_t s = 0; s < steps; ++s) {
      double d = 0.0;
      for (size_t i = 0; i < V; ++i) d = std::max(d, std::fabs(double(on[s * V + i]) - double(off[s * V + i])));
      if (s < switch_step)
        EXPECT_EQ(d, 0.0) << dtype_name(dt) << " step " << s;
      else
        EXPECT_GT(d, 0.25) << dtype_name(dt) << " step " << s;
    }
  }
}

// A sequence past the switch and one before it, in one batch, both paths: each is rotated as it is
// alone (transformers would take the batch's highest position for both; kvparity decides per
// sequence, so that batch == solo holds bitwise under `invariant`).
TEST_F(Phi3Rotary, ABatchRotatesEachSequenceAsAlone) {
  ASSERT_FALSE(ref_->tokens.empty());
  auto m = model();
  EngineOptions eo;
  eo.kernels = KernelPolicy::Invariant;
  const std::vector<std::vector<int>> prompts = {
      std::vector<int>(ref_->tokens.begin(), ref_->tokens.begin() + (ref_->original_max - 2)), ref_->tokens};
  for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
    GenerationConfig gc;
    gc.max_new_tokens = 3;
    gc.cache = mode;
    gc.stop_at_eos = false;
    std::vector<std::vector<float>> solo(2), batched(2);
    for (int b = 0; b < 2; ++b) {
      Engine e(m, eo);
      e.generate(prompts[size_t(b)], gc, nullptr, [&](const StepInfo& s) {
        solo[size_t(b)].insert(solo[size_t(b)].end(), s.logits, s.logits + s.vocab);
      });
    }
    Engine e(m, eo);
    e.generate_batch(prompts, gc, nullptr, [&](int b, const StepInfo& s) {
      batched[size_t(b)].insert(batched[size_t(b)].end(), s.logits, s.logits + s.vocab);
    });
    for (int b = 0; b < 2; ++b) {
      ASSERT_EQ(batched[size_t(b)].size(), size_t(3 * ref_->vocab));
      EXPECT_SAME_BITS(batched[size_t(b)], solo[size_t(b)],
                       std::string(mode == CacheMode::On ? "cache ON" : "cache OFF") + " sequence " + std::to_string(b));
    }
  }
}

// Left out, either feature moves the logits far from the replay: the partial factor (a model
// rotating every dimension) and the long factors (a model whose long set is its short one).
TEST_F(Phi3Rotary, WithoutThePartialFactorOrTheLongFactorsTheLogitsLeaveTheReplay) {
  ASSERT_FALSE(ref_->tokens.empty());
  for (int variant = 0; variant < 2; ++variant) {
    Checkpoint ck = open_checkpoint(dir_->path());
    ModelConfig& c = ck.config;
    if (variant == 0) {
      // Every dimension rotates: the 6 factors then cover the first 6 of 8 frequencies.
      c.rotary_dim = 0;
      c.rope_short_factors.resize(8, 1.0f);
      c.rope_long_factors.resize(8, 1.0f);
    } else {
      c.rope_long_factors = c.rope_short_factors;
    }
    EngineOptions eo;
    Engine e(Model::from_checkpoint(ck, DType::F32), eo);
    const float* l = e.forward_uncached(ref_->tokens.data(), int(ref_->tokens.size()), ForwardOptions{});
    EXPECT_GT(max_diff(l, ref_->logits, 0, ref_->logits.size()), 0.5) << variant;
  }
}

// Both writers give Phi-3's own forms (the only ones that say a partial factor and longrope): an HF
// Phi3ForCausalLM directory (fused qkv_proj and gate_up_proj, partial_rotary_factor, a longrope
// rope_scaling) and llama.cpp's phi3 GGUF; each reads back as the same model, bit for bit on
// both paths, and round trips through the other.
TEST_F(Phi3Rotary, BothWritersGivePhi3sFormsAndRoundTrip) {
  ASSERT_FALSE(ref_->tokens.empty());
  test::TempDir out;
  const std::string hf = out.file("hf"), gg = out.file("m.gguf"), back = out.file("back");
  for (const auto& [from, to, dst] : {std::tuple{dir_->path(), "hf", hf}, std::tuple{dir_->path(), "gguf", gg},
                                      std::tuple{gg, "hf", back}}) {
    const test::CliRun r =
        test::run_kvparity("convert --model " + test::q(from) + " --to " + to + " --out " + test::q(dst));
    ASSERT_EQ(r.status, 0) << to << r.out << r.err;
  }
  std::ifstream f(hf + "/config.json");
  const json cfg = json::parse(f);
  EXPECT_EQ(cfg["model_type"], "phi3");
  EXPECT_EQ(cfg["architectures"][0], "Phi3ForCausalLM");
  EXPECT_EQ(cfg["partial_rotary_factor"], 0.75);
  EXPECT_EQ(cfg["original_max_position_embeddings"], ref_->original_max);
  EXPECT_EQ(cfg["rope_scaling"]["type"], "longrope");
  EXPECT_FALSE(cfg["rope_scaling"].contains("attention_factor"));  // transformers' default
  const Checkpoint src = open_checkpoint(dir_->path());
  const std::vector<float> want_off = uncached(Model::from_checkpoint(src, DType::F32), KernelPolicy::Standard);
  const std::vector<float> want_on = cached(Model::from_checkpoint(src, DType::F32), KernelPolicy::Standard);
  for (const std::string& path : {hf, gg, back}) {
    const Checkpoint ck = open_checkpoint(path);
    EXPECT_EQ(ck.read_from, "Phi3ForCausalLM") << path;
    EXPECT_EQ(ck.config.rotary_dim, src.config.rotary_dim) << path;
    EXPECT_EQ(ck.config.rope_long_factors, src.config.rope_long_factors) << path;
    EXPECT_EQ(ck.config.rope_original_max_pos, src.config.rope_original_max_pos) << path;
    EXPECT_EQ(float(ck.config.rope_attention_factor), float(src.config.rope_attention_factor)) << path;
    EXPECT_SAME_BITS(uncached(Model::from_checkpoint(ck, DType::F32), KernelPolicy::Standard), want_off, path);
    EXPECT_SAME_BITS(cached(Model::from_checkpoint(ck, DType::F32), KernelPolicy::Standard), want_on, path);
  }
  const Checkpoint g = open_checkpoint(gg);
  EXPECT_TRUE(g.tensors.count("model.layers.0.self_attn.q_proj.weight"));  // the fused rows split again
  // llama.cpp's Q4_K_M types the fused attn_qkv as one (Q5_K; Q5_1, its stand-in, for rows of 64,
  // which 256-value blocks do not divide), where it would type v apart.
  const test::CliRun mix = test::run_kvparity("convert --model " + test::q(dir_->path()) +
                                              " --to gguf --quant Q4_K_M --out " + test::q(out.file("q.gguf")));
  ASSERT_EQ(mix.status, 0) << mix.err;
  const Checkpoint q = open_checkpoint(out.file("q.gguf"));
  for (const char* part : {"q_proj", "k_proj", "v_proj"})
    EXPECT_EQ(q.tensors.at(std::string("model.layers.1.self_attn.") + part + ".weight").quant, QuantType::Q5_1) << part;
  const test::CliRun i = test::run_kvparity("inspect --model " + test::q(dir_->path()));
  EXPECT_EQ(i.status, 0) << i.err;
  EXPECT_NE(i.out.find("longrope x8"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("12 of each head's 16 dimensions rotate"), std::string::npos) << i.out;
}

// The same model as llama.cpp's converter writes it (arch "phi3", rope.dimension_count 12, the
// factors as tensors, its attention factor as a key): the checkpoint's logits, bit for bit, on both
// paths; and the note that llama.cpp itself switches by context length, not by position.
TEST_F(Phi3Rotary, LlamaCppPhi3GgufIsTheSameModel) {
  ASSERT_FALSE(ref_->tokens.empty());
  const Checkpoint hf = open_checkpoint(dir_->path()), gg = open_checkpoint(dir_->path() + "/model.gguf");
  EXPECT_EQ(gg.read_from, "Phi3ForCausalLM");
  EXPECT_EQ(gg.config.rotary_dim, hf.config.rotary_dim);
  EXPECT_EQ(gg.config.rope_scaling, ModelConfig::RopeScaling::LongRope);
  EXPECT_EQ(gg.config.rope_short_factors, hf.config.rope_short_factors);
  EXPECT_EQ(gg.config.rope_long_factors, hf.config.rope_long_factors);
  EXPECT_EQ(gg.config.rope_original_max_pos, hf.config.rope_original_max_pos);
  EXPECT_EQ(float(gg.config.rope_attention_factor), float(hf.config.rope_attention_factor));
  for (DType dt : {DType::F32, DType::BF16}) {
    const std::vector<float> a = uncached(Model::from_checkpoint(hf, dt), KernelPolicy::Standard);
    const std::vector<float> b = uncached(Model::from_checkpoint(gg, dt), KernelPolicy::Standard);
    EXPECT_SAME_BITS(b, a, std::string(dtype_name(dt)) + " cache OFF");
    const std::vector<float> c = cached(Model::from_checkpoint(hf, dt), KernelPolicy::Standard);
    const std::vector<float> d = cached(Model::from_checkpoint(gg, dt), KernelPolicy::Standard);
    EXPECT_SAME_BITS(d, c, std::string(dtype_name(dt)) + " cache ON");
  }
  const test::CliRun i = test::run_kvparity("inspect --model " + test::q(dir_->path() + "/model.gguf"));
  EXPECT_EQ(i.status, 0) << i.err;
  EXPECT_NE(i.out.find("llama.cpp    runs this file otherwise: longrope: llama.cpp takes the long factors for every "
                       "position of a context longer than 8"),
            std::string::npos)
      << i.out;
}

// A half-present or malformed longrope in a phi3 GGUF is refused by name.
TEST_F(Phi3Rotary, BrokenPhi3GgufLongropeIsRefusedByName) {
  ASSERT_FALSE(ref_->tokens.empty());
  std::ifstream f(dir_->path() + "/model.gguf", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  test::TempDir tmp;
  auto refusal = [&](const std::string& from, const std::string& to) {
    std::string b = bytes;
    const size_t at = b.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at == std::string::npos) return std::string();
    b.replace(at, from.size(), to);  // same length: the file stays well-formed
    std::ofstream(tmp.file("m.gguf"), std::ios::binary) << b;
    return test::error_of([&] { open_checkpoint(tmp.file("m.gguf")); });
  };
  // The long factors renamed away: only the short tensor is left.
  std::string e = refusal("rope_factors_long.weight", "rope_factors_lonX.weight");
  EXPECT_NE(e.find("longrope needs both tensors"), std::string::npos) << e;
  e = refusal("rope.scaling.original_context_length", "rope.scaling.original_context_lengtX");
  EXPECT_NE(e.find("missing required key 'phi3.rope.scaling.original_context_length'"), std::string::npos) << e;
}

// Phi-4-mini's real shape as a synth preset: 3.8 billion parameters, 96 of 128
// dimensions rotating, longrope x32 over 4096 positions.
TEST(Phi3RotaryPreset, Phi4MiniShape) {
  const ModelConfig p = synthetic_config("", "phi-4-mini");
  EXPECT_EQ(p.rotary_dim, 96);
  EXPECT_EQ(p.rope_short_factors.size(), 48u);
  InspectOptions io;
  io.synth = "phi-4-mini";
  const json d = inspect_model(io);
  EXPECT_GT(d["parameters"]["total"].get<double>(), 3.7e9);  // Phi-4-mini: 3.84 billion
  EXPECT_LT(d["parameters"]["total"].get<double>(), 4.0e9);
  const std::string text = inspect_text(d);
  EXPECT_NE(text.find("96 of each head's 128 dimensions rotate"), std::string::npos) << text;
  EXPECT_NE(text.find("longrope x32 (cos/sin x 1.19024"), std::string::npos) << text;
}

// ---------------------------------------------------------------------------------------------

// The kernel: dimensions past rotary_dim pass through bitwise; the first rotary_dim rotate exactly
// as a head of rotary_dim dimensions does under a table of that size, in every dtype and rounding,
// longrope's long rows included.
TEST(PartialRotary, PassedDimensionsStayAndTheRestRotateAsASmallerHead) {
  std::mt19937 rng(5);
  const int hd = 16, rd = 12, heads = 2, M = 3, positions = 32;
  RopeScalingSpec lr;
  lr.type = RopeScalingSpec::Type::LongRope;
  lr.original_max_pos = 8;
  lr.attention_factor = 1.25;
  lr.short_factors = {1.0f, 1.1f, 1.2f, 1.3f, 1.4f, 1.5f};
  lr.long_factors = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
  for (RopeRounding rounding : {RopeRounding::Terms, RopeRounding::Once})
    for (bool scaled : {false, true}) {
      const RopeScalingSpec sc = scaled ? lr : RopeScalingSpec{};
      const RopeTable partial(hd, positions, 10000.0f, sc, false, rounding, rd);
      const RopeTable small(rd, positions, 10000.0f, sc, false, rounding);
      ASSERT_EQ(partial.rows(), scaled ? 2 * positions : positions);
      for (DType t : {DType::F32, DType::F16, DType::BF16})
        for (int start : {0, 5, scaled ? positions + 9 : 20}) {
          const std::vector<float> x = test::normals(size_t(M) * heads * hd, rng, t, 3.0f);
          std::vector<float> got = x, sub(size_t(M) * heads * rd);
          for (size_t h = 0; h < size_t(M * heads); ++h)
            std::copy_n(x.begin() + std::ptrdiff_t(h * hd), rd, sub.begin() + std::ptrdiff_t(h * rd));
          apply_rope(got.data(), M, heads, start, partial, t);
          apply_rope(sub.data(), M, heads, start, small, t);
          for (size_t h = 0; h < size_t(M * heads); ++h)
            for (int i = 0; i < hd; ++i) {
              const float want = i < rd ? sub[h * rd + size_t(i)] : x[h * hd + size_t(i)];
              ASSERT_EQ(f32_bits(got[h * hd + size_t(i)]), f32_bits(want))
                  << dtype_name(t) << " row " << start << " head " << h << " dim " << i;
            }
        }
    }
  // The table's rows past the rotary pairs are the identity, and its long rows use the long set.
  const RopeTable t(hd, positions, 10000.0f, lr, false, RopeRounding::Terms, rd);
  EXPECT_EQ(t.long_rows(), positions);
  EXPECT_EQ(t.long_from(), 8);
  EXPECT_EQ(t.cos_row(3)[7], 1.0f);
  EXPECT_EQ(t.sin_row(3)[7], 0.0f);
  EXPECT_NE(t.cos_row(3)[5], t.cos_row(positions + 3)[5]);
  EXPECT_EQ(t.cos_row(3)[0], t.cos_row(positions + 3)[0]);  // both factors 1 there
  EXPECT_THROW(t.cos_row(2 * positions), std::out_of_range);
  EXPECT_THROW(RopeTable(hd, positions, 10000.0f, {}, false, RopeRounding::Terms, 13), std::invalid_argument);
  std::vector<float> adj(size_t(hd), 1.0f);
  EXPECT_THROW(apply_rope(adj.data(), 1, 1, 0, t, DType::F32, RopePairs::AdjacentPairs), std::invalid_argument);
}

// LongRoPE's frequencies as _compute_longrope_parameters computes them in fp32:
// 1.0 / (ext * base ** (arange(0, dim, 2) / dim)), the product rounded before the reciprocal.
TEST(PartialRotary, LongropeFrequenciesAreTransformersFp32Ones) {
  RopeScalingSpec lr;
  lr.type = RopeScalingSpec::Type::LongRope;
  lr.short_factors = {1.0f, 1.0625f, 1.5f};
  lr.long_factors = {1.0f, 3.25f, 17.5f};
  const std::vector<float> s = rope_inv_freq(6, 10000.0f, lr), l = rope_inv_freq(6, 10000.0f, lr, false, true);
  for (int i = 0; i < 3; ++i) {
    const float p = std::pow(10000.0f, float(2 * i) / 6.0f);
    EXPECT_EQ(f32_bits(s[size_t(i)]), f32_bits(1.0f / (lr.short_factors[size_t(i)] * p))) << i;
    EXPECT_EQ(f32_bits(l[size_t(i)]), f32_bits(1.0f / (lr.long_factors[size_t(i)] * p))) << i;
  }
}

}  // namespace
}  // namespace kvp
