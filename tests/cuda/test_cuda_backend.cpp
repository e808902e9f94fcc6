// The CUDA suite (ctest label `cuda`): the same forward pass on the GPU. Without a usable GPU
// every test skips, naming why.
//  - fp32 logits, hidden states, the cached step and greedy generations on both paths against the
//    transformers references of the four families (1e-4), under each GPU policy;
//  - GPU fp32 against CPU fp32 (1e-4) on a real checkpoint and on synthesised models; an fp32 run
//    of an fp16/bf16 file bitwise the run of its fp32 copy;
//  - a NaN-poisoned static cache changes nothing, and a static cache equals an exact-size one;
//  - fp16/bf16 `standard` kernels: cache ON and OFF differ somewhere (the phenomenon);
//  - batches of mixed-length sequences on both paths; NaN/Inf detection naming tensor and layer;
//  - hooks (profile, patching) see the same rows as on the CPU;
//  - a mixture of experts routes every step as the CPU does (under `portable`, the same bits).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/device.h"
#include "core/error.h"
#include "cuda/cuda_runtime_api.h"
#include "cuda/cuda_test_util.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "reference_files.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

using test::batch_logits;
using test::HiddenCapture;
using test::max_abs_diff;
using test::mixed_prompts;
using test::on_gpu;
using test::read_f32;
using test::read_json;
using test::same_bits;
using test::Trace;
using test::trace;

// Every GPU policy: fp32 passes of the fixed-order policies run the CUDA-core kernels.
class CudaReference : public ::testing::TestWithParam<std::tuple<std::string, KernelPolicy>> {};

TEST_P(CudaReference, Fp32LogitsHiddenStatesStepAndGenerationsMatchTransformers) {
  KVP_REQUIRE_GPU();
  const std::string fam = std::get<0>(GetParam());
  const KernelPolicy pol = std::get<1>(GetParam());
  const EngineOptions gpu = on_gpu(KvType::of(DType::F32), pol);
  KVP_REQUIRE_REFERENCE(dir, fam);
  auto model = Model::load(dir, DType::F32);
  const ModelConfig& c = model->config;
  const auto tokens = read_json(dir + "/tokens.json")["input_ids"].get<std::vector<int>>();
  const auto ref_logits = read_f32(dir + "/logits.f32");
  const auto ref_hidden = read_f32(dir + "/hidden.f32");
  {
    Engine engine(model, gpu);
    HiddenCapture cap(c.n_layers, int(tokens.size()), c.dim);
    ForwardOptions fo;
    fo.hooks = &cap;
    const float* logits = engine.forward(tokens.data(), int(tokens.size()), 0, fo);
    ASSERT_EQ(ref_logits.size(), tokens.size() * size_t(c.vocab_size));
    const double dl = max_abs_diff(logits, ref_logits.data(), ref_logits.size());
    const double dh = max_abs_diff(cap.data.data(), ref_hidden.data(), ref_hidden.size());
    std::printf("[ measured ] cuda %s %s fp32: max|dlogits| %.3g, max|dhidden| %.3g\n", policy_name(pol).c_str(),
                fam.c_str(), dl, dh);
    EXPECT_LE(dl, 1e-4) << fam;
    EXPECT_LE(dh, 1e-4) << fam;
  }
  {
    Engine engine(model, gpu);
    const auto step_ref = read_f32(dir + "/step_logits.f32");
    engine.forward(tokens.data(), int(tokens.size()) - 1, 0, ForwardOptions{});
    const float* step = engine.forward(tokens.data() + tokens.size() - 1, 1, int(tokens.size()) - 1, ForwardOptions{});
    EXPECT_LE(max_abs_diff(step, step_ref.data(), step_ref.size()), 1e-4) << fam << " cached step";
  }
  const auto gen = read_json(dir + "/generate.json");
  const auto prompt = gen["prompt"].get<std::vector<int>>();
  const auto gen_logits = read_f32(dir + "/gen_logits.f32");
  for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
    Engine e(model, gpu);
    GenerationConfig g;
    g.max_new_tokens = gen["max_new_tokens"].get<int>();
    g.cache = mode;
    g.stop_at_eos = false;
    double worst = 0;
    const auto r = e.generate(prompt, g, nullptr, [&](const StepInfo& s) {
      worst = std::max(worst, max_abs_diff(s.logits, gen_logits.data() + size_t(s.step) * s.vocab, size_t(s.vocab)));
    });
    const char* key = mode == CacheMode::On ? "new_tokens_use_cache_true" : "new_tokens_use_cache_false";
    EXPECT_EQ(r.output_ids, gen[key].get<std::vector<int>>()) << fam << " " << key;
    EXPECT_LE(worst, 1e-4) << fam << " " << key;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, CudaReference,
                         ::testing::Combine(::testing::Values("llama", "mistral", "gemma2", "qwen2", "qwen3", "gemma3", "olmo2",
                                                              "mixtral", "qwen2_moe", "qwen3_moe", "olmoe"),
                                            ::testing::Values(KernelPolicy::Standard, KernelPolicy::Invariant,
                                                              KernelPolicy::Portable)),
                         [](const auto& i) { return std::get<0>(i.param) + "_" + policy_name(std::get<1>(i.param)); });

