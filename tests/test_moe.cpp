// Mixtures of experts (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE): the routing as transformers decides it,
// config.json read and written, tensors required with their shapes, the sparse layers really
// routing (each expert's rows, the router hook, patching a router), and the refusals. The
// transformers reference outputs are test_family_reference.cpp's, the invariance battery
// test_invariant.cpp's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "cli_run.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/hf_config.h"
#include "model/checkpoint_export.h"
#include "model/model.h"
#include "model/moe_names.h"
#include "model/moe_routing.h"
#include "model/synthetic.h"
#include "runtime/generator.h"
#include "reference_files.h"
#include "test_util.h"

namespace kvp {
namespace {

const char* const kMoeFamilies[] = {"mixtral", "qwen2_moe", "qwen3_moe", "olmoe"};


TEST(MoeRouting, TopKLargestFirstRenormalisedAndRoundedToTheComputeDtype) {
  // Row 0: experts 2 > 0 > 3 > 1; row 1: a tie between 1 and 3 for second place.
  const std::vector<float> logits = {1.0f, -2.0f, 3.0f, 0.5f, /**/ 0.0f, 2.0f, 4.0f, 2.0f};
  const ExpertRouting r = route_experts(logits.data(), 2, 4, 2, true, DType::F32);
  EXPECT_EQ(r.expert, (std::vector<int>{2, 0, 2, 1}));
  // Softmax then renormalisation over the two chosen: exp(3) / (exp(3) + exp(1)).
  const double w0 = std::exp(3.0) / (std::exp(3.0) + std::exp(1.0));
  EXPECT_NEAR(r.weight[0], w0, 1e-7);
  EXPECT_NEAR(r.weight[1], 1.0 - w0, 1e-7);
  EXPECT_NEAR(r.weight[2] + r.weight[3], 1.0, 1e-6);
  EXPECT_FLOAT_EQ(r.margin[0], 1.0f - 0.5f);  // 2nd largest logit minus 3rd
  EXPECT_FLOAT_EQ(r.margin[1], 0.0f);         // the tie
  // Each expert's rows, ascending, with the row's weight for it.
  EXPECT_EQ(r.rows_of[2], (std::vector<int>{0, 1}));
  EXPECT_EQ(r.rows_of[0], (std::vector<int>{0}));
  EXPECT_EQ(r.rows_of[1], (std::vector<int>{1}));
  EXPECT_TRUE(r.rows_of[3].empty());
  EXPECT_EQ(r.weight_of[2], (std::vector<float>{r.weight[0], r.weight[2]}));

  // Without renormalisation the weights are the softmax's own (Qwen-MoE's norm_topk_prob false).
  const ExpertRouting raw = route_experts(logits.data(), 1, 4, 2, false, DType::F32);
  const double z = std::exp(1.0) + std::exp(-2.0) + std::exp(3.0) + std::exp(0.5);
  EXPECT_NEAR(raw.weight[0], std::exp(3.0) / z, 1e-7);
  EXPECT_NEAR(raw.weight[1], std::exp(1.0) / z, 1e-7);

  // In bf16 the weights are bf16 values (routing_weights.to(hidden_states.dtype)).
  const ExpertRouting b = route_experts(logits.data(), 2, 4, 2, true, DType::BF16);
  for (float w : b.weight) EXPECT_EQ(w, round_to(DType::BF16, w));
  EXPECT_NE(b.weight[0], r.weight[0]);

  // All experts chosen: no margin to another one.
  EXPECT_TRUE(std::isinf(route_experts(logits.data(), 1, 4, 4, true, DType::F32).margin[0]));
  std::vector<float> nan = logits;
  nan[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(test::error_of([&] { route_experts(nan.data(), 2, 4, 2, true, DType::F32); }).find("row 1 is NaN"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { route_experts(logits.data(), 2, 4, 5, true, DType::F32); }).find("5 experts per row"),
            std::string::npos);
}

TEST(MoeConfig, ConfigJsonRoundTripsAndNamesTheTensors) {
  for (const char* fam : kMoeFamilies) {
    const ModelConfig c = synthetic_config(fam, "tiny");
    EXPECT_EQ(family_name(c), fam);
    EXPECT_TRUE(c.is_moe());
    test::TempDir t;
    write_hf_config(t.file("config.json"), c);
    const ModelConfig back = read_hf_config(t.file("config.json"));
    EXPECT_EQ(family_name(back), fam);
    EXPECT_EQ(back.arch, c.arch);
    EXPECT_EQ(back.moe.n_experts, c.moe.n_experts) << fam;
    EXPECT_EQ(back.moe.n_used, c.moe.n_used) << fam;
    EXPECT_EQ(back.moe.expert_hidden_dim, c.moe.expert_hidden_dim) << fam;
    EXPECT_EQ(back.moe.shared_hidden_dim, c.moe.shared_hidden_dim) << fam;
    EXPECT_EQ(back.moe.norm_topk_prob, c.moe.norm_topk_prob) << fam;
    EXPECT_EQ(back.moe.dense_layers, c.moe.dense_layers) << fam;
    EXPECT_EQ(back.hidden_dim, c.hidden_dim) << fam;
    EXPECT_EQ(back.sliding_window, c.sliding_window) << fam;
    for (int l = 0; l < c.n_layers; ++l) EXPECT_EQ(back.moe_layer(l), c.moe_layer(l)) << fam << " layer " << l;
  }
  const ModelConfig mx = synthetic_config("mixtral", "tiny");
  EXPECT_EQ(expert_matrix_name(mx, 3, 1, ExpertMatrix::Up), "model.layers.3.block_sparse_moe.experts.1.w3.weight");
  EXPECT_EQ(moe_router_name(mx, 0), "model.layers.0.block_sparse_moe.gate.weight");
  const ModelConfig q = synthetic_config("qwen2_moe", "tiny");
  EXPECT_EQ(expert_matrix_name(q, 0, 7, ExpertMatrix::Down), "model.layers.0.mlp.experts.7.down_proj.weight");
  EXPECT_FALSE(q.moe_layer(1));  // mlp_only_layers [1]
  EXPECT_TRUE(q.moe_layer(2));
}

TEST(MoeConfig, TransformersDefaultsAndRefusals) {
  auto parse = [](const std::string& body) { return parse_hf_config(body, "config.json"); };
  const std::string base = R"("hidden_size":64,"intermediate_size":96,"num_hidden_layers":4,"num_attention_heads":4,
      "num_key_value_heads":2,"vocab_size":512,"max_position_embeddings":512)";
  // Mixtral's class defaults: 8 experts, 2 a token, renormalised, every layer sparse.
  const ModelConfig m = parse(R"({"model_type":"mixtral",)" + base + "}");
  EXPECT_EQ(m.arch, Arch::Mistral);
  EXPECT_EQ(m.moe.n_experts, 8);
  EXPECT_EQ(m.moe.n_used, 2);
  EXPECT_EQ(m.moe.expert_hidden_dim, 96);
  EXPECT_TRUE(m.moe.norm_topk_prob);
  // By class name alone, and Qwen3-MoE's defaults: 128 experts, 8 a token, 768 wide, not renormalised.
  const ModelConfig q3 = parse(R"({"architectures":["Qwen3MoeForCausalLM"],)" + base + "}");
  EXPECT_EQ(q3.arch, Arch::Qwen3);
  EXPECT_EQ(q3.moe.n_experts, 128);
  EXPECT_EQ(q3.moe.n_used, 8);
  EXPECT_EQ(q3.moe.expert_hidden_dim, 768);
  EXPECT_FALSE(q3.moe.norm_topk_prob);
  EXPECT_EQ(q3.moe.shared_hidden_dim, 0);
  // Qwen2-MoE: decoder_sparse_step 2 makes layers 1 and 3 sparse; mlp_only_layers takes 3 out.
  const ModelConfig q2 = parse(R"({"model_type":"qwen2_moe","decoder_sparse_step":2,"mlp_only_layers":[3],)" + base + "}");
  EXPECT_TRUE(q2.qkv_bias);
  EXPECT_EQ(q2.moe.shared_hidden_dim, 5632);
  EXPECT_FALSE(q2.moe_layer(0));
  EXPECT_TRUE(q2.moe_layer(1));
  EXPECT_FALSE(q2.moe_layer(2));
  EXPECT_FALSE(q2.moe_layer(3));
  // OLMoE's: 64 experts, 8 a token, intermediate_size wide, every layer sparse, not renormalised;
  // its attention Llama's with q/k normalised over the whole projection.
  const ModelConfig oe = parse(R"({"model_type":"olmoe","eos_token_id":2,)" + base + "}");
  EXPECT_EQ(oe.arch, Arch::Olmoe);
  EXPECT_EQ(family_name(oe), "olmoe");
  EXPECT_EQ(oe.moe.n_experts, 64);
  EXPECT_EQ(oe.moe.n_used, 8);
  EXPECT_EQ(oe.moe.expert_hidden_dim, 96);
  EXPECT_FALSE(oe.moe.norm_topk_prob);
  EXPECT_TRUE(oe.qk_norm() && !oe.qk_norm_per_head() && oe.pre_norms() && !oe.post_norms());
  EXPECT_FLOAT_EQ(oe.norm_eps, 1e-5f);
  for (int l = 0; l < 4; ++l) EXPECT_TRUE(oe.moe_layer(l));

  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"model_type":"mixtral","num_local_experts":4,"num_experts_per_tok":5,)" + base + "}", "5 experts per token of 4"},
      {R"({"model_type":"mixtral","num_local_experts":0,)" + base + "}", "no experts"},
      {R"({"model_type":"qwen3_moe","mlp_only_layers":[4],)" + base + "}", "mlp_only_layers"},
      {R"({"model_type":"qwen3_moe","mlp_only_layers":7,)" + base + "}", "mlp_only_layers"},
      {R"({"model_type":"qwen3_moe","norm_topk_prob":1,)" + base + "}", "norm_topk_prob"},
      {R"({"model_type":"qwen3_moe","decoder_sparse_step":0,)" + base + "}", "decoder_sparse_step"},
      {R"({"model_type":"qwen3_moe","shared_expert_intermediate_size":64,)" + base + "}", "no shared expert"},
      {R"({"model_type":"qwen2_moe","num_experts_per_tok":-1,)" + base + "}", "num_experts_per_tok"},
      {R"({"model_type":"olmoe","clip_qkv":8.0,)" + base + "}", "clip_qkv"},
      {R"({"model_type":"olmoe","num_experts":0,)" + base + "}", "no experts"},
      // A dense family's config with expert fields is still refused (it would run without them).
      {R"({"model_type":"llama","num_local_experts":8,)" + base + "}", "mixture-of-experts"},
  };
  for (const auto& [config, want] : bad) {
    const std::string& body = config;  // a name the lambda may capture (clang 14: no structured bindings)
    const std::string e = test::error_of([&] { parse(body); });
    EXPECT_NE(e.find(want), std::string::npos) << body << "\n -> " << e;
  }
}

