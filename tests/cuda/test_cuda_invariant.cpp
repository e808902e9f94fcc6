// The `invariant` policy on the GPU (issue 14): every output reduced in one order that depends on
// the reduction length alone. Checked at the kernel level (a row of the tensor-core GEMM computed
// in a call of any M is the same bits, and close to the fp32 reference: a wrong fragment layout
// would be far off), then end to end with the CPU's invariance battery (tests/invariance_battery.h:
// cache ON vs OFF, prefill chunks 1 and 7, exact-size vs static cache, a batch of 4 mixed-length
// sequences vs each alone; and a batch of 64) for every family, fp32/fp16/bf16, greedy and seeded
// top-p, under `invariant` and `portable` — and, so that the harness can fail, the same battery under
// `standard` at a width where cuBLAS changes kernels finds differences.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/dtype.h"
#include "cuda/cuda_runtime_api.h"
#include "cuda/cuda_test_util.h"
#include "invariance_battery.h"
#include "kernels/kernels.h"
#include "model/synthetic.h"
#include "test_util.h"

namespace kvp {
namespace {

using test::normals;

// Leaves the GEMM choice and launches as a test found them, however it ends (a failed assertion
// or an exception must not hand the next test a forced kernel).
struct BackToDefaults {
  ~BackToDefaults() {
    cuda::set_invariant_gemm_kernel("auto");
    cuda::set_programmatic_launch(false);
  }
};

// What "auto" stands for on this GPU (the wgmma family's wgmma-tma+mma16b on an H100 or H200).
std::string auto_gemm_here() {
  const BackToDefaults back_to_defaults;
  cuda::set_invariant_gemm_kernel("auto");
  return cuda::invariant_gemm_kernel_here();
}

// A row of the tensor-core GEMM computed in a call of any M is the same bits, with every kernel of
// the family forced, and close to the fp32 reference. wgmma: that family (an H100 or H200 only),
// whose bits are its own; it also prints how many outputs differ from the mma.sync family's.
// "auto" belongs to the family it stands for here.
void check_gemm_rows(bool wgmma) {
  const std::string auto_is = auto_gemm_here();
  EXPECT_EQ(auto_is, cuda::wgmma_kernels_available() ? "wgmma-tma+mma16b" : "mma");
  const auto in_wgmma_family = [&](const std::string& kernel) {
    return (kernel == "auto" ? auto_is : kernel).rfind("wgmma", 0) == 0;
  };
  auto ref = make_kernels(KernelPolicy::Reference, nullptr, Device::Cpu);
  std::mt19937 rng(21);
  const int kBig = 300, N = 300;
  // Row slices of the big call, each computed alone: decode (1), small batches, both sides of the
  // dispatch's boundaries (16, 64: the shared-memory ring, or the register prefetch when K % 8 !=
  // 0; 128 and 256: the wgmma tiles; 256: 64- vs 128-row tiles).
  const std::pair<int, int> slices[] = {{0, 1},    {57, 1},    {299, 1},  {10, 3},   {20, 16},  {40, 17},
                                        {100, 64}, {120, 65},  {3, 128},  {7, 130},  {44, 256}, {41, 257}};
  const BackToDefaults back_to_defaults;
  // With programmatic launches too (where available), where the GEMM may start while the
  // conversion of its input still runs.
  for (bool pdl : {false, true})
    for (DType act : {DType::F16, DType::BF16})
      for (int K : {4096, 1000, 77}) {  // whole 64-k stages, a partial one, no 16-byte rows
        if (pdl && !cuda::programmatic_launch_available()) continue;
        cuda::set_programmatic_launch(pdl);
        // A kernels object per weight: it keeps device copies keyed by host address, which the
        // next iteration's weight may reuse.
        auto gpu = make_kernels(KernelPolicy::Invariant, nullptr, Device::Cuda);
        const auto wf = normals(size_t(N) * K, rng, act);
        std::vector<uint8_t> wb(wf.size() * 2);
        from_f32(act, wf.data(), wb.data(), wf.size());
        const TensorView W = test::weight_view(wb, act, N, K);
        const auto x = normals(size_t(kBig) * K, rng, act);
        DeviceBuffer dx(Device::Cuda, x.size() * 4), dy(Device::Cuda, size_t(kBig) * N * 4);
        host_to_device(Device::Cuda, dx.data(), x.data(), x.size() * 4);
        std::vector<float> want(size_t(kBig) * N);
        ref->matmul(x.data(), kBig, W, act, want.data());
        // The big call under a family's own choice (K % 8 != 0: the mma.sync kernels for both).
        auto big_of = [&](const std::string& family) {
          cuda::set_invariant_gemm_kernel(family);
          gpu->matmul(dx.as<float>(), kBig, W, act, dy.as<float>());
          std::vector<float> big(size_t(kBig) * N);
          gpu->to_host(big.data(), dy.data(), big.size() * 4);
          const double err = test::rel_err(big, want);
          std::printf("[ measured ] invariant GEMM (%s) %s K %d: relative error vs fp32 reference %.3g\n",
                      family.c_str(), std::string(dtype_name(act)).c_str(), K, err);
          EXPECT_LE(err, 1e-4) << family << " " << dtype_name(act) << " K " << K;  // a wrong layout is O(1) off
          cuda::set_invariant_gemm_kernel("auto");
          return big;
        };
        const std::vector<float> big = big_of(wgmma ? "wgmma" : "mma");
        if (wgmma && K % 8 == 0) {
          const std::vector<float> other = big_of("mma");
          size_t differ = 0;
          for (size_t i = 0; i < big.size(); ++i) differ += std::memcmp(&big[i], &other[i], 4) != 0;
          std::printf("[ measured ] %s K %d: wgmma vs mma.sync family, %zu of %zu outputs differ\n",
                      std::string(dtype_name(act)).c_str(), K, differ, big.size());
        }
        for (const std::string& kernel : cuda::invariant_gemm_kernels()) {
          if (in_wgmma_family(kernel) != wgmma) continue;
          cuda::set_invariant_gemm_kernel(kernel);
          for (auto [m0, rows] : slices) {
            DeviceBuffer ds(Device::Cuda, size_t(rows) * N * 4);
            gpu->matmul(dx.as<float>() + size_t(m0) * K, rows, W, act, ds.as<float>());
            std::vector<float> alone(size_t(rows) * N);
            gpu->to_host(alone.data(), ds.data(), alone.size() * 4);
            size_t differ = 0;
            for (size_t i = 0; i < alone.size(); ++i)
              differ += std::memcmp(&alone[i], &big[size_t(m0) * N + i], 4) != 0;
            EXPECT_EQ(differ, 0u) << dtype_name(act) << " K " << K << ": rows " << m0 << ".." << m0 + rows - 1
                                  << " alone vs in M = " << kBig << " (" << kernel
                                  << (pdl ? ", programmatic launches" : "") << "): " << differ << " of " << alone.size()
                                  << " outputs differ";
          }
        }
        cuda::set_invariant_gemm_kernel("auto");
        cuda::set_programmatic_launch(false);
      }
}

TEST(CudaInvariant, GemmRowIsTheSameBitsForEveryMAndCloseToFp32) {
  KVP_REQUIRE_GPU();
  check_gemm_rows(false);
  try {
    cuda::set_invariant_gemm_kernel("tiles7x7");
    ADD_FAILURE() << "an unknown GEMM kernel was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("tiles128x256"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cuda::invariant_gemm_kernel(), "auto");
}

// In a test of its own so that a run can leave the wgmma kernels out (--gtest_filter=-*Wgmma*):
// a fault there ends the process's CUDA context.
TEST(CudaInvariant, WgmmaGemmRowIsTheSameBitsForEveryMAndCloseToFp32) {
  KVP_REQUIRE_GPU();
  if (!cuda::wgmma_kernels_available()) GTEST_SKIP() << "no sm_90a code for this GPU";
  check_gemm_rows(true);
}

const std::vector<std::string> kFamilies = {"llama",  "mistral", "gemma2",    "qwen2",     "qwen3", "gemma3",
                                            "olmo2",  "mixtral", "qwen2_moe", "qwen3_moe", "olmoe",  "olmo3",
                                            "exaone4"};

class CudaInvariantBattery : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaInvariantBattery, BitwiseAcrossCachePathsChunksBatchAndCacheSize) {
  KVP_REQUIRE_GPU();
  const std::string arch = GetParam();
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    auto model = Model::from_checkpoint(synthesize_checkpoint(synthetic_config(arch, "tiny"), dt), dt);
    for (const auto& [sname, sampler] : {std::pair{"greedy", test::greedy()}, std::pair{"top-p", test::top_p()}})
      for (KernelPolicy pol : {KernelPolicy::Invariant, KernelPolicy::Portable}) {
        test::Counts c;
        test::run_battery("cuda " + arch + " " + std::string(dtype_name(dt)) + " " + sname + " " + policy_name(pol),
                          model, pol, sampler, 40, true, true, c, Device::Cuda);
        EXPECT_EQ(c.differing, 0);
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, CudaInvariantBattery, ::testing::ValuesIn(kFamilies),
                         [](const auto& i) { return i.param; });  // by name, so a run can leave a family out

// At the width where the standard GPU path differs (cuBLAS picks other kernels for one row than
// for the prompt), the battery holds for `invariant` and finds differences under `standard`.
TEST(CudaInvariant, BatteryHoldsAtWidthAndStandardFailsIt) {
  KVP_REQUIRE_GPU();
  ModelConfig c;
  const Checkpoint ck = test::wide_llama(&c);
  for (DType dt : {DType::F16, DType::BF16}) {
    auto model = Model::from_checkpoint(ck, dt);
    test::Counts inv, std_counts;
    test::run_battery("cuda wide " + std::string(dtype_name(dt)) + " invariant", model, KernelPolicy::Invariant,
                      test::greedy(), 24, true, true, inv, Device::Cuda);
    EXPECT_EQ(inv.differing, 0);
    test::run_battery("cuda wide " + std::string(dtype_name(dt)) + " standard", model, KernelPolicy::Standard,
                      test::greedy(), 24, true, false, std_counts, Device::Cuda);
    std::printf("[ measured ] cuda wide %s standard: %d of %d comparisons differ\n",
                std::string(dtype_name(dt)).c_str(), std_counts.differing, std_counts.comparisons);
    EXPECT_GT(std_counts.differing, 0) << dtype_name(dt) << ": the standard GPU path agreed bitwise everywhere";
  }
}

// The wgmma family chosen for a whole run (an H100 or H200 only): the battery holds with its bits
// too, on the wide model (the GEMMs at head_dim 128's widths, decode and prefill tiles both) and a
// tiny one (K past the last whole 64-k stage); and with decode-sized rows on mma.sync fed the
// family's groups (wgmma-tma+mma16: held on an H100, 2026-11-26; wgmma-tma+mma16x, the mma.sync
// family's own loads with halves traded between lanes; wgmma-tma+mma16b, two 8-byte loads, auto
// there since 2026-11-27), which holds only if the hardware sums both instructions alike.
TEST(CudaInvariant, WgmmaFamilyHoldsTheBattery) {
  KVP_REQUIRE_GPU();
  if (!cuda::wgmma_kernels_available()) GTEST_SKIP() << "no sm_90a code for this GPU";
  ModelConfig c;
  const Checkpoint wide = test::wide_llama(&c);
  const Checkpoint tiny = synthesize_checkpoint(synthetic_config("qwen2", "tiny"), DType::F32);
  const BackToDefaults back_to_defaults;
  for (const std::string gemm : {"wgmma", "wgmma-tma+mma16", "wgmma-tma+mma16b", "wgmma-tma+mma16x"}) {
    cuda::set_invariant_gemm_kernel(gemm);
    for (const auto& [name, ck] : {std::pair{"wide", &wide}, std::pair{"tiny qwen2", &tiny}})
      for (DType dt : {DType::F16, DType::BF16}) {
        auto model = Model::from_checkpoint(*ck, dt);
        test::Counts inv;
        test::run_battery("cuda " + std::string(name) + " " + std::string(dtype_name(dt)) + " invariant (" + gemm + ")",
                          model, KernelPolicy::Invariant, test::greedy(), 24, true, true, inv, Device::Cuda);
        EXPECT_EQ(inv.differing, 0) << name << " " << dtype_name(dt) << " " << gemm;
      }
  }
}

// The mma.sync family forced (auto wherever the wgmma family cannot run, so that on an H100 or H200,
// where auto is the wgmma family, its battery still runs there too).
TEST(CudaInvariant, MmaFamilyHoldsTheBattery) {
  KVP_REQUIRE_GPU();
  ModelConfig c;
  const Checkpoint wide = test::wide_llama(&c);
  const Checkpoint tiny = synthesize_checkpoint(synthetic_config("qwen2", "tiny"), DType::F32);
  const BackToDefaults back_to_defaults;
  cuda::set_invariant_gemm_kernel("mma");
  for (const auto& [name, ck] : {std::pair{"wide", &wide}, std::pair{"tiny qwen2", &tiny}})
    for (DType dt : {DType::F16, DType::BF16}) {
      auto model = Model::from_checkpoint(*ck, dt);
      test::Counts inv;
      test::run_battery("cuda " + std::string(name) + " " + std::string(dtype_name(dt)) + " invariant (mma)", model,
                        KernelPolicy::Invariant, test::greedy(), 24, true, true, inv, Device::Cuda);
      EXPECT_EQ(inv.differing, 0) << name << " " << dtype_name(dt);
      EXPECT_GT(inv.comparisons, 2);
    }
}

// Past the attention's 128-key chunks (cuda_attention_mma_kernel.cuh: a decode step computes each
// chunk in a block of its own and merges them as the prefill merges them): 300 new tokens after a
// 29-token prompt cross two chunk boundaries, without and with a sliding window that leaves whole
// chunks behind. head_dim 128, so the tensor-core kernel runs (the tiny models' 16 and 48 take the
// portable one).
TEST(CudaInvariant, BatteryHoldsPastTheAttentionChunks) {
  KVP_REQUIRE_GPU();
  for (int window : {0, 150}) {
    ModelConfig c;
    test::wide_llama(&c);
    c.n_layers = 2;
    c.sliding_window = window;
    const Checkpoint ck = synthesize_checkpoint(c, DType::F32);
    for (DType dt : {DType::F16, DType::BF16}) {
      auto model = Model::from_checkpoint(ck, dt);
      test::Counts inv;
      test::run_battery("cuda wide " + std::string(dtype_name(dt)) + " window " + std::to_string(window) +
                            " invariant, 300 tokens",
                        model, KernelPolicy::Invariant, test::greedy(), 300, false, true, inv, Device::Cuda);
      EXPECT_EQ(inv.differing, 0);
      EXPECT_GT(inv.comparisons, 2);
    }
  }
}

// A batch of 64 mixed-length sequences (the study's batch size): every slot is the same bits as
// the sequence alone, under invariant (fp16, bf16) and portable (fp16), greedy and seeded top-p;
// under standard the count of slots that differ is printed (GPU stacks' batch variance).
TEST(CudaInvariant, BatchOf64MixedLengthsIsEachSequenceAlone) {
  KVP_REQUIRE_GPU();
  ModelConfig c;
  const Checkpoint ck = test::wide_llama(&c);
  std::vector<std::vector<int>> prompts;
  for (int b = 0; b < 64; ++b) {
    std::vector<int> q;
    for (int i = 0; i < 1 + (b * 37) % 70; ++i) q.push_back((i * 131 + b * 17 + 3) % c.vocab_size);
    prompts.push_back(q);
  }
  struct Run {
    KernelPolicy pol;
    DType dt;
    bool top_p;
  };
  for (const Run& r : {Run{KernelPolicy::Invariant, DType::F16, false}, Run{KernelPolicy::Invariant, DType::BF16, true},
                       Run{KernelPolicy::Portable, DType::F16, false}, Run{KernelPolicy::Standard, DType::F16, false}}) {
    test::Setup s;
    s.model = Model::from_checkpoint(ck, r.dt);
    s.eo.device = Device::Cuda;
    s.eo.kernels = r.pol;
    s.eo.kv_dtype = r.dt;
    s.gen.max_new_tokens = 12;
    s.gen.stop_at_eos = false;
    s.gen.sampler = r.top_p ? test::top_p() : test::greedy();
    s.gen.seed = 20240607;
    const auto tb = test::batch(s, prompts);
    ASSERT_EQ(tb.size(), prompts.size());
    int differing = 0;
    for (size_t b = 0; b < prompts.size(); ++b) {
      const auto same = test::same_trace(test::solo(s, prompts[b], b), tb[b]);
      differing += same ? 0 : 1;
      if (r.pol != KernelPolicy::Standard) {
        EXPECT_TRUE(same) << policy_name(r.pol) << " " << dtype_name(r.dt) << ": batch slot " << b << " vs alone";
      }
    }
    std::printf("[ measured ] batch of 64 vs alone, %s %s%s: %d of 64 slots differ\n",
                policy_name(r.pol).c_str(), std::string(dtype_name(r.dt)).c_str(),
                r.top_p ? " top-p" : "", differing);
  }
}

}  // namespace
}  // namespace kvp