double worst(const Trace& a, const Trace& b) {
  double w = 0;
  for (size_t s = 0; s < std::min(a.logits.size(), b.logits.size()); ++s)
    w = std::max(w, max_abs_diff(a.logits[s].data(), b.logits[s].data(), a.logits[s].size()));
  return w;
}

// Two fp32 CPU policies (reference and standard) already differ by this much on a model: sums in
// another order. The synthesised models' logits reach |30| and the gap grows over 24 steps to
// ~2.5e-4 between the two CPU policies there, so 1e-4 is the bound where the CPU agrees with
// itself to that (the real checkpoint, the transformers references) and twice the CPU's own
// spread beyond.
double cpu_fp32_spread(std::shared_ptr<const Model> model, const std::vector<int>& prompt, CacheMode mode, int n,
                       const Trace& reference) {
  EngineOptions standard;
  standard.kernels = KernelPolicy::Standard;
  return worst(reference, trace(std::move(model), standard, prompt, mode, n));
}

TEST(CudaBackend, GpuFp32AgreesWithCpuFp32OnARealCheckpointAndEveryFamily) {
  KVP_REQUIRE_GPU();
  KVP_REQUIRE_SHARED(bin, "models/stories260K/stories260K.bin");
  std::vector<std::pair<std::string, std::shared_ptr<Model>>> models;
  models.emplace_back("stories260K", Model::load(bin, DType::F32));
  for (const char* fam :
       {"llama", "mistral", "gemma2", "qwen2", "qwen3", "gemma3", "olmo2", "mixtral", "qwen2_moe", "qwen3_moe", "olmoe",
        "olmo3", "exaone4"})
    models.emplace_back(std::string("synthetic ") + fam,
                        Model::from_checkpoint(synthesize_checkpoint(synthetic_config(fam, "tiny"), DType::F32), DType::F32));
  const std::vector<int> prompt{1, 9038, 2501, 263, 931};
  for (auto& [name, model] : models) {
    std::vector<int> p = prompt;
    for (int& t : p) t %= model->config.vocab_size;
    for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
      EngineOptions cpu;
      cpu.kernels = KernelPolicy::Reference;
      const Trace a = trace(model, cpu, p, mode, 24);
      const Trace b = trace(model, on_gpu(), p, mode, 24);
      const double w = worst(a, b), spread = cpu_fp32_spread(model, p, mode, 24, a);
      const double bound = std::max(1e-4, 2 * spread);
      std::printf("[ measured ] %s cache %s: GPU vs CPU fp32 max|dlogit| %.3g (CPU standard vs reference %.3g)\n",
                  name.c_str(), mode == CacheMode::On ? "on" : "off", w, spread);
      EXPECT_EQ(a.ids, b.ids) << name;
      EXPECT_LE(w, bound) << name;
      if (name == "stories260K") {
        EXPECT_LE(w, 1e-4) << name;
      }
    }
  }
}

