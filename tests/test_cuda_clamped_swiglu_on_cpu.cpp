// GPT-OSS's clamped SwiGLU in the CUDA backend's kernels, their own source run on the CPU
// (src/cuda/simt_host.h), over values past both limits, at them, NaN, infinities and -0:
//  - `portable` (cuda_portable_kernels.cuh): the CPU portable kernels' bits (pscalar's
//    clamped_swiglu, the policy's own exp), in every dtype;
//  - `standard` and `invariant` (cuda_elementwise_kernels.cuh): elementwise.cpp's operations and
//    rounding points. On the host its expf is the C library's, which the CPU's std::exp calls, so
//    the bits are the CPU's here; on a GPU CUDA's expf may move the sigmoid by an ulp before it is
//    rounded (tests/cuda/test_cuda_gpt_oss.cpp holds the model to 1e-4 there). And as the fusion
//    machinery uses it: gate's and up's pending rounding points folded in, the 16-bit copy
//    written, each the same bits and NaN/Inf reports as the unfused launches.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
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
#include "cuda/cuda_portable_kernels.cuh"
#include "cuda_fusion_on_cpu_util.h"
#include "cuda_on_cpu.h"

namespace kvp {
namespace {

using cuda::InRound;
using cuda::OutCopy;
using test::Hits;
using test::HostLaunch;

constexpr float kAlpha = 1.702f, kLimit = 7.0f;  // GptOssExperts' alpha and swiglu_limit

// gate and up of n values in act: normals wide enough to pass both limits often, and at fixed
// places the limits themselves, just past them, NaN, infinities, -0 and a gate whose sigmoid
// underflows.
void swiglu_inputs(size_t n, std::mt19937& rng, DType act, std::vector<float>& g, std::vector<float>& u) {
  g = test::normals(n, rng, act, 8.0f);
  u = test::normals(n, rng, act, 8.0f);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float specials[][2] = {{kLimit, kLimit}, {-kLimit, -kLimit}, {7.01f, -7.01f}, {-7.01f, 7.01f}, {nan, 1.0f},
                               {1.0f, nan},      {inf, 2.0f},        {-inf, 2.0f},    {3.0f, inf},     {3.0f, -inf},
                               {-0.0f, -0.0f},   {-200.0f, 5.0f},    {-1.0f, -1.0f},  {0.5f, -30.0f}};
  size_t at = 11;
  for (const auto& [gv, uv] : specials) {
    g[at] = round_to(act, gv);
    u[at] = round_to(act, uv);
    at += 37;
  }
}

TEST(CudaSwigluOnCpu, PortableClampedSwigluIsTheCpuPortableBits) {
  auto cpu = make_kernels(KernelPolicy::Portable, nullptr);
  std::mt19937 rng(51);
  for (DType act : {DType::F32, DType::F16, DType::BF16}) {
    const size_t n = 1000;
    std::vector<float> g, u;
    swiglu_inputs(n, rng, act, g, u);
    std::vector<float> want = g, got = g;
    cpu->clamped_swiglu(want.data(), u.data(), n, kAlpha, kLimit, act);
    Hits hits;
    cuda::portable::clamped_swiglu(HostLaunch{}, 2, got.data(), u.data(), n, cuda::store_of(act), kAlpha, kLimit,
                                   hits.at(0));
    EXPECT_SAME_BITS(got, want, std::string(dtype_name(act)) + " clamped SwiGLU");
    EXPECT_EQ(hits.any, 1) << dtype_name(act) << ": the NaN rows are reported";
    // A gate past the limit is the limit's: the result does not move with it.
    EXPECT_EQ(got[11 + 2 * 37],
              pscalar::clamped_swiglu(kLimit, -kLimit, kAlpha, kLimit, [&](float x) { return round_to(act, x); }));
  }
}

TEST(CudaSwigluOnCpu, StandardClampedSwigluHasTheCpuRoundingPoints) {
  std::mt19937 rng(52);
  for (DType act : {DType::F32, DType::F16, DType::BF16}) {
    const size_t n = 1000;
    std::vector<float> g, u;
    swiglu_inputs(n, rng, act, g, u);
    std::vector<float> want = g, got = g, ug = u;
    kvp::clamped_swiglu(want.data(), u.data(), n, kAlpha, kLimit, act);
    Hits hits;
    cuda::elementwise::clamped_swiglu(HostLaunch{}, got.data(), ug.data(), n, cuda::store_of(act), kAlpha, kLimit,
                                      hits.at(0), InRound{}, InRound{}, OutCopy{});
    EXPECT_SAME_BITS(got, want, std::string(dtype_name(act)) + " clamped SwiGLU");
    EXPECT_SAME_BITS(ug, u, std::string(dtype_name(act)) + ": up left as it was");
    EXPECT_EQ(hits.any, 1) << dtype_name(act);
    // Within an ulp of act of the unclamped, unrounded function where neither limit bites (the
    // rounding points are where they should be, not elsewhere).
    const float ulp = act == DType::F32 ? 1.2e-7f : act == DType::F16 ? 9.8e-4f : 7.9e-3f;
    for (size_t i = 0; i < n; ++i) {
      if (!(std::abs(g[i]) < kLimit && std::abs(u[i]) < kLimit)) continue;
      const double glu = double(g[i]) / (1.0 + std::exp(-double(kAlpha) * g[i]));
      const double exact = (double(u[i]) + 1.0) * glu;
      ASSERT_LE(std::abs(got[i] - exact), 4 * ulp * std::max(1.0, std::abs(exact))) << dtype_name(act) << " " << i;
    }
  }
}

// The fusion machinery's forms (CudaKernels::gated): gate's and up's pending rounding points read
// by the kernel (written back or not), the 16-bit copy of the result, the copy alone: the bits
// and NaN/Inf reports of rounding first and then launching the kernel plain.
TEST(CudaSwigluOnCpu, StandardClampedSwigluTakesItsInputsPendingRounds) {
  namespace ew = cuda::elementwise;
  std::mt19937 rng(53);
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int store : {cuda::kF16, cuda::kBF16}) {
      const int a = cuda::store_of(t);
      const size_t n = 777;
      auto gw = test::gemm_sums(n, rng, true, 6.0f), uw = test::gemm_sums(n, rng, false, 6.0f);
      uw[n - 5] = std::numeric_limits<float>::infinity();
      uw[n - 9] = std::numeric_limits<float>::quiet_NaN();
      const auto g0 = gw, u0 = uw;
      Hits hw;
      const cuda::RoundJob jobs[] = {{gw.data(), n, a, hw.at(1), OutCopy{}}, {uw.data(), n, a, hw.at(2), OutCopy{}}};
      ew::round_checks(HostLaunch{}, jobs, 2);
      ew::clamped_swiglu(HostLaunch{}, gw.data(), uw.data(), n, a, kAlpha, kLimit, hw.at(3), InRound{}, InRound{},
                         OutCopy{});
      std::vector<float> copy_w(n, 0.0f);
      ew::to_storage(HostLaunch{}, gw.data(), n, copy_w.data(), store);
      const std::string what = std::string(dtype_name(t)) + " copy " + std::to_string(store);
      for (bool write_back : {true, false})
        for (bool only : {false, true}) {
          if (only && write_back) continue;
          auto gg = g0, ug = u0;
          std::vector<float> copy_g(n, 0.0f);
          Hits hg;
          ew::clamped_swiglu(HostLaunch{}, gg.data(), ug.data(), n, a, kAlpha, kLimit, hg.at(3),
                             InRound{a, hg.at(1), write_back}, InRound{a, hg.at(2), write_back},
                             OutCopy{copy_g.data(), store, only});
          const std::string how = what + (write_back ? "" : ", no write-back") + (only ? ", copy only" : "");
          EXPECT_SAME_BITS(gg, only ? g0 : gw, how + ": gate");
          EXPECT_SAME_BITS(ug, write_back ? uw : u0, how + ": up");
          EXPECT_SAME_BITS(copy_g, copy_w, how + ": 16-bit copy");
          test::expect_same_hits(hg, hw, how);
        }
    }
}

}  // namespace
}  // namespace kvp