TEST(MoeWeights, ExpertTensorsAreRequiredWithTheirShapes) {
  for (const char* fam : kMoeFamilies) {
    const Checkpoint ck = synthesize_checkpoint(synthetic_config(fam, "tiny"), DType::F32);
    const ModelConfig& c = ck.config;
    const int sparse = c.moe_layer(0) ? 0 : 1;
    for (const std::string name : {moe_router_name(c, sparse), expert_matrix_name(c, sparse, 3, ExpertMatrix::Down)}) {
      Checkpoint missing = ck;
      missing.tensors.erase(name);
      EXPECT_NE(test::error_of([&] { Model::from_checkpoint(missing, DType::F32); }).find("missing tensor '" + name + "'"),
                std::string::npos)
          << fam;
      Checkpoint wrong = ck;
      wrong.tensors[name].shape[0] -= 1;
      EXPECT_NE(test::error_of([&] { Model::from_checkpoint(wrong, DType::F32); }).find("tensor '" + name + "' has shape"),
                std::string::npos)
          << fam;
    }
    // A sparse layer reads no dense MLP, a dense one no router.
    for (int l = 0; l < c.n_layers; ++l)
      EXPECT_EQ(ck.tensors.count("model.layers." + std::to_string(l) + ".mlp.gate_proj.weight") == 1, !c.moe_layer(l))
          << fam << " layer " << l;
  }
}

