// `standard`'s own decode GEMV (src/cuda/cuda_gemv_kernel.cuh, KVPARITY_CUDA_GEMV=1) on the GPU:
// its products close to the fp32 reference for the row counts it takes (a piece fed to the wrong
// lane would be O(1) off), the same bits call after call and in a CUDA graph replay, and a whole
// standard decode with it close to one on cuBLAS. Its order itself is checked on the CPU
// (CudaGemvOnCpu.*); kvparity_bench's standard-gemv rows time it against cuBLAS.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "cuda/cuda_runtime_api.h"
#include "cuda/cuda_test_util.h"
#include "kernels/kernels.h"
#include "model/synthetic.h"
#include "test_util.h"

namespace kvp {
namespace {

struct GemvOn {  // the switch on in its scope, then off (the default), however the test ends
  GemvOn() { cuda::set_standard_gemv(true); }
  ~GemvOn() { cuda::set_standard_gemv(false); }
};

TEST(CudaGemv, ProductIsCloseToFp32AndTheSameBitsEveryCall) {
  KVP_REQUIRE_GPU();
  const GemvOn on;
  auto ref = make_kernels(KernelPolicy::Reference, nullptr, Device::Cpu);
  std::mt19937 rng(51);
  for (DType act : {DType::F16, DType::BF16})
    for (auto [K, N] : {std::pair{4096, 300}, std::pair{2056, 77}, std::pair{1000, 40}}) {
      auto gpu = make_kernels(KernelPolicy::Standard, nullptr, Device::Cuda);
      const auto wf = test::normals(size_t(N) * K, rng, act);
      std::vector<uint8_t> wb(wf.size() * 2);
      from_f32(act, wf.data(), wb.data(), wf.size());
      const TensorView W = test::weight_view(wb, act, N, K);
      for (int M = 1; M <= 5; ++M) {  // 5: past the kernel's rows, cuBLAS again
        const auto x = test::normals(size_t(M) * K, rng, act);
        DeviceBuffer dx(Device::Cuda, x.size() * 4), dy(Device::Cuda, size_t(M) * N * 4);
        host_to_device(Device::Cuda, dx.data(), x.data(), x.size() * 4);
        std::vector<float> want(size_t(M) * N), got(want.size()), again(want.size());
        ref->matmul(x.data(), M, W, act, want.data());
        gpu->matmul(dx.as<float>(), M, W, act, dy.as<float>());
        gpu->to_host(got.data(), dy.data(), got.size() * 4);
        gpu->matmul(dx.as<float>(), M, W, act, dy.as<float>());
        gpu->to_host(again.data(), dy.data(), again.size() * 4);
        const std::string what = std::string(dtype_name(act)) + " M " + std::to_string(M) + " K " + std::to_string(K);
        EXPECT_LE(test::rel_err(got, want), 1e-5) << what;
        EXPECT_SAME_BITS(again, got, what + ": a second call");
      }
    }
}

// Greedy decode on the GEMV, eager and replayed as graphs, against the same decode on cuBLAS: the
// graphs change no bit; the prefill (more rows than the GEMV takes: cuBLAS either way) is the same
// bits, and the first decode step's logits, from the same prefix, stay close (other sum orders).
TEST(CudaGemv, DecodeWithItIsCloseToCublasAndGraphsChangeNoBit) {
  KVP_REQUIRE_GPU();
  auto model = Model::from_checkpoint(synthesize_checkpoint(synthetic_config("llama", "tiny"), DType::F32), DType::F16);
  const std::vector<int> prompt{1, 17, 23, 99, 5};
  auto run = [&](bool gemv, bool graphs) {
    cuda::set_standard_gemv(gemv);
    cuda::set_pass_graphs(graphs);
    const test::Trace t = test::trace(model, test::on_gpu(KvType::of(DType::F16)), prompt, CacheMode::On, 24);
    cuda::set_standard_gemv(false);
    cuda::set_pass_graphs(true);
    return t;
  };
  const test::Trace cublas = run(false, true), eager = run(true, false), graphed = run(true, true);
  EXPECT_TRUE(test::same_bits(eager, graphed)) << "graph replay changed a logit of the GEMV decode";
  ASSERT_GE(cublas.logits.size(), 2u);
  ASSERT_GE(eager.logits.size(), 2u);
  EXPECT_EQ(eager.logits[0], cublas.logits[0]) << "the prefill's logits";
  double worst = 0;
  for (size_t i = 0; i < eager.logits[1].size(); ++i)
    worst = std::max(worst, double(std::fabs(eager.logits[1][i] - cublas.logits[1][i])));
  std::printf("[ measured ] tiny llama fp16: GEMV vs cuBLAS, first decode step max |dlogit| %.3g\n", worst);
  EXPECT_LE(worst, 0.05);
}

}  // namespace
}  // namespace kvp
