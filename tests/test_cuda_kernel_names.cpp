// The names `bench --device cuda` gives a decode graph's kernel nodes (src/cuda/kernel_names.h):
// what a node count is made of, so the name must keep what tells kernels apart and drop the rest.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/kernel_names.h"

namespace kvp {
namespace {

TEST(CudaKernelNames, ShortNameKeepsTheKernelAndItsTemplateArguments) {
  // nvcc's name of the standard decode attention (whole-row path, fp16 K/V, 4 dims a lane).
  EXPECT_EQ(cuda::short_kernel_name("_ZN3kvp4cuda11attn_decode50_GLOBAL__N__ea517cec_17_cuda_attention_cu_9567103113"
                                    "decode_kernelILi1ELi4ELb1EEEvPKNS0_8AttnDescENS0_9AttnShapeEPfPjNS0_9AttnStoreE"),
            "decode_kernel<1, 4, true>");
  // Template arguments with namespaces and spaces of their own, an unnamed namespace, a function
  // pointer among the arguments.
  EXPECT_EQ(cuda::short_kernel_name("_ZN2ns12_GLOBAL__N_11kINS_1PISt4pairIifEEELi3EEEvT_PFiiE"),
            "k<ns::P<std::pair<int, float> >, 3>");
  EXPECT_EQ(cuda::short_kernel_name("_ZN2ns3useEv"), "use");
  // C linkage, or a name the demangler does not know: as it is, cut to 80 characters.
  EXPECT_EQ(cuda::short_kernel_name("plain_c_kernel"), "plain_c_kernel");
  const std::string odd(100, 'x');
  EXPECT_EQ(cuda::short_kernel_name(odd.c_str()), std::string(77, 'x') + "...");
  EXPECT_EQ(cuda::short_kernel_name(nullptr), "?");
}

TEST(CudaKernelNames, TallyPutsTheMostFrequentFirst) {
  EXPECT_EQ(cuda::kernel_tally({"gemv", "rmsnorm", "gemv", "rope", "rmsnorm", "gemv"}), "gemv x3, rmsnorm x2, rope x1");
  EXPECT_EQ(cuda::kernel_tally({"b", "a"}), "a x1, b x1");
  EXPECT_EQ(cuda::kernel_tally({}), "");
}

}  // namespace
}  // namespace kvp
