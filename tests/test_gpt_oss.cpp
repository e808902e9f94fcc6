// GPT-OSS (GptOssForCausalLM): config.json as transformers reads it (defaults, refusals), the
// checkpoint's fused transposed experts unpacked, its clamped SwiGLU and top-k-then-softmax routing,
// and the whole forward pass against tests/gpt_oss_reference.py, an independent float64 numpy
// replay of transformers' eager GPT-OSS on a tiny checkpoint the script writes: every kernel policy
// in fp32 and the cached path step by step agree with it to 1e-5 of logits of scale ~4, while
// leaving out the sinks or the clamp moves them by more than 0.5. The invariance battery
// (test_invariant.cpp) and the portable digests (test_portable.cpp) take gpt_oss too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "gpt_oss_replay.h"
#include "io/checkpoint.h"
#include "io/hf_config.h"
#include "kernels/elementwise.h"
#include "kernels/portable_scalar.h"
#include "model/checkpoint_export.h"
#include "model/model.h"
#include "model/moe_names.h"
#include "model/moe_routing.h"
#include "model/synthetic.h"
#include "model/weights.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

using nlohmann::json;
using test::logits_of;
using test::max_diff;
using test::ReplayOf;

using GptOssReplay = ReplayOf<false>;

constexpr double kTolerance = 5e-5;  // fp32 against float64; the logits are of scale ~4

TEST_F(GptOssReplay, TheReplayExercisesSinksClampAndRouting) {
  ASSERT_FALSE(ref_->tokens.empty());
  // The check has teeth: without the sinks or the clamp the logits move far past the tolerance, the
  // clamp cuts values, and no row is near choosing other experts (so fp32 rounding cannot flip one).
  EXPECT_GT(ref_->stats["no_sinks_change"].get<double>(), 0.5);
  EXPECT_GT(ref_->stats["no_clamp_change"].get<double>(), 0.5);
  EXPECT_GT(ref_->stats["clamped"].get<int>(), 0);
  EXPECT_GT(ref_->stats["min_routing_margin"].get<double>(), 1e-3);
  EXPECT_GT(ref_->stats["sink_mass_max"].get<double>(), 0.1);
}

TEST_F(GptOssReplay, Fp32LogitsMatchTheReplayUnderEveryPolicy) {
  ASSERT_FALSE(ref_->tokens.empty());
  const Checkpoint ck = open_checkpoint(dir_->path());
  EXPECT_EQ(family_name(ck.config), "gpt_oss");
  auto model = Model::from_checkpoint(ck, DType::F32);
  for (KernelPolicy pol : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant,
                           KernelPolicy::Portable}) {
    const std::vector<float> l = logits_of(model, pol, ref_->tokens);
    EXPECT_LT(max_diff(l.data(), ref_->logits, 0, l.size()), kTolerance) << policy_name(pol);
  }
}

// The cached path: a prefill of 3, then one token a step past the window (4) of the even layers,
// each step's logits against the replay's row (split-KV decode attention folds the sinks in too).
TEST_F(GptOssReplay, CachedDecodeMatchesTheReplayStepByStep) {
  ASSERT_FALSE(ref_->tokens.empty());
  auto model = Model::from_checkpoint(open_checkpoint(dir_->path()), DType::F32);
  const size_t V = size_t(ref_->vocab);
  for (KernelPolicy pol : {KernelPolicy::Standard, KernelPolicy::Invariant}) {
    EngineOptions eo;
    eo.kernels = pol;
    eo.threads = 2;
    Engine e(model, eo);
    ForwardOptions fo;
    fo.all_logits = false;
    const int prefill = 3;
    const float* l = e.forward(ref_->tokens.data(), prefill, 0, fo);
    EXPECT_LT(max_diff(l, ref_->logits, (prefill - 1) * V, V), kTolerance) << policy_name(pol) << " prefill";
    for (int p = prefill; p < int(ref_->tokens.size()); ++p) {
      l = e.forward(ref_->tokens.data() + p, 1, p, fo);
      EXPECT_LT(max_diff(l, ref_->logits, size_t(p) * V, V), kTolerance) << policy_name(pol) << " position " << p;
    }
  }
}