// Captures every sparse layer's router logits (all rows, in pass order).
struct RouterCapture final : ForwardHooks {
  std::map<int, std::vector<float>> logits;
  int width = 0;
  bool wants(HookPoint p, int) const override { return p == HookPoint::RouterLogits; }
  bool writes(HookPoint, int) const override { return false; }
  void on(const HookSite& s, float* d) override {
    auto& v = logits[s.layer];
    v.insert(v.end(), d, d + size_t(s.rows) * s.width);
    width = s.width;
  }
};

TEST(MoeForward, SparseLayersRouteEveryExpertAndTheRouterHookSteersThem) {
  for (const char* fam : kMoeFamilies) {
    auto model = Model::from_checkpoint(synthesize_checkpoint(synthetic_config(fam, "tiny"), DType::F32), DType::F32);
    const ModelConfig& c = model->config;
    std::vector<int> toks;
    for (int i = 0; i < 40; ++i) toks.push_back(3 + (i * 37) % (c.vocab_size - 3));
    EngineOptions eo;
    eo.kernels = KernelPolicy::Reference;
    RouterCapture cap;
    ForwardOptions fo;
    fo.hooks = &cap;
    Engine e(model, eo);
    e.forward(toks.data(), int(toks.size()), 0, fo);
    // Every sparse layer reports its router, and the tokens reach every expert somewhere.
    int sparse = 0;
    for (int l = 0; l < c.n_layers; ++l) sparse += c.moe_layer(l);
    ASSERT_EQ(int(cap.logits.size()), sparse) << fam;
    EXPECT_EQ(cap.width, c.moe.n_experts);
    for (const auto& [l, v] : cap.logits) {
      const int rows = int(v.size() / size_t(c.moe.n_experts));
      const ExpertRouting r = route_experts(v.data(), rows, c.moe.n_experts, c.moe.n_used, c.moe.norm_topk_prob,
                                            DType::F32);
      int used = 0;
      for (const auto& rows_of : r.rows_of) used += !rows_of.empty();
      EXPECT_EQ(used, c.moe.n_experts) << fam << " layer " << l;
    }
  }
}

