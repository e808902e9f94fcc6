// cuBLAS is opened on first use (src/cuda/cuda_cublas.h), not linked: a process that runs no CUDA
// GEMM never loads it. These need no GPU: opening the library and reading its version do not.
#include <gtest/gtest.h>

#include <string>

#include "cli_run.h"
#include "cuda/cuda_cublas.h"

namespace kvp {
namespace {

TEST(CudaCublas, OpensTheLibraryTheBackendWasBuiltAgainst) {
  const cuda::Cublas& api = cuda::cublas();
  for (const void* f : {(const void*)api.create, (const void*)api.destroy, (const void*)api.set_stream,
                        (const void*)api.set_math_mode, (const void*)api.set_workspace, (const void*)api.gemm_ex,
                        (const void*)api.get_property, (const void*)api.status_name, (const void*)api.status_string})
    EXPECT_NE(f, nullptr);
  int major = -1;
  ASSERT_EQ(api.get_property(MAJOR_VERSION, &major), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(major, CUBLAS_VER_MAJOR);
  EXPECT_STREQ(api.status_name(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
  EXPECT_EQ(&cuda::cublas(), &api) << "opened once";
}

// The loader's own record of what it maps: a CPU command never maps cuBLAS (nor cuBLASLt, which
// only cuBLAS pulls in), and so starts as a build without CUDA does.
TEST(CudaCublas, ACpuCommandNeverLoadsIt) {
  const auto r = test::run_command("LD_DEBUG=files " + std::string(KVPARITY_BIN) + " --version");
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_NE(r.err.find("libcudart"), std::string::npos) << "LD_DEBUG gave no list of the files mapped:\n" << r.err;
  EXPECT_EQ(r.err.find("libcublas"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kvp