// A mixture of experts on the GPU: the routing is the host's, from the GPU's router logits, so under
// `portable` (the same bits on every machine) each step's experts, tokens and logits are the CPU's,
// on both cache paths; with a shared expert (Qwen2-MoE) and without (Mixtral).
TEST(CudaBackend, MixtureOfExpertsRoutesEveryStepAsTheCpu) {
  KVP_REQUIRE_GPU();
  for (const char* fam : {"mixtral", "qwen2_moe"})
    for (DType dt : {DType::F16, DType::F32}) {
      auto model = Model::from_checkpoint(synthesize_checkpoint(synthetic_config(fam, "tiny"), dt), dt);
      for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
        std::vector<std::vector<int>> experts[2];
        std::vector<std::vector<float>> logits[2];
        std::vector<int> ids[2];
        for (int side = 0; side < 2; ++side) {
          EngineOptions eo = side == 0 ? EngineOptions{} : on_gpu(KvType::of(dt), KernelPolicy::Portable);
          eo.kernels = KernelPolicy::Portable;
          Engine e(model, eo);
          GenerationConfig g;
          g.max_new_tokens = 20;
          g.cache = mode;
          g.stop_at_eos = false;
          ids[side] = e.generate({1, 7, 42, 3, 99}, g, nullptr, [&](const StepInfo& st) {
                         ASSERT_NE(st.experts, nullptr) << fam;
                         experts[side].emplace_back(st.experts, st.experts + st.experts_size);
                         logits[side].emplace_back(st.logits, st.logits + st.vocab);
                       }).output_ids;
        }
        const std::string what = std::string(fam) + " " + std::string(dtype_name(dt)) +
                                 (mode == CacheMode::On ? " cache ON" : " cache OFF");
        EXPECT_EQ(ids[0], ids[1]) << what;
        EXPECT_EQ(experts[0], experts[1]) << what;
        ASSERT_EQ(logits[0].size(), logits[1].size()) << what;
        for (size_t i = 0; i < logits[0].size(); ++i)
          EXPECT_EQ(std::memcmp(logits[0][i].data(), logits[1][i].data(), logits[0][i].size() * sizeof(float)), 0)
              << what << " step " << i;
      }
    }
}

// An fp32 run keeps an fp16/bf16 file's bytes on the host; the GPU multiplies an fp32 copy of
// them, so the run is bitwise the run of the checkpoint converted to fp32.
TEST(CudaBackend, Fp32RunOfAHalfPrecisionFileIsTheRunOfItsFp32Copy) {
  KVP_REQUIRE_GPU();
  for (const char* fam : {"llama", "gemma2"}) {
    for (DType file : {DType::F16, DType::BF16}) {
      const Checkpoint ck = synthesize_checkpoint(synthetic_config(fam, "tiny"), file);
      auto narrow = Model::from_checkpoint(ck, DType::F32);
      auto wide = Model::from_checkpoint(test::widened_to_f32(ck), DType::F32);
      ASSERT_EQ(narrow->weights.layers[0].wq.dtype, file);
      std::vector<int> p{1, 9038, 2501, 263, 931};
      for (int& t : p) t %= narrow->config.vocab_size;
      for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
        const Trace a = trace(narrow, on_gpu(), p, mode, 16);
        const Trace b = trace(wide, on_gpu(), p, mode, 16);
        EXPECT_EQ(a.ids, b.ids) << fam << " " << dtype_name(file);
        EXPECT_TRUE(same_bits(a, b)) << fam << " " << dtype_name(file) << (mode == CacheMode::On ? " cache on" : " cache off");
      }
    }
  }
}

