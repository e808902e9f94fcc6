// Micro-benchmarks of the kernel policies and of the machine's memory bandwidth. Run e.g.
//   kvparity_bench --benchmark_filter='matmul/standard/fp16/M1/' --benchmark_repetitions=3
// The machine's read bandwidth (memory/read) divided into the weight bytes per token is the
// bandwidth bound of decode; matmul M=1 rows report the fraction of it they reach as GB/s.
// --simd=auto|avx512|avx2|scalar pins the kernels' SIMD target (kernels/simd_target.h) for the run.
#include <benchmark/benchmark.h>

#include <cstring>
#include <iostream>
#include <string>

#include "core/error.h"
#include "kernels/simd_target.h"

int main(int argc, char** argv) {
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--simd=", 7) == 0) {
      try {
        kvp::use_simd(kvp::parse_simd(argv[i] + 7));
      } catch (const kvp::Error& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 2;
      }
      std::cerr << "simd: " << kvp::simd_in_use() << "\n";
      continue;
    }
    argv[kept++] = argv[i];
  }
  argc = kept;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
