// The fused launches of a pass (src/cuda/cuda_fusion.cuh: rounding points folded into the kernels
// that read their buffers, cuBLAS input copies written by the kernels that round them, the K and V
// cache writes in one launch) change no bit and no NaN/Inf report. The reference is the same pass
// launched one by one, as op timing launches it (every rounding point and conversion a kernel of
// its own, as before fusion); hooks that read or write rows mid-pass launch what is pending early,
// which must not change a bit either. tests/test_cuda_fusion_on_cpu.cpp checks each fused kernel
// on the CPU; this checks the bookkeeping that decides what fuses, on a GPU. Each check runs with
// `standard`'s GEMM outputs in 16 bits too ($KVPARITY_CUDA_GEMM_OUT16: a projection pending in its
// 16-bit source until it is read; tests/test_cuda_gemm_out16_on_cpu.cpp checks its readers), which
// must change no bit between fused and one-by-one passes either (cuBLAS gets the same calls), and
// which must stay as close to fp32 as the fp32 outputs are.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "cuda/cuda_runtime_api.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/generator.h"
#include "cuda/cuda_test_util.h"
#include "test_util.h"

namespace kvp {
namespace {

using test::on_gpu;
using test::same_bits;
using test::tiny;
using test::Trace;
using test::trace;

// Kernels made in its scope launch every operation on its own (read when kernels are made).
struct OneByOne {
  OneByOne() {
    cuda::reset_op_times();
    cuda::set_op_timing(true);
  }
  ~OneByOne() {
    cuda::set_op_timing(false);
    cuda::reset_op_times();
  }
};

TEST(CudaFusion, FusedPassesAreBitwiseTheOneByOneOnes) {
  KVP_REQUIRE_GPU();
  const std::vector<int> prompt{1, 17, 23, 99, 5};
  for (bool out16 : {false, true}) {
    test::GemmOut16 g(out16);
    for (const char* fam : {"llama", "gemma2", "qwen2"})
      for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
        auto model = tiny(fam, dt);
        const size_t queued = cuda::gemm_out16_queued();
        const Trace fused = trace(model, on_gpu(KvType::of(dt)), prompt, CacheMode::On, 40);
        const bool took = cuda::gemm_out16_queued() > queued;
        EXPECT_EQ(took, out16 && dt != DType::F32) << fam << " " << dtype_name(dt) << ": 16-bit GEMM outputs";
        Trace apart;
        {
          OneByOne o;
          apart = trace(model, on_gpu(KvType::of(dt)), prompt, CacheMode::On, 40);
        }
        const std::string what =
            std::string(fam) + " " + std::string(dtype_name(dt)) + (out16 ? ", 16-bit GEMM outputs" : "");
        EXPECT_EQ(fused.ids, apart.ids) << what;
        EXPECT_TRUE(same_bits(fused, apart)) << what << ": fusion changed a logit";
      }
  }
  // The invariant policy shares the folded launches (RMSNorm, RoPE, the cache writes, the 16-bit
  // input of its tensor-core GEMM).
  for (const char* fam : {"llama", "gemma2"})
    for (DType dt : {DType::F16, DType::BF16}) {
      auto model = tiny(fam, dt);
      const Trace fused = trace(model, on_gpu(KvType::of(dt), KernelPolicy::Invariant), prompt, CacheMode::On, 40);
      Trace apart;
      {
        OneByOne o;
        apart = trace(model, on_gpu(KvType::of(dt), KernelPolicy::Invariant), prompt, CacheMode::On, 40);
      }
      EXPECT_EQ(fused.ids, apart.ids) << "invariant " << fam << " " << dtype_name(dt);
      EXPECT_TRUE(same_bits(fused, apart)) << "invariant " << fam << " " << dtype_name(dt) << ": fusion changed a logit";
    }
  // A batch: V's rows are several slices of one buffer, written with K's in one launch; the decode
  // steps' attention rows are one block, which the decode launch rounds and copies for o_proj.
  auto model = tiny("llama", DType::F16);
  for (int run = 0; run < 3; ++run) {  // standard, invariant, standard with 16-bit GEMM outputs
    const KernelPolicy policy = run == 1 ? KernelPolicy::Invariant : KernelPolicy::Standard;
    test::GemmOut16 g(run == 2);
    std::vector<std::vector<std::vector<float>>> logits[2];
    for (int one_by_one = 0; one_by_one < 2; ++one_by_one) {
      std::unique_ptr<OneByOne> o;
      if (one_by_one) o = std::make_unique<OneByOne>();
      logits[one_by_one] = test::batch_logits(model, on_gpu(KvType::of(DType::F16), policy), test::mixed_prompts(), 30);
    }
    EXPECT_EQ(logits[0], logits[1]) << policy_name(policy) << (run == 2 ? ", 16-bit GEMM outputs" : "")
                                    << " batch of 4: fusion changed a logit";
  }
}

// The 16-bit GEMM outputs are cuBLAS's rounding of its fp32 sums, where the fp32 outputs are the
// rounding check's: each pass's logits (a prompt, then decode steps on fixed tokens, solo and a
// batch of the wide model whose prompt cuBLAS runs with other kernels than its decode rows) no
// further from the CPU's fp32 pass than the fp32 outputs' pass is, give or take cuBLAS's own
// choice of algorithm (twice that distance, plus a floor).
TEST(CudaFusion, SixteenBitGemmOutputsStayAsCloseToFp32AsTheFp32Outputs) {
  KVP_REQUIRE_GPU();
  ModelConfig wc;
  const Checkpoint wide = test::wide_llama(&wc);
  const std::vector<int> wide_tokens = test::wide_prompt(wc);
  struct Case {
    std::shared_ptr<Model> model, fp32;
    std::vector<int> prompt;
    const char* what;
  };
  for (DType dt : {DType::F16, DType::BF16}) {
    std::vector<Case> cases;
    for (const char* fam : {"llama", "gemma2", "qwen2"})
      cases.push_back(Case{tiny(fam, dt), tiny(fam, DType::F32), {1, 17, 23, 99, 5, 6, 7}, fam});
    cases.push_back(
        Case{Model::from_checkpoint(wide, dt), Model::from_checkpoint(wide, DType::F32), wide_tokens, "wide llama"});
    for (const Case& c : cases) {
      auto run = [&](std::shared_ptr<Model> m, const EngineOptions& eo) {
        Engine e(std::move(m), eo);
        const int V = c.model->config.vocab_size;
        const float* l = e.forward(c.prompt.data(), int(c.prompt.size()), 0, ForwardOptions{});
        std::vector<std::vector<float>> out{std::vector<float>(l, l + V)};
        for (int step = 0; step < 6; ++step) {
          const int tok = 3 + step * 11;
          l = e.forward(&tok, 1, int(c.prompt.size()) + step, ForwardOptions{});
          out.emplace_back(l, l + V);
        }
        return out;
      };
      const auto want = run(c.fp32, EngineOptions{});
      const auto fp32_out = run(c.model, on_gpu(KvType::of(dt)));
      const size_t queued = cuda::gemm_out16_queued();
      std::vector<std::vector<float>> out16;
      {
        test::GemmOut16 g(true);
        out16 = run(c.model, on_gpu(KvType::of(dt)));
      }
      EXPECT_GT(cuda::gemm_out16_queued(), queued) << c.what << ": no GEMM wrote 16 bits";
      for (size_t s = 0; s < want.size(); ++s) {
        const double base = test::rel_err(fp32_out[s], want[s]), got = test::rel_err(out16[s], want[s]);
        if (s == 0 || s + 1 == want.size())
          std::printf("[ measured ] %s %s step %zu: |logits - CPU fp32| / |CPU fp32|: fp32 outputs %.3g, 16-bit %.3g\n",
                      c.what, std::string(dtype_name(dt)).c_str(), s, base, got);
        EXPECT_LE(got, 2 * base + 1e-3) << c.what << " " << dtype_name(dt) << " step " << s;
      }
    }
  }
}

// A ring that starts over several times a pass (cuda_upload_ring.cuh; large batches of deep models
// meet it): every launch still reads the uploads it was made with (held launches are queued before
// a restart; the RoPE launch that took the cache writes over uploads its positions again), so the
// bits are the default ring's.
TEST(CudaFusion, UploadRingRestartsMidPassChangeNoBit) {
  KVP_REQUIRE_GPU();
  struct SmallRing {
    SmallRing() { cuda::set_upload_ring_bytes(1024); }
    ~SmallRing() { cuda::set_upload_ring_bytes(0); }
  };
  auto model = tiny("llama", DType::F16);
  for (KernelPolicy policy : {KernelPolicy::Standard, KernelPolicy::Invariant}) {
    const auto want = test::batch_logits(model, on_gpu(KvType::of(DType::F16), policy), test::mixed_prompts(), 30);
    std::vector<std::vector<std::vector<float>>> got;
    {
      SmallRing small;
      got = test::batch_logits(model, on_gpu(KvType::of(DType::F16), policy), test::mixed_prompts(), 30);
    }
    EXPECT_EQ(got, want) << policy_name(policy) << ": a 1 KB upload ring changed a logit";
  }
}

// Reads (and, where asked, writes back unchanged) the rows at every point right after a matmul,
// where a rounding point is pending.
class Reader final : public ForwardHooks {
 public:
  explicit Reader(bool write) : write_(write) {}
  void on(const HookSite&, float* d) override { seen += d[0] == d[0] ? 1 : 0; }
  bool wants(HookPoint p, int) const override {
    return p == HookPoint::QPre || p == HookPoint::KPre || p == HookPoint::V || p == HookPoint::AttnOut ||
           p == HookPoint::MlpOut;
  }
  bool writes(HookPoint, int) const override { return write_; }
  bool write_;
  long seen = 0;
};

TEST(CudaFusion, HooksReadingPendingRowsChangeNoBit) {
  KVP_REQUIRE_GPU();
  const std::vector<int> prompt{1, 17, 23, 99, 5, 6, 7};
  for (DType dt : {DType::F16, DType::BF16})
    for (int mode = 1; mode < 5; ++mode) {  // reading hooks, writing hooks; both on 16-bit GEMM outputs
      // qwen2: q/k/v biases, add_bias between a matmul and its rounding; llama with the 16-bit
      // outputs: q, k and v pending in their sources where the hooks read them.
      test::GemmOut16 g(mode >= 3);
      auto model = tiny(mode >= 3 ? "llama" : "qwen2", dt);
      const int V = model->config.vocab_size;
      std::vector<float> got, want;
      for (int with = 0; with < 2; ++with) {
        Engine e(model, on_gpu(KvType::of(dt)));
        Reader r(mode == 2);
        ForwardOptions fo;
        if (with == 1) fo.hooks = &r;
        std::vector<float>& out = with == 1 ? got : want;
        const float* l = e.forward(prompt.data(), int(prompt.size()), 0, fo);
        out.assign(l, l + V);
        for (int step = 0; step < 8; ++step) {
          const int tok = 3 + step * 11;
          l = e.forward(&tok, 1, int(prompt.size()) + step, fo);
          out.insert(out.end(), l, l + V);
        }
        if (with == 1) {
          EXPECT_GT(r.seen, 0);
        }
      }
      EXPECT_SAME_BITS(got, want,
                       std::string(dtype_name(dt)) + (mode % 2 == 0 ? " writing hooks" : " reading hooks") +
                           (mode >= 3 ? ", 16-bit GEMM outputs" : ""));
    }
}

// Overflow at each rounding point that now folds into a later kernel: k_proj (RoPE), v_proj (the
// cache write), attn_out and mlp_out (the residual add), q_proj (RoPE), up_proj (the gated
// activation). Every report (tensor, layer, position, element, value) is the one-by-one pass's,
// and the first is the CPU's (its element too, in fp16).
TEST(CudaFusion, NonFiniteReportsAtFusedRoundingPointsAreTheOneByOneOnes) {
  KVP_REQUIRE_GPU();
  struct Case {
    const char* tensor;
    float f16, bf16;  // weight scale that overflows the rounding point (measured on the CPU)
  };
  const Case cases[] = {{"model.layers.1.self_attn.k_proj.weight", 2e4f, 2e38f},
                        {"model.layers.1.self_attn.v_proj.weight", 6e4f, 2e38f},
                        {"model.layers.1.self_attn.o_proj.weight", 3e4f, 3e38f},
                        {"model.layers.1.mlp.down_proj.weight", 3e4f, 3e38f},
                        {"model.layers.1.self_attn.q_proj.weight", 2e4f, 2e38f},
                        {"model.layers.1.mlp.up_proj.weight", 2e4f, 2e38f}};
  const std::vector<int> tokens{1, 40, 41, 42, 43, 44};
  for (bool out16 : {false, true})
    for (const Case& c : cases)
      for (DType dt : {DType::F16, DType::BF16}) {
        test::GemmOut16 g(out16);
        Checkpoint ck = synthesize_checkpoint(synthetic_config("llama", "tiny"), DType::F32);
        TensorView& t = ck.tensors.at(c.tensor);
        float* w = static_cast<float*>(const_cast<void*>(t.data));
        const float f = dt == DType::F16 ? c.f16 : c.bf16;
        for (int64_t i = 0; i < t.numel(); ++i) w[i] *= f;
        auto model = Model::from_checkpoint(ck, dt);
        ForwardOptions fo;
        fo.on_nonfinite = NonFinitePolicy::Warn;
        EngineOptions cpu_eo;
        cpu_eo.kernels = KernelPolicy::Standard;
        cpu_eo.kv_dtype = KvType::of(dt);
        Engine cpu(model, cpu_eo), fused(model, on_gpu(KvType::of(dt)));
        cpu.forward(tokens.data(), 6, 0, fo);
        fused.forward(tokens.data(), 6, 0, fo);
        std::vector<NonFiniteEvent> apart;
        {
          OneByOne o;
          Engine e(model, on_gpu(KvType::of(dt)));
          e.forward(tokens.data(), 6, 0, fo);
          apart = e.activations().nonfinite;
        }
        const std::string what =
            std::string(c.tensor) + " " + std::string(dtype_name(dt)) + (out16 ? ", 16-bit GEMM outputs" : "");
        const auto& want = cpu.activations().nonfinite;
        const auto& got = fused.activations().nonfinite;
        ASSERT_FALSE(want.empty()) << what << ": the scaling overflowed nothing on the CPU";
        ASSERT_FALSE(got.empty()) << what;
        std::printf("[ measured ] %s: first non-finite: cpu %s | gpu %s\n", what.c_str(), want[0].describe().c_str(),
                    got[0].describe().c_str());
        EXPECT_EQ(got[0].tensor, want[0].tensor) << what;
        EXPECT_EQ(got[0].layer, want[0].layer) << what;
        EXPECT_EQ(got[0].position, want[0].position) << what;
        // bf16 has fp32's range: its rounding point overflows only where the fp32 sum itself does,
        // and which elements' sums pass 3.4e38 depends on the order cuBLAS adds in (an H200 saw
        // element 16 overflow where the CPU's first was 33). fp16 overflows far inside fp32's range.
        if (dt == DType::F16) {
          EXPECT_EQ(got[0].index, want[0].index) << what;
        }
        ASSERT_EQ(got.size(), apart.size()) << what;
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_EQ(got[i].describe(), apart[i].describe()) << what << ": report " << i;
          EXPECT_EQ(std::memcmp(&got[i].value, &apart[i].value, sizeof(float)), 0) << what << ": report " << i;
        }
      }
}

}  // namespace
}  // namespace kvp