TEST(CudaBackend, PoisonedStaticCacheChangesNothingAndEqualsAnExactSizeCache) {
  KVP_REQUIRE_GPU();
  for (const char* fam : {"llama", "gemma2"}) {
    auto model = Model::from_checkpoint(synthesize_checkpoint(synthetic_config(fam, "tiny"), DType::F32), DType::F16);
    const std::vector<int> prompt{1, 17, 23, 99, 5, 6, 7};
    for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
      const EngineOptions eo = on_gpu(KvType::of(DType::F16));
      const Trace clean = trace(model, eo, prompt, mode, 40);
      const Trace poisoned = trace(model, eo, prompt, mode, 40, true);
      EXPECT_TRUE(same_bits(clean, poisoned)) << fam << ": a never-written cache slot changed the logits";
      EngineOptions exact = eo;
      exact.cache_capacity = int(prompt.size()) + 40;
      EXPECT_TRUE(same_bits(clean, trace(model, exact, prompt, mode, 40))) << fam << ": static vs exact-size cache";
    }
  }
}

TEST(CudaBackend, HalfPrecisionStandardKernelsMakeCacheOnAndOffDiffer) {
  KVP_REQUIRE_GPU();
  ModelConfig c;
  const Checkpoint ck = test::wide_llama(&c);
  const std::vector<int> prompt = test::wide_prompt(c);
  for (DType dt : {DType::F16, DType::BF16}) {
    auto model = Model::from_checkpoint(ck, dt);
    const Trace on = trace(model, on_gpu(KvType::of(dt)), prompt, CacheMode::On, 32);
    const Trace off = trace(model, on_gpu(KvType::of(dt)), prompt, CacheMode::Off, 32);
    // Compare the first step only where the prefixes are equal: step 0 has the same prefix.
    size_t differing = 0;
    for (size_t s = 0; s < std::min(on.logits.size(), off.logits.size()); ++s)
      differing += std::memcmp(on.logits[s].data(), off.logits[s].data(), on.logits[s].size() * sizeof(float)) != 0;
    std::printf("[ measured ] %s standard cuda: %zu of %zu steps with different logit bits, tokens %s\n",
                std::string(dtype_name(dt)).c_str(), differing, on.logits.size(), on.ids == off.ids ? "equal" : "differ");
    EXPECT_GT(differing, 0u) << dtype_name(dt) << ": cache ON and OFF gave bitwise equal logits at every step";
  }
}

// Decode steps replayed as CUDA graphs give the bits of the same steps launched one by one: solo
// and batched, fp16 and fp32, Llama and Gemma-2 (softcaps, windows), a decode long enough for the
// split-KV decode to change its number of splits while the graph stays the same.
TEST(CudaBackend, GraphReplayedDecodeStepsAreBitwiseTheEagerOnes) {
  KVP_REQUIRE_GPU();
  struct Graphs {
    explicit Graphs(bool on) { cuda::set_pass_graphs(on); }
    ~Graphs() { cuda::set_pass_graphs(true); }
  };
  for (const char* fam : {"llama", "gemma2"}) {
    for (DType dt : {DType::F32, DType::F16}) {
      auto model = Model::from_checkpoint(synthesize_checkpoint(synthetic_config(fam, "tiny"), DType::F32), dt);
      const std::vector<int> prompt{1, 17, 23, 99, 5};
      const EngineOptions eo = on_gpu(KvType::of(dt));
      Trace eager;
      {
        Graphs off(false);
        eager = trace(model, eo, prompt, CacheMode::On, 150);
      }
      cuda::reset_busiest_pass_graph();  // what bench does before a configuration's decode steps
      EXPECT_EQ(cuda::busiest_pass_graph_nodes().total, 0u);
      const size_t before = cuda::pass_graph_replays();
      const Trace graphed = trace(model, eo, prompt, CacheMode::On, 150);
      const size_t replays = cuda::pass_graph_replays() - before;
      const cuda::GraphNodes nodes = cuda::busiest_pass_graph_nodes();
      EXPECT_GT(nodes.kernels, 0u) << fam;
      EXPECT_GE(nodes.total, nodes.kernels) << fam;
      // Every kernel node named through the driver (bench prints the tally): this program's
      // RMSNorm among them, none unnamed.
      EXPECT_NE(nodes.kernel_names.find("rmsnorm_kernel"), std::string::npos) << nodes.kernel_names;
      EXPECT_EQ(nodes.kernel_names.find("? x"), std::string::npos) << nodes.kernel_names;
      std::printf("[ measured ] %s %s: %zu of 150 decode passes replayed as graphs; kernel nodes: %s\n", fam,
                  std::string(dtype_name(dt)).c_str(), replays, nodes.kernel_names.c_str());
      EXPECT_GE(replays, 140u) << fam;
      EXPECT_TRUE(same_bits(eager, graphed)) << fam << " " << dtype_name(dt);
    }
  }
  auto model = Model::from_checkpoint(synthesize_checkpoint(synthetic_config("qwen2", "tiny"), DType::F32), DType::BF16);
  std::vector<std::vector<std::vector<float>>> logits[2];
  for (int graphs = 0; graphs < 2; ++graphs) {
    Graphs g(graphs == 1);
    logits[graphs] = batch_logits(model, on_gpu(KvType::of(DType::BF16)), mixed_prompts(), 60);
  }
  EXPECT_EQ(logits[0], logits[1]) << "batch of 4: graph replay changed a logit";
}

