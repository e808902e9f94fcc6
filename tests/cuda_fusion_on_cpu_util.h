#pragma once
// What the CPU suite's checks of the fused element-wise kernels share (test_cuda_fusion_on_cpu.cpp,
// test_cuda_gemm_out16_on_cpu.cpp): the NaN/Inf report slots a pass's kernels write, and values as
// a GEMM leaves them. Include it after the kernel headers (simt_host.h defines the CUDA keywords).
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_ops.h"

namespace kvp::test {

// The NaN/Inf report slots of a pass, as the backend's hits buffer holds them.
struct Hits {
  std::vector<unsigned long long> slot = std::vector<unsigned long long>(16, ~0ull);
  int any = 0;
  cuda::NonFiniteSlot at(int s) { return cuda::NonFiniteSlot{slot.data(), s, &any}; }
};

inline void expect_same_hits(const Hits& got, const Hits& want, const std::string& what) {
  EXPECT_EQ(got.slot, want.slot) << what << ": NaN/Inf reports";
  EXPECT_EQ(got.any, want.any) << what << ": the any flag";
}

// fp32 values as a GEMM leaves them (not representable in fp16/bf16), with, where `specials`,
// values that overflow fp16 (and bf16), NaN, -0 and an fp16 subnormal at fixed places.
inline std::vector<float> gemm_sums(size_t n, std::mt19937& rng, bool specials, float scale = 1.0f) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  if (specials && n > 40) {
    x[n / 3] = 70000.0f;      // +Inf in fp16
    x[n / 3 + 1] = -3.4e38f;  // -Inf in bf16 and fp16
    x[n / 2] = std::numeric_limits<float>::quiet_NaN();
    x[n / 2 + 2] = -0.0f;
    x[n / 4] = 3e-7f;  // an fp16 subnormal
    x[7] = 65519.0f;   // rounds down to 65504 in fp16; +Inf past 65520
    x[8] = 65520.0f;
  }
  return x;
}

}  // namespace kvp::test