// Overwriting a router's logits (patching) changes which experts run, and so the output; leaving
// them as they are changes nothing.
struct RouterSteer final : ForwardHooks {
  int layer = -1, expert = 0;
  bool wants(HookPoint p, int l) const override { return p == HookPoint::RouterLogits && l == layer; }
  void on(const HookSite& s, float* d) override {
    for (int r = 0; r < s.rows; ++r)
      for (int e = 0; e < s.width; ++e) d[size_t(r) * s.width + e] = e == expert ? 1.0f : 0.0f;
  }
};

// The router logits of every sparse layer against transformers' (router_logits.f32, hooks on the
// routers' Linear), and the experts they choose: the same as transformers' at every row (the
// references' smallest top-k gap is 7e-4, the fp32 router error ~4e-6).
TEST(MoeForward, RouterLogitsAndChosenExpertsMatchTransformers) {
  for (const char* fam : kMoeFamilies) {
    KVP_REQUIRE_REFERENCE(dir, fam);
    auto model = Model::load(dir, DType::F32);
    const ModelConfig& c = model->config;
    const auto tokens = test::read_json(dir + "/tokens.json")["input_ids"].get<std::vector<int>>();
    const auto ref = test::read_f32(dir + "/router_logits.f32");
    const int E = c.moe.n_experts, T = int(tokens.size());
    for (KernelPolicy pol : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant}) {
      EngineOptions eo;
      eo.kernels = pol;
      Engine e(model, eo);
      RouterCapture cap;
      ForwardOptions fo;
      fo.hooks = &cap;
      e.forward(tokens.data(), T, 0, fo);
      ASSERT_EQ(ref.size(), cap.logits.size() * size_t(T) * E) << fam;
      size_t i = 0;
      for (const auto& [l, got] : cap.logits) {
        const float* want = ref.data() + i++ * size_t(T) * E;
        EXPECT_LE(test::max_abs_diff(got.data(), want, got.size()), 1e-4) << fam << " layer " << l;
        const ExpertRouting a = route_experts(got.data(), T, E, c.moe.n_used, c.moe.norm_topk_prob, DType::F32);
        const ExpertRouting b = route_experts(want, T, E, c.moe.n_used, c.moe.norm_topk_prob, DType::F32);
        EXPECT_EQ(a.expert, b.expert) << fam << " layer " << l << " " << policy_name(pol);
      }
    }
  }
}