// Programmatic dependent launch (KVPARITY_CUDA_PDL=1): every kernel waits for the one before it
// at its first statement, so kernels scheduled early change no bit, eager or replayed as graphs,
// under every policy, on both cache paths and in a batch. A kernel that read before its wait would
// race with its predecessor's writes here.
TEST(CudaBackend, ProgrammaticLaunchesAreBitwiseTheOrdinaryOnes) {
  KVP_REQUIRE_GPU();
  if (!cuda::programmatic_launch_available()) GTEST_SKIP() << "programmatic dependent launch needs sm_90 code and GPU";
  struct Pdl {  // the setting in its scope, then the one before
    explicit Pdl(bool on) : before(cuda::programmatic_launch_on()) { cuda::set_programmatic_launch(on); }
    ~Pdl() { cuda::set_programmatic_launch(before); }
    bool before;
  };
  // A greedy run's logits without programmatic launches and with them, bitwise.
  auto same_either_way = [](std::shared_ptr<const Model> model, const EngineOptions& eo,
                            const std::vector<int>& prompt, CacheMode mode, int n) {
    Trace plain, pdl;
    {
      Pdl off(false);
      plain = trace(model, eo, prompt, mode, n);
    }
    {
      Pdl on(true);
      pdl = trace(model, eo, prompt, mode, n);
    }
    return same_bits(plain, pdl);
  };
  // 64 tokens: prefill and cache-OFF passes of several blocks a kernel.
  std::vector<int> prompt{1};
  for (int i = 1; i < 64; ++i) prompt.push_back(3 + (i * 37) % 200);
  for (KernelPolicy pol : {KernelPolicy::Standard, KernelPolicy::Invariant, KernelPolicy::Portable})
    for (const char* fam : {"llama", "gemma2"})
      for (DType dt : {DType::F32, DType::F16})
        for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
          auto model = Model::from_checkpoint(synthesize_checkpoint(synthetic_config(fam, "tiny"), DType::F32), dt);
          EngineOptions eo = on_gpu(KvType::of(dt));
          eo.kernels = pol;
          EXPECT_TRUE(same_either_way(model, eo, prompt, mode, 40))
              << policy_name(pol) << " " << fam << " " << dtype_name(dt)
              << (mode == CacheMode::On ? " cache ON" : " cache OFF");
        }
  // Kernels long enough that a dependent scheduled early has time to read too soon: a 1024-wide
  // Llama over a 200-token prompt, fp16, both cache paths.
  ModelConfig wc;
  const auto wide = Model::from_checkpoint(test::wide_llama(&wc), DType::F16);
  for (KernelPolicy pol : {KernelPolicy::Standard, KernelPolicy::Invariant})
    for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
      EngineOptions eo = on_gpu(KvType::of(DType::F16));
      eo.kernels = pol;
      EXPECT_TRUE(same_either_way(wide, eo, test::wide_prompt(wc), mode, 24))
          << "wide " << policy_name(pol) << (mode == CacheMode::On ? " cache ON" : " cache OFF");
    }
  auto model = Model::from_checkpoint(synthesize_checkpoint(synthetic_config("qwen2", "tiny"), DType::F32), DType::BF16);
  std::vector<std::vector<std::vector<float>>> logits[2];
  for (int on = 0; on < 2; ++on) {
    Pdl p(on == 1);
    logits[on] = batch_logits(model, on_gpu(KvType::of(DType::BF16)), mixed_prompts(), 40);
  }
  EXPECT_EQ(logits[0], logits[1]) << "batch of 4: programmatic launches changed a logit";
}

