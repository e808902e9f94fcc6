// The CUDA rotation kernel (src/cuda/cuda_elementwise_kernels.cuh, one instance a compute dtype),
// its own source run on the CPU (src/cuda/simt_host.h), against the CPU `standard` kernels'
// rotation: the same bits in every dtype and both pair layouts, on one unit a block, on several
// units and pairs a thread, and on the layout of a large launch. The fused-launch tests
// (test_cuda_fusion_on_cpu.cpp) compare the kernel with itself; this ties it to the CPU.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/elementwise.h"
#include "kernels/kernels.h"
#include "test_util.h"
// The kernels' source, built for the host (after every other header: simt_host.h defines the CUDA
// keywords as macros).
#include "cuda/cuda_elementwise_kernels.cuh"
#include "cuda_on_cpu.h"

namespace kvp {
namespace {

namespace ew = cuda::elementwise;

// Both roundings (OLMo-3's once in fp32, every other family's per term), plain and YaRN tables
// (whose cos/sin carry the attention factor).
TEST(CudaRopeOnCpu, RotationIsTheCpuStandardRotationInEveryDtype) {
  std::mt19937 rng(17);
  const int M = 3, heads = 3, hd = 64;
  RopeScalingSpec yarn;
  yarn.type = RopeScalingSpec::Type::Yarn;
  yarn.factor = 8.0f;
  yarn.original_max_pos = 64;
  yarn.attention_factor = 1.2079441541679836;
  const std::vector<int> pos = {0, 77, 255};
  auto cpu = make_kernels(KernelPolicy::Standard, nullptr);
  for (RopeRounding rounding : {RopeRounding::Terms, RopeRounding::Once})
    for (bool scaled : {false, true}) {
      const RopeTable table(hd, 256, scaled ? 500000.0f : 10000.0f, scaled ? yarn : RopeScalingSpec{}, false, rounding);
      for (int p = 0; p < table.max_positions(); ++p) table.cos_row(p), table.sin_row(p);  // every row filled
      for (DType t : {DType::F32, DType::F16, DType::BF16})
        for (bool adjacent : {false, true})
          for (ew::RopeLayout layout : {ew::RopeLayout::Auto, ew::RopeLayout::OneUnit, ew::RopeLayout::Rounds}) {
            const std::string what = std::string(dtype_name(t)) + (adjacent ? " adjacent pairs" : " halves") +
                                     " layout " + std::to_string(int(layout)) +
                                     (rounding == RopeRounding::Once ? " rounded once" : " rounded per term") +
                                     (scaled ? " yarn" : "");
            const std::vector<float> x = test::normals(size_t(M) * heads * hd, rng, t, 4.0f);
            std::vector<float> want = x, got = x;
            cpu->rope(want.data(), M, heads, pos.data(), table, t,
                      adjacent ? RopePairs::AdjacentPairs : RopePairs::Halves);
            const cuda::RopeJob job{got.data(), heads, cuda::NonFiniteSlot{}, cuda::InRound{}};
            ew::rope(test::HostLaunch{}, &job, 1, M, hd, hd, pos.data(), table.cos_row(0), table.sin_row(0),
                     cuda::store_of(t), adjacent, rounding == RopeRounding::Once, {}, layout);
            EXPECT_SAME_BITS(got, want, what);
          }
    }
}

// A partial rotary dimension (Phi-4-mini: 96 of 128) and longrope's long rows: the pairs past
// rotary_dim/2 pass their values through, in every layout and dtype, as the CPU's rotation does.
TEST(CudaRopeOnCpu, PartialRotaryAndLongRowsAreTheCpuRotation) {
  std::mt19937 rng(23);
  const int M = 3, heads = 2, hd = 64, rd = 48;
  RopeScalingSpec lr;
  lr.type = RopeScalingSpec::Type::LongRope;
  lr.original_max_pos = 32;
  lr.attention_factor = 1.19;
  for (int i = 0; i < rd / 2; ++i) {
    lr.short_factors.push_back(1.0f + 0.01f * float(i));
    lr.long_factors.push_back(1.0f + 0.5f * float(i));
  }
  const RopeTable table(hd, 128, 10000.0f, lr, false, RopeRounding::Terms, rd);
  for (int r = 0; r < table.rows(); ++r) table.cos_row(r), table.sin_row(r);
  const std::vector<int> rows = {3, 128 + 40, 128 + 127};  // a short row, then long ones
  auto cpu = make_kernels(KernelPolicy::Standard, nullptr);
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (ew::RopeLayout layout : {ew::RopeLayout::Auto, ew::RopeLayout::OneUnit, ew::RopeLayout::Rounds}) {
      const std::vector<float> x = test::normals(size_t(M) * heads * hd, rng, t, 4.0f);
      std::vector<float> want = x, got = x;
      cpu->rope(want.data(), M, heads, rows.data(), table, t, RopePairs::Halves);
      const cuda::RopeJob job{got.data(), heads, cuda::NonFiniteSlot{}, cuda::InRound{}};
      ew::rope(test::HostLaunch{}, &job, 1, M, hd, rd, rows.data(), table.cos_row(0), table.sin_row(0),
               cuda::store_of(t), false, false, {}, layout);
      EXPECT_SAME_BITS(got, want, std::string(dtype_name(t)) + " layout " + std::to_string(int(layout)));
      for (size_t h = 0; h < size_t(M * heads); ++h)  // the passed-through dimensions, untouched
        for (int i = rd; i < hd; ++i) ASSERT_EQ(f32_bits(got[h * hd + size_t(i)]), f32_bits(x[h * hd + size_t(i)]));
    }
  const cuda::RopeJob job{nullptr, heads, cuda::NonFiniteSlot{}, cuda::InRound{}};
  EXPECT_THROW(ew::rope(test::HostLaunch{}, &job, 1, M, hd, rd, rows.data(), table.cos_row(0), table.sin_row(0),
                        cuda::kF32, true, false),
               std::invalid_argument);  // adjacent pairs rotate whole heads only
}

}  // namespace
}  // namespace kvp
