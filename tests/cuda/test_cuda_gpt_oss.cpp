// GPT-OSS on the GPU (CUDA suite): its attention sinks, started as each CUDA attention kernel's
// softmax state (src/cuda/cuda_attention_sinks.cuh), and its experts' clamped SwiGLU, in a
// synthetic GPT-OSS (biases, sinks, a window on the even layers, YaRN, top-k-then-softmax
// routing, MXFP4-free experts), run as the CPU runs it:
//  - fp32: every policy's steps within 1e-4 (or twice the CPU policies' own spread) of the same
//    policy on the CPU, on both cache paths;
//  - invariant: the battery (cache ON = OFF, prefill chunks, a batch = each sequence alone) bit
//    for bit, with the tensor-core kernels (head_dim 64, fp16 and bf16) past their 128-key
//    chunks and with the CUDA-core ones (the tiny preset's head_dim 16);
//  - portable: every step's tokens, experts and logits the CPU's bit for bit;
//  - decode steps replayed as CUDA graphs (the sinks' device copy at one address) bitwise the
//    eager ones.
// The CPU suite runs the same kernels' source on the host (tests/test_cuda_sinks_on_cpu.cpp,
// tests/test_cuda_clamped_swiglu_on_cpu.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/cuda_runtime_api.h"
#include "cuda/cuda_test_util.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/generator.h"

