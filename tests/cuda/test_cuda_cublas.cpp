// cuBLAS is opened on first use (src/cuda/cuda_cublas.h), not linked: a process that runs no CUDA
// GEMM never loads it. These need no GPU: opening the library and reading its version do not.
#include <gtest/gtest.h>

#include <string>

#include "cli_run.h"
#include "core/error.h"
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

// A library that cannot be opened, and one that lacks cuBLAS's symbols: errors naming the file,
// the loader's reason or the symbol (a CUDA run stops on them with exit 1).
TEST(CudaCublas, AMissingOrWrongLibraryIsAnErrorNamingIt) {
  auto error_of = [](const std::string& soname) {
    try {
      cuda::open_cublas(soname);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadInput);
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string missing = error_of("libcublas.so.999");
  EXPECT_NE(missing.find("cannot load libcublas.so.999 ("), std::string::npos) << missing;
  EXPECT_NE(missing.find("LD_LIBRARY_PATH"), std::string::npos) << missing;
  const std::string wrong = error_of("libcudart.so." + std::to_string(CUDART_VERSION / 1000));
  EXPECT_NE(wrong.find("cannot use libcudart.so."), std::string::npos) << wrong;
  EXPECT_NE(wrong.find("no symbol cublasCreate_v2"), std::string::npos) << wrong;
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