TEST(MoeForward, RouterPatchingChangesTheOutputAndAFaithfulHookDoesNot) {
  for (const char* fam : kMoeFamilies) {
    auto model = Model::from_checkpoint(synthesize_checkpoint(synthetic_config(fam, "tiny"), DType::F32), DType::F32);
    const ModelConfig& c = model->config;
    const std::vector<int> toks = {1, 40, 41, 300, 7, 99, 250, 12};
    EngineOptions eo;
    eo.kernels = KernelPolicy::Invariant;
    auto run = [&](ForwardHooks* h) {
      Engine e(model, eo);
      ForwardOptions fo;
      fo.hooks = h;
      const float* l = e.forward(toks.data(), int(toks.size()), 0, fo);
      return std::vector<float>(l, l + toks.size() * size_t(c.vocab_size));
    };
    const std::vector<float> plain = run(nullptr);
    RouterCapture cap;
    EXPECT_SAME_BITS(run(&cap), plain, std::string(fam) + ": capturing the router");
    RouterSteer steer;
    steer.layer = c.moe_layer(0) ? 0 : 1;
    const std::vector<float> steered = run(&steer);
    EXPECT_GT(test::max_abs_diff(steered, plain), 1e-3) << fam;
  }
}

// A router logit that is not finite leaves no choice of experts: the pass stops naming the router,
// its layer and the position, whatever the NaN/Inf policy (a policy that records overflows and
// goes on has nothing to go on with here).
struct RouterPoison final : ForwardHooks {
  int layer = 0;
  float value = 0.0f;
  bool wants(HookPoint p, int l) const override { return p == HookPoint::RouterLogits && l == layer; }
  void on(const HookSite& s, float* d) override { d[size_t(s.rows - 1) * s.width + 1] = value; }
};

TEST(MoeForward, ANonFiniteRouterLogitStopsThePassNamingItUnderEveryPolicy) {
  auto model = Model::from_checkpoint(synthesize_checkpoint(synthetic_config("mixtral", "tiny"), DType::F16), DType::F16);
  const std::vector<int> toks = {1, 40, 41, 300};
  for (const NonFinitePolicy policy : {NonFinitePolicy::Error, NonFinitePolicy::Warn})
    for (const float bad : {INFINITY, NAN}) {
      Engine e(model, EngineOptions{});
      RouterPoison poison;
      poison.layer = 2;
      poison.value = bad;
      ForwardOptions fo;
      fo.hooks = &poison;
      fo.on_nonfinite = policy;
      const std::string err = test::error_of([&] { e.forward(toks.data(), int(toks.size()), 0, fo); });
      EXPECT_NE(err.find("'router_logits' at layer 2, position 3, element 1"), std::string::npos) << err;
      EXPECT_NE(err.find("experts cannot be chosen"), std::string::npos) << err;
    }
}

// HF directory and GGUF file (the experts stacked as llama.cpp's ffn_*_exps, the router
// ffn_gate_inp, Qwen2-MoE's shared expert *_shexp) both read back to the same bits.
TEST(MoeForward, HfAndGgufExportsReloadToTheSameBits) {
  for (const char* fam : kMoeFamilies) {
    for (DType dt : {DType::F32, DType::BF16}) {
      const Checkpoint ck = synthesize_checkpoint(synthetic_config(fam, "tiny"), dt);
      test::TempDir t;
      export_checkpoint(ck, "hf", t.file("m"), ExportOptions{});
      export_checkpoint(ck, "gguf", t.file("m.gguf"), ExportOptions{});
      auto a = Model::from_checkpoint(ck, dt);
      const std::vector<int> toks = {1, 5, 9, 200, 17, 3};
      auto logits = [&](const std::shared_ptr<const Model>& m) {
        Engine e(m, EngineOptions{});
        const float* l = e.forward(toks.data(), int(toks.size()), 0, ForwardOptions{});
        return std::vector<float>(l, l + toks.size() * size_t(m->config.vocab_size));
      };
      const std::vector<float> want = logits(a);
      for (const std::string file : {t.file("m"), t.file("m.gguf")}) {
        const Checkpoint back = open_checkpoint(file);
        const ModelConfig& c = back.config;
        EXPECT_EQ(family_name(c), fam) << file;
        EXPECT_EQ(c.moe.n_experts, ck.config.moe.n_experts) << file;
        EXPECT_EQ(c.moe.n_used, ck.config.moe.n_used) << file;
        EXPECT_EQ(c.moe.expert_hidden_dim, ck.config.moe.expert_hidden_dim) << file;
        EXPECT_EQ(c.moe.shared_hidden_dim, ck.config.moe.shared_hidden_dim) << file;
        EXPECT_EQ(c.moe.norm_topk_prob, ck.config.moe.norm_topk_prob) << file;
        for (int l = 0; l < c.n_layers; ++l) EXPECT_EQ(c.moe_layer(l), ck.config.moe_layer(l)) << file << " " << l;
        EXPECT_SAME_BITS(logits(Model::from_checkpoint(back, dt)), want,
                         std::string(fam) + " " + std::string(dtype_name(dt)) + " " + file);
      }
    }
  }
}

// A quantised GGUF keeps the routers in the file's dtype (as llama.cpp's quantiser does) and
// quantises the stacked experts; it loads and decodes on both paths.
TEST(MoeForward, QuantisedGgufKeepsTheRoutersAndRuns) {
  for (const char* fam : kMoeFamilies) {
    const Checkpoint ck = synthesize_checkpoint(synthetic_config(fam, "tiny"), DType::F16);
    test::TempDir t;
    ExportOptions eo;
    eo.quant = "Q8_0";
    export_checkpoint(ck, "gguf", t.file("q.gguf"), eo);
    const Checkpoint q = open_checkpoint(t.file("q.gguf"));
    const ModelConfig& c = q.config;
    const int l = c.moe_layer(0) ? 0 : 1;
    EXPECT_FALSE(q.tensors.at(moe_router_name(c, l)).quantized()) << fam;
    EXPECT_EQ(q.tensors.at(expert_matrix_name(c, l, 1, ExpertMatrix::Up)).quant, QuantType::Q8_0) << fam;
    auto m = Model::from_checkpoint(q, DType::F16);
    for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
      Engine e(m, EngineOptions{});
      GenerationConfig g;
      g.max_new_tokens = 6;
      g.cache = mode;
      g.stop_at_eos = false;
      EXPECT_EQ(e.generate({1, 7, 9}, g, nullptr).output_ids.size(), 6u) << fam;
    }
  }
}

TEST(MoeCli, SynthInspectAndCompareRun) {
  test::TempDir t;
  const std::string m = t.file("q3moe");
  ASSERT_EQ(test::kvparity("synth --arch qwen3_moe --out " + test::shell_quoted(m)).status, 0);
  const auto ins = test::kvparity("inspect --model " + test::shell_quoted(m));
  ASSERT_EQ(ins.status, 0) << ins.err;
  EXPECT_NE(ins.out.find("qwen3_moe"), std::string::npos) << ins.out;
  EXPECT_NE(ins.out.find("3 of 8 a token, 96 wide, renormalised, 3 of 4 layers sparse"), std::string::npos) << ins.out;
  const auto cmp = test::kvparity("compare --model " + test::shell_quoted(m) +
                                  " --prompt 'a b c' --max-new-tokens 8 --dtype fp16 --kernels invariant --out " +
                                  test::shell_quoted(t.file("cmp")));
  EXPECT_EQ(cmp.status, 0) << cmp.err;
  const auto bad = test::kvparity("synth --arch mixtral --preset mistral-7b --out " + test::shell_quoted(t.file("x")));
  EXPECT_NE(bad.status, 0);
}

}  // namespace
}  // namespace kvp