namespace kvp {
namespace {

using test::on_gpu;
using test::same_bits;
using test::Trace;
using test::trace;

// The tiny preset (head_dim 16: the CUDA-core attention kernels, a window of 16 on the even layers).
ModelConfig gpt_oss_tiny() { return synthetic_config("gpt_oss", "tiny"); }

// GPT-OSS's own head_dim (64), so that fp16/bf16 attention runs on the tensor-core kernels, with
// a window of 150 on the even layers, which a 300-token decode leaves whole 128-key chunks behind.
ModelConfig gpt_oss_heads64() {
  ModelConfig c = gpt_oss_tiny();
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 64;
  c.sliding_window = 150;
  c.validate();
  return c;
}

const std::vector<int> kPrompt{1, 7, 42, 3, 99};

double worst_logit_gap(const Trace& a, const Trace& b) {
  double w = 0;
  for (size_t s = 0; s < std::min(a.logits.size(), b.logits.size()); ++s)
    for (size_t i = 0; i < a.logits[s].size(); ++i) w = std::max(w, double(std::abs(a.logits[s][i] - b.logits[s][i])));
  return w;
}

// The bound, as CudaBackend's for the other families: 1e-4, or twice what two CPU policies already
// part by (sums in another order) where that is more. On these models (logits up to |34|, 24
// steps) CPU standard and reference part by 5.8e-5 to 1.0e-4, CPU invariant and portable by 3.7e-5.
TEST(CudaGptOss, Fp32StepsAreTheCpuPolicysWithin1e4) {
  KVP_REQUIRE_GPU();
  for (const ModelConfig& c : {gpt_oss_tiny(), gpt_oss_heads64()}) {
    auto model = Model::from_checkpoint(synthesize_checkpoint(c, DType::F32), DType::F32);
    for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
      EngineOptions reference, standard;
      reference.kernels = KernelPolicy::Reference;
      standard.kernels = KernelPolicy::Standard;
      const double spread =
          worst_logit_gap(trace(model, reference, kPrompt, mode, 24), trace(model, standard, kPrompt, mode, 24));
      for (KernelPolicy pol : {KernelPolicy::Standard, KernelPolicy::Invariant, KernelPolicy::Portable}) {
        EngineOptions cpu;
        cpu.kernels = pol;
        const Trace a = trace(model, cpu, kPrompt, mode, 24);
        const Trace b = trace(model, on_gpu(KvType::of(DType::F32), pol), kPrompt, mode, 24);
        const std::string what = "head_dim " + std::to_string(c.head_dim) + " " + policy_name(pol) +
                                 (mode == CacheMode::On ? " cache ON" : " cache OFF");
        const double w = worst_logit_gap(a, b);
        std::printf("[ measured ] GPT-OSS %s: GPU vs CPU fp32 max|dlogit| %.3g (CPU standard vs reference %.3g)\n",
                    what.c_str(), w, spread);
        EXPECT_EQ(a.ids, b.ids) << what;
        EXPECT_LE(w, std::max(1e-4, 2 * spread)) << what;
        if (pol == KernelPolicy::Portable) {
          EXPECT_TRUE(same_bits(a, b)) << what << ": portable is the CPU's bits";
        }
      }
    }
  }
}

TEST(CudaGptOss, InvariantHoldsTheBattery) {
  KVP_REQUIRE_GPU();
  struct Run {
    ModelConfig c;
    DType dt;
    int tokens;
  };
  // 300 tokens after the battery's 29-token prompt: past two chunk boundaries of the tensor-core
  // kernels and past the window.
  const Run runs[] = {{gpt_oss_heads64(), DType::F16, 300},
                      {gpt_oss_heads64(), DType::BF16, 300},
                      {gpt_oss_tiny(), DType::F16, 80},
                      {gpt_oss_tiny(), DType::F32, 80}};
  for (const Run& r : runs) {
    auto model = Model::from_checkpoint(synthesize_checkpoint(r.c, DType::F32), r.dt);
    test::Counts inv;
    test::run_battery(
        "cuda GPT-OSS head_dim " + std::to_string(r.c.head_dim) + " " + std::string(dtype_name(r.dt)) + " invariant",
        model, KernelPolicy::Invariant, test::greedy(), r.tokens, false, true, inv, Device::Cuda);
    EXPECT_EQ(inv.differing, 0);
    EXPECT_GT(inv.comparisons, 2);
  }
}

TEST(CudaGptOss, PortableStepsAreTheCpuBits) {
  KVP_REQUIRE_GPU();
  for (const ModelConfig& c : {gpt_oss_tiny(), gpt_oss_heads64()})
    for (DType dt : {DType::F16, DType::BF16, DType::F32}) {
      auto model = Model::from_checkpoint(synthesize_checkpoint(c, dt), dt);
      for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
        std::vector<std::vector<int>> experts[2];
        std::vector<std::vector<float>> logits[2];
        std::vector<int> ids[2];
        for (int side = 0; side < 2; ++side) {
          EngineOptions eo = side == 0 ? EngineOptions{} : on_gpu(KvType::of(dt), KernelPolicy::Portable);
          eo.kernels = KernelPolicy::Portable;
          Engine e(model, eo);
          GenerationConfig g;
          g.max_new_tokens = 40;
          g.cache = mode;
          g.stop_at_eos = false;
          ids[side] = e.generate(kPrompt, g, nullptr, [&](const StepInfo& st) {
                         ASSERT_NE(st.experts, nullptr);
                         experts[side].emplace_back(st.experts, st.experts + st.experts_size);
                         logits[side].emplace_back(st.logits, st.logits + st.vocab);
                       }).output_ids;
        }
        const std::string what = "head_dim " + std::to_string(c.head_dim) + " " + std::string(dtype_name(dt)) +
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

// The sinks reach the kernels through a device copy made once a layer: a pass replayed as a graph
// reads the copy its capture read (the launch signatures hold its address), so its bits are the
// eager steps'. `standard` (the split-KV
// decode, whose splits change while the graph stays) and `invariant` (the chunked decode).
TEST(CudaGptOss, GraphReplayedDecodeStepsAreBitwiseTheEagerOnes) {
  KVP_REQUIRE_GPU();
  struct Graphs {
    explicit Graphs(bool on) { cuda::set_pass_graphs(on); }
    ~Graphs() { cuda::set_pass_graphs(true); }
  };
  auto model = Model::from_checkpoint(synthesize_checkpoint(gpt_oss_heads64(), DType::F32), DType::F16);
  for (KernelPolicy pol : {KernelPolicy::Standard, KernelPolicy::Invariant}) {
    const EngineOptions eo = on_gpu(KvType::of(DType::F16), pol);
    Trace eager;
    {
      Graphs off(false);
      eager = trace(model, eo, kPrompt, CacheMode::On, 150);
    }
    const size_t before = cuda::pass_graph_replays();
    const Trace graphed = trace(model, eo, kPrompt, CacheMode::On, 150);
    const size_t replays = cuda::pass_graph_replays() - before;
    // Every layer is sparse, its routing read on the host: what a step replays is its part up to
    // layer 0's router, layer 0's attention (windowed, with its sinks) among it.
    std::printf("[ measured ] GPT-OSS %s fp16: %zu of 150 decode passes replayed a graph\n", policy_name(pol).c_str(),
                replays);
    EXPECT_GT(replays, 0u) << policy_name(pol);
    EXPECT_TRUE(same_bits(eager, graphed)) << policy_name(pol);
  }
}

}  // namespace
}  // namespace kvp