TEST(CudaBackend, BatchOfMixedLengthSequencesRunsOnBothPaths) {
  KVP_REQUIRE_GPU();
  auto model = Model::from_checkpoint(synthesize_checkpoint(synthetic_config("qwen2", "tiny"), DType::F32), DType::F32);
  const std::vector<std::vector<int>> prompts{{1, 5, 9}, {1, 7, 8, 9, 10, 11, 12}, {1}, {1, 40, 41, 42, 43}};
  for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
    Engine batch(model, on_gpu());
    GenerationConfig g;
    g.max_new_tokens = 20;
    g.cache = mode;
    g.stop_at_eos = false;
    std::vector<Trace> got(prompts.size());
    const auto results = batch.generate_batch(prompts, g, nullptr, [&](int b, const StepInfo& s) {
      got[size_t(b)].logits.emplace_back(s.logits, s.logits + s.vocab);
    });
    ASSERT_EQ(results.size(), prompts.size());
    std::vector<Trace> want(prompts.size());
    double spread = 0;  // the CPU's own fp32 spread on this model, over the four sequences
    for (size_t b = 0; b < prompts.size(); ++b) {
      EngineOptions cpu;
      cpu.kernels = KernelPolicy::Reference;
      GenerationConfig gs = g;
      gs.sequence_id = b;
      Engine solo(model, cpu);
      want[b].ids = solo.generate(prompts[b], gs, nullptr, [&](const StepInfo& s) {
                          want[b].logits.emplace_back(s.logits, s.logits + s.vocab);
                        }).output_ids;
      spread = std::max(spread, cpu_fp32_spread(model, prompts[b], mode, 20, want[b]));
    }
    for (size_t b = 0; b < prompts.size(); ++b) {
      const double w = worst(got[b], want[b]);
      std::printf("[ measured ] batch sequence %zu cache %s: GPU batch vs CPU solo max|dlogit| %.3g (CPU spread %.3g)\n",
                  b, mode == CacheMode::On ? "on" : "off", w, spread);
      EXPECT_EQ(results[b].output_ids, want[b].ids) << "sequence " << b;
      EXPECT_LE(w, std::max(1e-4, 2 * spread)) << "sequence " << b;
    }
  }
}

TEST(CudaBackend, Fp16OverflowIsNamedAfterThePass) {
  KVP_REQUIRE_GPU();
  Checkpoint ck = synthesize_checkpoint(synthetic_config("llama", "tiny"), DType::F32);
  TensorView& up = ck.tensors.at("model.layers.1.mlp.up_proj.weight");
  float* w = static_cast<float*>(const_cast<void*>(up.data));
  for (int64_t i = 0; i < up.numel(); ++i) w[i] *= 4.0e5f;
  auto model = Model::from_checkpoint(ck, DType::F16);
  const std::vector<int> tokens{1, 40, 41, 42};
  Engine engine(model, on_gpu(KvType::of(DType::F16)));
  try {
    engine.forward(tokens.data(), 4, 0, ForwardOptions{});
    FAIL() << "fp16 overflow went unnoticed on the GPU";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Numeric);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'up_proj' at layer 1"), std::string::npos) << msg;
  }
  ForwardOptions fo;
  fo.on_nonfinite = NonFinitePolicy::Warn;
  Engine warn(model, on_gpu(KvType::of(DType::F16)));
  EXPECT_NO_THROW(warn.forward(tokens.data(), 4, 0, fo));
  ASSERT_FALSE(warn.activations().nonfinite.empty());
  EXPECT_EQ(warn.activations().nonfinite[0].tensor, "up_proj");
  EXPECT_EQ(warn.activations().nonfinite[0].layer, 1);
}