// The same comparison fails when the model leaves out what the replay has: the sinks (set to
// -1e30, a zero share) or the clamp (a limit no value reaches).
TEST_F(GptOssReplay, WithoutSinksOrClampTheLogitsLeaveTheReplay) {
  ASSERT_FALSE(ref_->tokens.empty());
  Checkpoint ck = open_checkpoint(dir_->path());
  std::vector<std::shared_ptr<std::vector<float>>> keep;
  Checkpoint no_sinks = ck;
  for (auto& [name, t] : no_sinks.tensors)
    if (name.size() > 6 && name.compare(name.size() - 6, 6, ".sinks") == 0) {
      keep.push_back(std::make_shared<std::vector<float>>(size_t(t.numel()), -1e30f));
      t.dtype = DType::F32;
      t.data = keep.back()->data();
    }
  Checkpoint no_clamp = ck;
  no_clamp.config.moe.swiglu_limit = 1e30f;
  for (const Checkpoint* c : {&no_sinks, &no_clamp}) {
    const std::vector<float> l = logits_of(Model::from_checkpoint(*c, DType::F32), KernelPolicy::Reference, ref_->tokens);
    EXPECT_GT(max_diff(l.data(), ref_->logits, 0, l.size()), 0.5) << (c == &no_sinks ? "without sinks" : "without clamp");
  }
}

// bf16 (the published checkpoints' dtype) and fp16 stay near the float64 replay: rounding, not a different
// model (a dropped rounding point or op would not show here; the battery and digests pin the bits).
// (Measured: 0.30 in bf16, 0.026 in fp16, 8 times less for its 3 more mantissa bits.)
TEST_F(GptOssReplay, Fp16AndBf16StayNearTheReplay) {
  ASSERT_FALSE(ref_->tokens.empty());
  for (auto [dt, bound] : {std::pair{DType::BF16, 0.6}, std::pair{DType::F16, 0.1}}) {
    auto model = Model::from_checkpoint(open_checkpoint(dir_->path()), dt);
    const std::vector<float> l = logits_of(model, KernelPolicy::Reference, ref_->tokens);
    EXPECT_LT(max_diff(l.data(), ref_->logits, 0, l.size()), bound) << dtype_name(dt);
  }
}

// ---------------------------------------------------------------------------------------------

TEST(GptOssActivation, ClampedSwigluRoundsEachEagerOpAndKeepsNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> gate = {0.5f, 10.0f, -3.0f, 2.0f, nan, 1.0f};
  const std::vector<float> up = {0.25f, 1.0f, -10.0f, 9.0f, 0.0f, nan};
  std::vector<float> p = gate;
  clamped_swiglu(gate.data(), up.data(), gate.size(), 1.702f, 7.0f, DType::F32);
  auto want = [](float g, float u) {
    g = std::min(g, 7.0f);
    u = std::max(std::min(u, 7.0f), -7.0f);
    return (u + 1.0f) * (g * (1.0f / (1.0f + std::exp(-(g * 1.702f)))));
  };
  EXPECT_FLOAT_EQ(gate[0], want(0.5f, 0.25f));
  EXPECT_FLOAT_EQ(gate[1], want(7.0f, 1.0f));    // gate clamped from above only
  EXPECT_FLOAT_EQ(gate[2], want(-3.0f, -7.0f));  // up clamped from below
  EXPECT_FLOAT_EQ(gate[3], want(2.0f, 7.0f));    // and from above
  EXPECT_TRUE(std::isnan(gate[4]));
  EXPECT_TRUE(std::isnan(gate[5]));
  // bf16: each op rounded; the portable twin (its own exp) agrees here.
  std::vector<float> b = {0.5f, 3.0f, -1.25f};
  const std::vector<float> bu = {1.5f, -0.75f, 6.5f};
  std::vector<float> pb = b;
  clamped_swiglu(b.data(), bu.data(), b.size(), 1.702f, 7.0f, DType::BF16);
  for (size_t i = 0; i < b.size(); ++i) {
    const float g = pb[i], u = bu[i];
    const float s = round_to(DType::BF16, 1.0f / (1.0f + std::exp(-round_to(DType::BF16, g * 1.702f))));
    EXPECT_EQ(b[i], round_to(DType::BF16, round_to(DType::BF16, u + 1.0f) * round_to(DType::BF16, g * s))) << i;
    const auto round = [](float v) { return round_to(DType::BF16, v); };
    EXPECT_EQ(pscalar::clamped_swiglu(pb[i], bu[i], 1.702f, 7.0f, round), b[i]) << i;
  }
}

TEST(GptOssRouting, SoftmaxOverTheTopKLogitsAlone) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.0f, 3.0f, -1.0f, 3.0f, 0.5f};
  const ExpertRouting r = route_top_k_then_softmax(logits.data(), 2, 4, 2, DType::F32);
  EXPECT_EQ(r.expert[0], 1);
  EXPECT_EQ(r.expert[1], 2);
  const float e = std::exp(-1.0f);
  EXPECT_NEAR(r.weight[0], 1.0f / (1.0f + e), 1e-7);
  EXPECT_NEAR(r.weight[1], e / (1.0f + e), 1e-7);
  EXPECT_FLOAT_EQ(r.margin[0], 1.0f);
  EXPECT_EQ(r.expert[2], 0);  // a tie (3, 3) goes to the lower index, as the other routing
  EXPECT_EQ(r.expert[3], 2);
  EXPECT_FLOAT_EQ(r.weight[2], 0.5f);
  // Not the softmax over all experts renormalised... in fp32 the same up to rounding, but its
  // margin and choice are; in bf16 the weights are rounded to it.
  const ExpertRouting b = route_top_k_then_softmax(logits.data(), 1, 4, 2, DType::BF16);
  EXPECT_EQ(b.weight[0], round_to(DType::BF16, r.weight[0]));
  MoeConfig m;
  m.n_experts = 4;
  m.n_used = 2;
  m.routing = MoeConfig::Routing::TopKThenSoftmax;
  EXPECT_EQ(route_experts(logits.data(), 2, m, DType::F32).weight, r.weight);
}

// ---------------------------------------------------------------------------------------------

const char* const kMinimal = R"({"architectures":["GptOssForCausalLM"],"model_type":"gpt_oss","hidden_size":2880,
    "intermediate_size":2880,"num_hidden_layers":24,"num_attention_heads":64,"num_key_value_heads":8,
    "vocab_size":201088,"max_position_embeddings":131072)";

ModelConfig parse(const std::string& extra) {
  return parse_hf_config(std::string(kMinimal) + extra + "}", "config.json");
}

TEST(GptOssConfig, TransformersDefaultsAreGptOss20b) {
  const ModelConfig c = parse(R"(,"num_local_experts":32,"num_experts_per_tok":4)");
  EXPECT_EQ(c.arch, Arch::GptOss);
  EXPECT_EQ(family_name(c), "gpt_oss");
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.rope_theta, 150000.0f);
  EXPECT_EQ(c.norm_eps, 1e-5f);
  EXPECT_TRUE(c.qkv_bias && c.o_bias && c.attention_sinks);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(c.sliding_window, 128);
  EXPECT_EQ(c.sliding_window_period, 2);
  EXPECT_EQ(c.window_for_layer(0), 128);  // the even layers are the sliding ones
  EXPECT_EQ(c.window_for_layer(1), 0);
  EXPECT_EQ(c.rope_scaling, ModelConfig::RopeScaling::Yarn);
  EXPECT_EQ(c.rope_factor, 32.0f);
  EXPECT_EQ(c.rope_original_max_pos, 4096);
  EXPECT_FALSE(c.rope_yarn_truncate);
  EXPECT_NEAR(c.rope_attention_factor, 0.1 * std::log(32.0) + 1.0, 1e-12);
  EXPECT_EQ(c.moe.n_experts, 32);
  EXPECT_EQ(c.moe.n_used, 4);
  EXPECT_EQ(c.moe.expert_hidden_dim, 2880);
  EXPECT_EQ(c.moe.routing, MoeConfig::Routing::TopKThenSoftmax);
  EXPECT_EQ(c.moe.swiglu_limit, 7.0f);
  EXPECT_TRUE(c.norm_gain_in_fp32() && c.norm_gains_kept_in_fp32());
  const ModelConfig d = parse("");
  EXPECT_EQ(d.moe.n_experts, 128);  // GptOssConfig's own (gpt-oss-120b's)
  EXPECT_EQ(d.moe.n_used, 4);
  const ModelConfig n = parse(R"(,"attention_bias":false,"layer_types":)" + json(std::vector<std::string>(24, "full_attention")).dump());
  EXPECT_FALSE(n.qkv_bias || n.o_bias);
  EXPECT_TRUE(n.attention_sinks);
  EXPECT_EQ(n.sliding_window, 0);
}

