#pragma once
// cuBLAS opened on first use instead of linked. Linking it loads libcublasLt (540 MB) into every
// process, and its static initialisers cost each one ~0.5 s and ~220 MB of memory before main():
// `kvparity --version`, every CPU run of a CUDA build and every CLI test paid that, though only a
// CUDA GEMM needs the library. The backend calls cuBLAS through this table alone.
#include <cublas_v2.h>

#include <string>

namespace kvp::cuda {

// cublasGemmEx's exported (C) form; the headers add a C++ overload taking a cudaDataType compute
// type, an inline function of their own, which no pointer to the library can stand for.
using CublasGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                        const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                        const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
static_assert(sizeof(static_cast<CublasGemmEx>(&cublasGemmEx)) > 0, "the headers' exported cublasGemmEx");

// The entry points the backend uses, with the headers' own signatures (the _v2 ones where the
// headers map the plain names to them).
struct Cublas {
  decltype(&cublasCreate) create;
  decltype(&cublasDestroy) destroy;
  decltype(&cublasSetStream) set_stream;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSetWorkspace) set_workspace;
  CublasGemmEx gemm_ex;
  decltype(&cublasGetProperty) get_property;
  decltype(&cublasGetStatusName) status_name;
  decltype(&cublasGetStatusString) status_string;
};

// The table, the library opened on the first call: the soname of the cuBLAS the backend was
// compiled against (libcublas.so.<major>) where the loader finds it (LD_LIBRARY_PATH, the
// binary's run path, ld.so.cache), else in the toolkit's library folder found at configure time.
// Throws an error naming the file and the loader's reason where it is missing or lacks a symbol.
const Cublas& cublas();

// The file name cublas() opens: libcublas.so.<major of the headers>.
std::string cublas_soname();

// What cublas() does once, for any file name (the tests' missing and wrong libraries): opens
// `soname`, then the toolkit's folder's file of that name, and resolves every entry point; an error
// names the file and the loader's reason where it cannot be opened or lacks a symbol.
Cublas open_cublas(const std::string& soname);

}  // namespace kvp::cuda