// Overflow at rounding points the GPU fuses into the operation before them (the gated activation,
// RMSNorm) and at ones it does not (attention, a matmul output): the GPU names the same tensor,
// layer, position and element as the CPU.
TEST(CudaBackend, NonFiniteValuesAreNamedAsTheCpuNamesThem) {
  KVP_REQUIRE_GPU();
  struct Scaling {
    std::vector<std::pair<const char*, float>> tensors;
  };
  const Scaling cases[] = {
      {{{"model.layers.1.mlp.gate_proj.weight", 300.0f}, {"model.layers.1.mlp.up_proj.weight", 300.0f}}},  // mlp_act
      {{{"model.layers.1.input_layernorm.weight", 40000.0f}}},                                             // attn_norm
      {{{"model.layers.1.self_attn.q_proj.weight", 3000.0f}}},   // scores overflow: attn is NaN
      {{{"model.layers.1.self_attn.q_proj.weight", 20000.0f}}},  // q_proj
  };
  for (const Scaling& sc : cases) {
    Checkpoint ck = synthesize_checkpoint(synthetic_config("llama", "tiny"), DType::F32);
    std::string what;
    for (const auto& [name, f] : sc.tensors) {
      TensorView& t = ck.tensors.at(name);
      float* w = static_cast<float*>(const_cast<void*>(t.data));
      for (int64_t i = 0; i < t.numel(); ++i) w[i] *= f;
      what += std::string(name) + " x" + std::to_string(f) + " ";
    }
    auto model = Model::from_checkpoint(ck, DType::F16);
    const std::vector<int> tokens{1, 40, 41, 42, 43, 44};
    ForwardOptions fo;
    fo.on_nonfinite = NonFinitePolicy::Warn;
    EngineOptions cpu_eo;
    cpu_eo.kernels = KernelPolicy::Standard;
    cpu_eo.kv_dtype = KvType::of(DType::F16);
    Engine cpu(model, cpu_eo), gpu(model, on_gpu(KvType::of(DType::F16)));
    cpu.forward(tokens.data(), 6, 0, fo);
    gpu.forward(tokens.data(), 6, 0, fo);
    const auto& want = cpu.activations().nonfinite;
    const auto& got = gpu.activations().nonfinite;
    ASSERT_FALSE(want.empty()) << what << ": the scaling overflowed nothing on the CPU";
    ASSERT_FALSE(got.empty()) << what;
    std::printf("[ measured ] %s-> first non-finite: cpu %s | gpu %s\n", what.c_str(), want[0].describe().c_str(),
                got[0].describe().c_str());
    EXPECT_EQ(got[0].tensor, want[0].tensor) << what;
    EXPECT_EQ(got[0].layer, want[0].layer) << what;
    EXPECT_EQ(got[0].position, want[0].position) << what;
    EXPECT_EQ(got[0].index, want[0].index) << what;
  }
}

TEST(CudaBackend, UnsupportedSettingsAreRefusedByName) {
  KVP_REQUIRE_GPU();
  auto model = Model::from_checkpoint(synthesize_checkpoint(synthetic_config("llama", "tiny"), DType::F32), DType::F16);
  try {
    Engine e(model, on_gpu(KvType::of(DType::F16), KernelPolicy::Reference));
    FAIL() << "reference kernels on CUDA were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kernels reference"), std::string::npos) << e.what();
  }
  const std::vector<int> tokens{1, 2, 3};
  try {
    Engine q(model, on_gpu(*parse_kv_type("fp8_e4m3")));
    q.forward(tokens.data(), 3, 0, ForwardOptions{});
    FAIL() << "a quantised KV cache on CUDA was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fp8_e4m3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvp
