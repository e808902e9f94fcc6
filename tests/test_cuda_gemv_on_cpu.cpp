// The `standard` policy's decode GEMV (src/cuda/cuda_gemv_kernel.cuh), its own source run on the
// CPU (simt_host.h: a thread per CUDA thread, shuffles exchanged between a warp's lanes). Its order
// is written out here — lane l's fp32 fma over its 16-byte pieces l, l + 32, ... in increasing
// order, eight products a piece, then a butterfly of adds over lane distances 16, 8, 4, 2, 1 — and
// the kernel must give those bits for every row count it takes, every K (pieces past a lane's last
// batch of loads, a K not a multiple of 256) and N (a last block with rows past N), writing each
// output once and nothing else. A piece fed to the wrong lane, a wrong shuffle distance or a row of
// x read at another's offset fails it. The CUDA suite times it (kvparity_bench standard-gemv rows).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "test_util.h"
// The kernel's source, built for the host (after every other header: simt_host.h defines the CUDA
// keywords as macros).
#include "cuda/cuda_gemv_kernel.cuh"
#include "cuda_on_cpu.h"

namespace kvp {
namespace {

// The kernel's order, by definition.
std::vector<float> gemv_order(const std::vector<float>& x, const std::vector<float>& w, int M, int K, int N) {
  std::vector<float> y(size_t(M) * N);
  const int pieces = K / 8;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      std::array<float, 32> lane{};
      for (int l = 0; l < 32; ++l)
        for (int p = l; p < pieces; p += 32)
          for (int j = 0; j < 8; ++j) {
            const size_t k = size_t(p) * 8 + size_t(j);
            lane[size_t(l)] = std::fma(x[size_t(m) * K + k], w[size_t(n) * K + k], lane[size_t(l)]);
          }
      for (int off = 16; off > 0; off /= 2) {
        std::array<float, 32> next{};
        for (int l = 0; l < 32; ++l) next[size_t(l)] = lane[size_t(l)] + lane[size_t(l ^ off)];
        lane = next;
      }
      y[size_t(m) * N + n] = lane[0];
    }
  return y;
}

TEST(CudaGemvOnCpu, EveryRowIsTheWrittenOrderBitForBit) {
  std::mt19937 rng(41);
  for (DType t : {DType::F16, DType::BF16})
    for (auto [K, N] : {std::pair{8, 3}, std::pair{2056, 17}, std::pair{4104, 9}, std::pair{640, 70}})
      for (int M = 1; M <= cuda::gemv::kMaxRows; ++M) {
        const auto xf = test::normals(size_t(M) * K, rng, t);
        const auto wf = test::normals(size_t(N) * K, rng, t);
        std::vector<uint16_t> xb(xf.size()), wb(wf.size());
        from_f32(t, xf.data(), xb.data(), xf.size());
        from_f32(t, wf.data(), wb.data(), wf.size());
        // One guard row past y: nothing may be written there.
        std::vector<float> y(size_t(M + 1) * N, NAN);
        const int store = cuda::store_of(t);
        ASSERT_TRUE(cuda::gemv::applies(M, store, xb.data(), wb.data(), K));
        cuda::gemv::gemv(test::HostLaunch{}, xb.data(), M, wb.data(), store, K, N, y.data());
        const std::string what = std::string(dtype_name(t)) + " M " + std::to_string(M) + " K " + std::to_string(K) +
                                 " N " + std::to_string(N);
        const std::vector<float> got(y.begin(), y.begin() + long(M) * N);
        EXPECT_SAME_BITS(got, gemv_order(xf, wf, M, K, N), what);
        for (size_t i = size_t(M) * N; i < y.size(); ++i) EXPECT_TRUE(std::isnan(y[i])) << what << ": wrote past y";
      }
}

// What the kernel does not take goes to cuBLAS: more rows, fp32, K not a multiple of 8, a row
// that does not start on 16 bytes.
TEST(CudaGemvOnCpu, TakesOnlyWhatItsLoadsServe) {
  alignas(16) static uint16_t buf[64] = {};
  using cuda::gemv::applies;
  EXPECT_TRUE(applies(1, cuda::kF16, buf, buf, 16));
  EXPECT_TRUE(applies(cuda::gemv::kMaxRows, cuda::kBF16, buf, buf, 16));
  EXPECT_FALSE(applies(cuda::gemv::kMaxRows + 1, cuda::kF16, buf, buf, 16));
  EXPECT_FALSE(applies(0, cuda::kF16, buf, buf, 16));
  EXPECT_FALSE(applies(1, cuda::kF32, buf, buf, 16));
  EXPECT_FALSE(applies(1, cuda::kF16, buf, buf, 12));
  EXPECT_FALSE(applies(1, cuda::kF16, buf + 1, buf, 16));
  EXPECT_FALSE(applies(1, cuda::kF16, buf, buf + 4, 16));
}

}  // namespace
}  // namespace kvp
