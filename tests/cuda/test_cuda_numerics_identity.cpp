// What a results folder keeps of a CUDA side (cuda::numerics_identity, lab/numerics_identity.h):
// the card and every switch that changes a policy's bits, and nothing for a policy they do not touch.
#include <map>
#include <string>

#include "cuda_test_util.h"
#include "kernels/kernels.h"
#include "lab/numerics_identity.h"

namespace kvp {
namespace {

std::map<std::string, std::string> identity(KernelPolicy k) {
  std::map<std::string, std::string> m;
  for (const auto& [key, value] : cuda::numerics_identity(k)) m[key] = value;
  return m;
}

TEST(CudaNumericsIdentity, StandardNamesTheCardCublasAndEachSwitchThatChangesItsBits) {
  KVP_REQUIRE_GPU();
  const auto base = identity(KernelPolicy::Standard);
  ASSERT_EQ(base.size(), 6u);
  EXPECT_NE(base.at("gpu").find(" SMs"), std::string::npos) << base.at("gpu");
  EXPECT_NE(cuda::describe().find(base.at("gpu").substr(0, base.at("gpu").find(','))), std::string::npos);
  EXPECT_NE(base.at("cublas"), "unknown");
  EXPECT_EQ(base.at("gemv"), cuda::standard_gemv_on() ? "on" : "off");
  EXPECT_EQ(base.at("decode_split_keys"), std::to_string(cuda::decode_split_keys()));

  // Each bit-changing switch shows; one that keeps the bits does not.
  const bool gemv = cuda::standard_gemv_on(), group = cuda::group_launches_on(), fusion = cuda::launch_fusion_on();
  const int keys = cuda::decode_split_keys();
  cuda::set_standard_gemv(!gemv);
  EXPECT_NE(identity(KernelPolicy::Standard).at("gemv"), base.at("gemv"));
  cuda::set_standard_gemv(gemv);
  cuda::set_decode_split_keys(keys == 64 ? 128 : 64);
  EXPECT_NE(identity(KernelPolicy::Standard).at("decode_split_keys"), base.at("decode_split_keys"));
  cuda::set_decode_split_keys(keys);
  cuda::set_group_launches(!group);
  EXPECT_NE(identity(KernelPolicy::Standard).at("group_launches"), base.at("group_launches"));
  cuda::set_group_launches(group);
  {
    test::GemmOut16 out16(!cuda::gemm_out16_on());
    EXPECT_NE(identity(KernelPolicy::Standard).at("gemm_out16"), base.at("gemm_out16"));
  }
  cuda::set_launch_fusion(!fusion);
  EXPECT_EQ(identity(KernelPolicy::Standard), base);
  cuda::set_launch_fusion(fusion);
  EXPECT_EQ(identity(KernelPolicy::Standard), base);
}

TEST(CudaNumericsIdentity, InvariantNamesTheArchitectureAndTheGemmFamilyPortableNothing) {
  KVP_REQUIRE_GPU();
  cuda::set_invariant_gemm_kernel("auto");
  const auto here = identity(KernelPolicy::Invariant);
  ASSERT_EQ(here.size(), 2u);
  EXPECT_EQ(here.at("gpu_arch").substr(0, 3), "sm_");
  EXPECT_EQ(here.at("gemm_family"), cuda::wgmma_kernels_available() ? "wgmma" : "mma.sync");
  // Kernels of one family give its bits: forcing one of the same family changes nothing recorded.
  cuda::set_invariant_gemm_kernel("ring");
  EXPECT_EQ(identity(KernelPolicy::Invariant).at("gemm_family"), "mma.sync");
  if (cuda::wgmma_kernels_available()) {
    cuda::set_invariant_gemm_kernel("wgmma64x32");
    EXPECT_EQ(identity(KernelPolicy::Invariant), here);
  }
  cuda::set_invariant_gemm_kernel("auto");
  EXPECT_TRUE(identity(KernelPolicy::Portable).empty());

  // The lab's record of a CUDA side and a CPU side side by side.
  RunSettings gpu, cpu;
  gpu.device = Device::Cuda;
  gpu.kernels = cpu.kernels = KernelPolicy::Invariant;
  const auto j = numerics_identity({gpu, cpu});
  EXPECT_EQ(j["cuda"]["invariant"]["gemm_family"], here.at("gemm_family")) << j.dump();
  EXPECT_TRUE(j["cpu"]["invariant"].contains("simd")) << j.dump();
  EXPECT_FALSE(j["cuda"].contains("standard")) << j.dump();
}

}  // namespace
}  // namespace kvp
