#include "cuda/cuda_cublas.h"

#include <dlfcn.h>

#include <string>

#include "cuda/cuda_fail.h"

namespace kvp::cuda {
namespace {

// The exported name a header name stands for: cublas_v2.h defines cublasCreate as
// cublasCreate_v2 (and so on), and dlsym needs the expanded name.
#define KVP_CUBLAS_NAME_(name) #name
#define KVP_CUBLAS_NAME(name) KVP_CUBLAS_NAME_(name)

template <class F>
void resolve(void* lib, const std::string& soname, const char* name, F& slot) {
  dlerror();
  void* p = dlsym(lib, name);
  if (p == nullptr) {
    const char* why = dlerror();
    fail_input("cannot use " + soname + ": no symbol " + name + (why ? std::string(" (") + why + ")" : "") +
               "; the CUDA backend was built against cuBLAS " + std::to_string(CUBLAS_VER_MAJOR) + "." +
               std::to_string(CUBLAS_VER_MINOR));
  }
  slot = reinterpret_cast<F>(p);
}

}  // namespace

Cublas open_cublas(const std::string& soname) {
  // RTLD_LOCAL: its symbols serve this table only. RTLD_NOW: a missing dependency (libcublasLt)
  // fails here, with the loader's message, not at a GEMM.
  void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string why = lib == nullptr ? dlerror() : "";
#ifdef KVP_CUDA_LIBRARY_DIR
  if (lib == nullptr) {
    const std::string path = std::string(KVP_CUDA_LIBRARY_DIR) + "/" + soname;
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) why += "; " + std::string(dlerror());
  }
#endif
  if (lib == nullptr)
    fail_input("cannot load " + soname + " (" + why +
               "): the CUDA backend needs cuBLAS; put its folder on LD_LIBRARY_PATH");
  Cublas t{};
  resolve(lib, soname, KVP_CUBLAS_NAME(cublasCreate), t.create);
  resolve(lib, soname, KVP_CUBLAS_NAME(cublasDestroy), t.destroy);
  resolve(lib, soname, KVP_CUBLAS_NAME(cublasSetStream), t.set_stream);
  resolve(lib, soname, KVP_CUBLAS_NAME(cublasSetMathMode), t.set_math_mode);
  resolve(lib, soname, KVP_CUBLAS_NAME(cublasSetWorkspace), t.set_workspace);
  resolve(lib, soname, KVP_CUBLAS_NAME(cublasGemmEx), t.gemm_ex);
  resolve(lib, soname, KVP_CUBLAS_NAME(cublasGetProperty), t.get_property);
  resolve(lib, soname, KVP_CUBLAS_NAME(cublasGetStatusName), t.status_name);
  resolve(lib, soname, KVP_CUBLAS_NAME(cublasGetStatusString), t.status_string);
  return t;  // the library stays open for the process's life
}

std::string cublas_soname() { return "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR); }

const Cublas& cublas() {
  // An open that throws leaves the table uninitialised: the next call tries again, with its reason.
  static const Cublas table = open_cublas(cublas_soname());
  return table;
}

}  // namespace kvp::cuda
