// A layer's q/k/v and gate/up projections as one GEMM launch each (Kernels::matmul_group on CUDA,
// their weights uploaded side by side; src/cuda/cuda_gemm_out.cuh stores each member's columns into
// its own matrix). Under `invariant` the group is the separate launches bit for bit, at every M
// (decode steps, prompts, batches); under `standard` cuBLAS runs a decode row's group as one wider
// GEMM, which may round another way but computes the same projections; and the side-by-side upload
// is the only copy of those weights. tests/test_cuda_gemm_group_on_cpu.cpp checks the kernels'
// stores on the CPU; this checks the backend's bookkeeping on a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "cuda/cuda_runtime_api.h"
#include "cuda/cuda_test_util.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

using test::on_gpu;
using test::same_trace;
using test::tiny;
using test::Trace;
using test::trace;

// Kernels made in its scope launch every member of a group on its own.
struct Apart {
  Apart() { cuda::set_group_launches(false); }
  ~Apart() { cuda::set_group_launches(true); }
};

const std::vector<int> kPrompt{1, 17, 23, 99, 5, 60, 2};

TEST(CudaGroup, InvariantGroupsAreTheSeparateLaunchesBitForBit) {
  KVP_REQUIRE_GPU();
  for (const char* fam : {"llama", "qwen2", "gemma2"})  // qwen2: biases added to each member after
    for (DType dt : {DType::F16, DType::BF16}) {
      auto model = tiny(fam, dt);
      const std::string what = std::string(fam) + " " + std::string(dtype_name(dt));
      for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
        const Trace grouped = trace(model, on_gpu(KvType::of(dt), KernelPolicy::Invariant), kPrompt, mode, 24);
        Trace apart;
        {
          Apart a;
          apart = trace(model, on_gpu(KvType::of(dt), KernelPolicy::Invariant), kPrompt, mode, 24);
        }
        EXPECT_TRUE(same_trace(grouped, apart)) << what << (mode == CacheMode::On ? " cache ON" : " cache OFF");
      }
      const auto grouped =
          test::batch_logits(model, on_gpu(KvType::of(dt), KernelPolicy::Invariant), test::mixed_prompts(), 12);
      std::vector<std::vector<std::vector<float>>> apart;
      {
        Apart a;
        apart = test::batch_logits(model, on_gpu(KvType::of(dt), KernelPolicy::Invariant), test::mixed_prompts(), 12);
      }
      EXPECT_EQ(grouped, apart) << what << ": a batch of 4";
    }
}

TEST(CudaGroup, StandardGroupedDecodeComputesTheSameProjections) {
  KVP_REQUIRE_GPU();
  for (const char* fam : {"llama", "qwen2"})
    for (DType dt : {DType::F32, DType::F16}) {
      auto model = tiny(fam, dt);
      const std::string what = std::string(fam) + " " + std::string(dtype_name(dt));
      const Trace grouped = trace(model, on_gpu(KvType::of(dt), KernelPolicy::Standard), kPrompt, CacheMode::On, 8);
      Trace apart;
      {
        Apart a;
        apart = trace(model, on_gpu(KvType::of(dt), KernelPolicy::Standard), kPrompt, CacheMode::On, 8);
      }
      ASSERT_EQ(grouped.logits.size(), apart.logits.size()) << what;
      // The prompt's pass runs the members one by one either way; the first
      // decode step (along the same token) is the grouped GEMM's: cuBLAS's
      // rounding may differ, a misplaced column would not stay this close.
      EXPECT_EQ(std::memcmp(grouped.logits[0].data(), apart.logits[0].data(), grouped.logits[0].size() * sizeof(float)),
                0)
          << what << ": the prompt's logits";
      if (grouped.ids[0] != apart.ids[0]) continue;
      float worst = 0, scale = 0;
      for (size_t i = 0; i < grouped.logits[1].size(); ++i) {
        worst = std::max(worst, std::fabs(grouped.logits[1][i] - apart.logits[1][i]));
        scale = std::max(scale, std::fabs(apart.logits[1][i]));
      }
      EXPECT_LE(worst, (dt == DType::F32 ? 1e-4f : 2e-2f) * std::max(1.0f, scale)) << what << ": the first decode step";
    }
}

TEST(CudaGroup, GroupedWeightsAreTheOnlyCopy) {
  KVP_REQUIRE_GPU();
  auto model = tiny("llama", DType::F16);
  size_t peak[2] = {};
  for (int apart = 0; apart < 2; ++apart) {
    std::unique_ptr<Apart> a;
    if (apart) a = std::make_unique<Apart>();
    cuda::reset_peak_allocated();
    trace(model, on_gpu(KvType::of(DType::F16), KernelPolicy::Invariant), kPrompt, CacheMode::On, 4);
    trace(model, on_gpu(KvType::of(DType::F16), KernelPolicy::Standard), kPrompt, CacheMode::On, 4);
    peak[apart] = cuda::peak_allocated();
  }
  EXPECT_LE(peak[0], peak[1] + (size_t(1) << 20)) << "grouped weights uploaded twice?";
}

}  // namespace
}  // namespace kvp