TEST(GptOssConfig, RefusalsNameTheField) {
  EXPECT_NO_THROW(parse(R"(,"quantization_config":{"quant_method":"mxfp4"})"));  // the published form
  EXPECT_NE(test::error_of([] { parse(R"(,"quantization_config":{"quant_method":"fp8"})"); }).find("quant_method 'fp8'"),
            std::string::npos);
  EXPECT_NE(test::error_of([] { parse(R"(,"num_experts_per_tok":4,"experts_per_token":2)"); }).find("experts_per_token"),
            std::string::npos);
  EXPECT_NE(test::error_of([] { parse(R"(,"swiglu_limit":-1)"); }).find("swiglu_limit"), std::string::npos);
  std::vector<std::string> kinds(24, "sliding_attention");
  kinds[5] = "full_attention";
  EXPECT_NE(test::error_of([&] { parse(R"(,"layer_types":)" + json(kinds).dump()); }).find("layer_types"),
            std::string::npos);
  // Written back, config.json reads as the same model (GptOssConfig's fields, YaRN untruncated).
  test::TempDir tmp;
  const ModelConfig c = parse("");
  write_hf_config(tmp.file("config.json"), c, "bfloat16");
  std::ifstream in(tmp.file("config.json"));
  const ModelConfig back = parse_hf_config(std::string(std::istreambuf_iterator<char>(in), {}), "written");
  test::expect_same_gpt_oss_config(c, back);
  EXPECT_FALSE(back.rope_yarn_truncate);
}

// The unpacked experts are the fused tensors' columns.
TEST_F(GptOssReplay, FusedExpertsUnpackIntoEachExpertsRows) {
  ASSERT_FALSE(ref_->tokens.empty());
  const Checkpoint ck = open_checkpoint(dir_->path());
  const TensorView& g = ck.tensors.at("model.layers.1.mlp.experts.2.gate_proj.weight");
  const TensorView& u = ck.tensors.at("model.layers.1.mlp.experts.2.up_proj.weight");
  const TensorView& d = ck.tensors.at("model.layers.1.mlp.experts.2.down_proj.weight");
  const TensorView& ub = ck.tensors.at("model.layers.1.mlp.experts.2.up_proj.bias");
  EXPECT_EQ(g.shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(d.shape, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(ck.tensors.count("model.layers.1.mlp.experts.gate_up_proj"), 0u);
  // Against the file's own bytes: gate_up_proj[e][h][2j] is gate row j, column h.
  std::ifstream f(dir_->file("model.safetensors"), std::ios::binary);
  uint64_t hlen = 0;
  f.read(reinterpret_cast<char*>(&hlen), 8);
  std::string header(hlen, ' ');
  f.read(header.data(), std::streamsize(hlen));
  const json h = json::parse(header);
  auto value = [&](const std::string& name, size_t index) {
    float v = 0.0f;
    f.seekg(std::streamoff(8 + hlen + h[name]["data_offsets"][0].get<uint64_t>() + 4 * index));
    f.read(reinterpret_cast<char*>(&v), 4);
    return v;
  };
  const auto* gv = static_cast<const float*>(g.data);
  const auto* uv = static_cast<const float*>(u.data);
  const auto* dv = static_cast<const float*>(d.data);
  const std::string gu = "model.layers.1.mlp.experts.gate_up_proj";
  for (auto [j, c] : {std::pair{0, 0}, std::pair{5, 17}, std::pair{31, 63}}) {
    EXPECT_EQ(gv[j * 64 + c], value(gu, (size_t(2) * 64 + size_t(c)) * 64 + 2 * size_t(j)));
    EXPECT_EQ(uv[j * 64 + c], value(gu, (size_t(2) * 64 + size_t(c)) * 64 + 2 * size_t(j) + 1));
    EXPECT_EQ(dv[c * 32 + j], value("model.layers.1.mlp.experts.down_proj", (size_t(2) * 32 + size_t(j)) * 64 + size_t(c)));
  }
  EXPECT_EQ(static_cast<const float*>(ub.data)[3], value("model.layers.1.mlp.experts.gate_up_proj_bias", 2 * 64 + 7));

}


// A copy of `src`'s checkpoint in `dst` with tensor `from` renamed `to` (its header entry moved),
// or with `to` beside it (`keep`: a second entry for the same bytes).
void copy_with_renamed_tensor(const std::string& src, const std::string& dst, const std::string& from,
                              const std::string& to, bool keep = false) {
  std::filesystem::create_directories(dst);
  std::filesystem::copy_file(src + "/config.json", dst + "/config.json");
  std::ifstream in(src + "/model.safetensors", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t hlen = 0;
  std::memcpy(&hlen, bytes.data(), 8);
  json h = json::parse(bytes.substr(8, hlen));
  h[to] = h[from];
  if (!keep) h.erase(from);
  std::string nh = h.dump();
  nh += std::string((8 - nh.size() % 8) % 8, ' ');
  const uint64_t nlen = nh.size();
  std::ofstream out(dst + "/model.safetensors", std::ios::binary);
  out.write(reinterpret_cast<const char*>(&nlen), 8);
  out << nh << bytes.substr(8 + hlen);
}

// The published checkpoints' form: experts as MXFP4 blocks and scales (U8), repacked on load into
// ggml MXFP4 matrices that stay 4.25 bits a weight; the replay runs on the blocks' exact values.
using GptOssMxfp4Replay = ReplayOf<true>;

TEST_F(GptOssMxfp4Replay, ExpertsStayMxfp4AndTheLogitsMatchTheReplay) {
  ASSERT_FALSE(ref_->tokens.empty());
  EXPECT_GT(ref_->stats["min_routing_margin"].get<double>(), 1e-3);
  EXPECT_GT(ref_->stats["no_clamp_change"].get<double>(), 0.5);
  const Checkpoint ck = open_checkpoint(dir_->path());
  EXPECT_TRUE(ck.byte_tensors.empty());
  for (const char* m : {"gate_proj", "up_proj", "down_proj"}) {
    const TensorView& t = ck.tensors.at(std::string("model.layers.3.mlp.experts.1.") + m + ".weight");
    EXPECT_EQ(t.quant, QuantType::MXFP4) << m;
  }
  auto model = Model::from_checkpoint(ck, DType::F32);
  for (KernelPolicy pol : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant,
                           KernelPolicy::Portable}) {
    const std::vector<float> l = logits_of(model, pol, ref_->tokens);
    EXPECT_LT(max_diff(l.data(), ref_->logits, 0, l.size()), kTolerance) << policy_name(pol);
  }
  const std::vector<float> b = logits_of(Model::from_checkpoint(ck, DType::BF16), KernelPolicy::Standard, ref_->tokens);
  EXPECT_LT(max_diff(b.data(), ref_->logits, 0, b.size()), 0.6);
}

TEST_F(GptOssMxfp4Replay, AMissingOrStrayBlockTensorOrAnotherMethodIsRefusedByName) {
  ASSERT_FALSE(ref_->tokens.empty());
  const std::string p = "model.layers.2.mlp.experts.";
  copy_with_renamed_tensor(dir_->path(), dir_->file("missing"), p + "down_proj_scales", p + "down_proj_scalez");
  std::string err = test::error_of([&] { open_checkpoint(dir_->file("missing")); });
  EXPECT_NE(err.find("missing tensor '" + p + "down_proj_scales'"), std::string::npos) << err;
  // A U8 tensor nothing reads is refused by its dtype, naming it.
  copy_with_renamed_tensor(dir_->path(), dir_->file("stray"), "model.layers.1.mlp.experts.gate_up_proj_blocks",
                           "model.layers.1.extra_blocks", true);
  err = test::error_of([&] { open_checkpoint(dir_->file("stray")); });
  EXPECT_NE(err.find("'model.layers.1.extra_blocks' has dtype U8"), std::string::npos) << err;
  // A per-expert tensor beside the blocks (a copy of the router's bias under expert 1's up bias)
  // would be overwritten by the repacking: refused, naming both.
  copy_with_renamed_tensor(dir_->path(), dir_->file("both"), "model.layers.0.mlp.router.bias",
                           "model.layers.0.mlp.experts.1.up_proj.bias", true);
  err = test::error_of([&] { open_checkpoint(dir_->file("both")); });
  EXPECT_NE(err.find("'model.layers.0.mlp.experts.1.up_proj.bias'"), std::string::npos) << err;
  EXPECT_NE(err.find("gate_up_proj_blocks"), std::string::npos) << err;
  // Any quant_method but mxfp4 is refused by name.
  json cfg = json::parse(std::ifstream(dir_->file("config.json")));
  cfg["quantization_config"]["quant_method"] = "fp8";
  std::filesystem::create_directories(dir_->file("fp8"));
  std::ofstream(dir_->file("fp8") + "/config.json") << cfg.dump();
  std::filesystem::copy_file(dir_->file("model.safetensors"), dir_->file("fp8") + "/model.safetensors");
  err = test::error_of([&] { open_checkpoint(dir_->file("fp8")); });
  EXPECT_NE(err.find("quant_method 'fp8'"), std::string::npos) << err;
}

TEST(GptOssSynthetic, TheTinyPresetAndTheRealShapesValidate) {
  const ModelConfig t = synthetic_config("gpt_oss", "tiny");
  EXPECT_EQ(t.arch, Arch::GptOss);
  EXPECT_TRUE(t.attention_sinks && t.o_bias && t.qkv_bias);
  const ModelConfig r = synthetic_config("gpt_oss", "gpt-oss-20b");
  EXPECT_EQ(r.moe.n_experts, 32);
  EXPECT_EQ(r.q_dim(), 4096);  // 64 heads of 64: wider than hidden_size (2880)
  // Its weights hold what the loader requires (the same builder checks every tensor).
  const Checkpoint ck = synthetic_shapes(r, DType::BF16);
  EXPECT_NO_THROW(weights_footprint(ck, DType::BF16));
}

// The fused expert tensors of one layer hold the same shapes, dtypes and bytes in both files (the
// dequantised form's, or with `mxfp4` the published form's blocks and scales).
void expect_same_fused_experts(const std::string& want_file, const std::string& got_file, bool mxfp4 = false) {
  const auto read = [](const std::string& f, json& header) {
    std::ifstream in(f, std::ios::binary);
    const std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    uint64_t n = 0;
    std::memcpy(&n, b.data(), 8);
    header = json::parse(b.substr(8, n));
    return b.substr(8 + n);
  };
  json wh, gh;
  const std::string wd = read(want_file, wh), gd = read(got_file, gh);
  const std::vector<std::string> names =
      mxfp4 ? std::vector<std::string>{"gate_up_proj_blocks", "gate_up_proj_scales", "gate_up_proj_bias",
                                       "down_proj_blocks", "down_proj_scales", "down_proj_bias"}
            : std::vector<std::string>{"gate_up_proj", "gate_up_proj_bias", "down_proj", "down_proj_bias"};
  for (const std::string& t : names) {
    const std::string n = "model.layers.3.mlp.experts." + t;
    ASSERT_TRUE(gh.contains(n)) << n;
    EXPECT_EQ(gh[n]["shape"], wh[n]["shape"]) << n;
    EXPECT_EQ(gh[n]["dtype"], wh[n]["dtype"]) << n;
    const std::vector<size_t> w = wh[n]["data_offsets"], g = gh[n]["data_offsets"];
    EXPECT_EQ(gd.substr(g[0], g[1] - g[0]), wd.substr(w[0], w[1] - w[0])) << n;
  }
}

// An HF directory written by kvparity is GPT-OSS's own layout again: the experts fused and
// transposed as GptOssExperts holds them, or (the MXFP4 form) as blocks and scales with the
// published quantization_config; bytes equal to the replay's file; the same logits bit for bit.
template <bool kMxfp4>
void expect_hf_round_trip(const std::string& dir, const std::vector<int>& tokens) {
  const Checkpoint src = open_checkpoint(dir);
  test::TempDir tmp;
  const std::string out = tmp.file("hf");
  export_checkpoint(src, "hf", out);
  const Checkpoint back = open_checkpoint(out);
  test::expect_same_gpt_oss_config(src.config, back.config);
  for (DType dt : {DType::F32, DType::BF16}) {
    const auto a = logits_of(Model::from_checkpoint(src, dt), KernelPolicy::Standard, tokens);
    const auto b = logits_of(Model::from_checkpoint(back, dt), KernelPolicy::Standard, tokens);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << dtype_name(dt);
  }
  expect_same_fused_experts(dir + "/model.safetensors", out + "/model.safetensors", kMxfp4);
  const json cfg = test::read_json(out + "/config.json");
  EXPECT_EQ(cfg.contains("quantization_config"), kMxfp4);
  if (kMxfp4) EXPECT_EQ(cfg["quantization_config"]["quant_method"], "mxfp4");
  for (const auto& [name, t] : back.tensors)
    if (name.find(".experts.") != std::string::npos && name.find("bias") == std::string::npos)
      ASSERT_EQ(t.quant, kMxfp4 ? QuantType::MXFP4 : QuantType::None) << name;
}

TEST_F(GptOssReplay, HfDirectoryRoundTripsItsLayoutAndLogits) {
  ASSERT_FALSE(ref_->tokens.empty());
  expect_hf_round_trip<false>(dir_->path(), ref_->tokens);
  // llama.cpp's GGUF of it written back as an HF directory: the same model again.
  test::TempDir tmp;
  export_checkpoint(open_checkpoint(dir_->path() + "/model.gguf"), "hf", tmp.file("from_gguf"));
  const auto a = logits_of(Model::from_checkpoint(open_checkpoint(dir_->path()), DType::F32), KernelPolicy::Standard,
                           ref_->tokens);
  const auto b = logits_of(Model::from_checkpoint(open_checkpoint(tmp.file("from_gguf")), DType::F32),
                           KernelPolicy::Standard, ref_->tokens);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

TEST_F(GptOssMxfp4Replay, HfDirectoryOfTheMxfp4FormKeepsItsBlocksAndIsTheSameModel) {
  ASSERT_FALSE(ref_->tokens.empty());
  expect_hf_round_trip<true>(dir_->path(), ref_->tokens);
  const Checkpoint src = open_checkpoint(dir_->path());
  test::TempDir tmp;
  // Through llama.cpp's GGUF (its experts MXFP4 blocks) and back: the published form's bytes again.
  export_checkpoint(src, "gguf", tmp.file("m.gguf"));
  export_checkpoint(open_checkpoint(tmp.file("m.gguf")), "hf", tmp.file("from_gguf"));
  expect_same_fused_experts(dir_->path() + "/model.safetensors", tmp.file("from_gguf") + "/model.safetensors", true);
  // A dtype asked for dequantises the experts, into the fused form, still the same model in fp32.
  ExportOptions eo;
  eo.dtype = DType::F32;
  export_checkpoint(src, "hf", tmp.file("deq"), eo);
  const Checkpoint deq = open_checkpoint(tmp.file("deq"));
  EXPECT_FALSE(test::read_json(tmp.file("deq") + "/config.json").contains("quantization_config"));
  EXPECT_EQ(deq.tensors.at(expert_matrix_name(deq.config, 3, 0, ExpertMatrix::Down)).quant, QuantType::None);
  const auto a = logits_of(Model::from_checkpoint(src, DType::F32), KernelPolicy::Standard, ref_->tokens);
  const auto b = logits_of(Model::from_checkpoint(deq, DType::F32), KernelPolicy::Standard, ref_->tokens);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

// What config.json cannot say is refused before a byte is written.
TEST(GptOssSynthetic, AModelGptOssConfigCannotSayIsRefusedBeforeWriting) {
  test::TempDir tmp;
  Checkpoint ck = synthesize_checkpoint(synthetic_config("gpt_oss", "tiny"), DType::F32);
  ck.config.sliding_window_period = 3;
  const std::string out = tmp.file("hf");
  const std::string e = test::error_of([&] { export_checkpoint(ck, "hf", out); });
  EXPECT_NE(e.find("every other layer"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(out + "/model.safetensors"));
  const test::CliRun r = test::run_kvparity("synth --arch gpt_oss --format hf --out " + test::q(tmp.file("synth")));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(family_name(open_checkpoint(tmp.file("synth")).config), "gpt_oss");
}

}  // namespace
}  // namespace kvp
