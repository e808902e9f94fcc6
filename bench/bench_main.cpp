// Micro-benchmarks of the kernel policies and of the machine's memory bandwidth. Run e.g.
//   kvparity_bench --benchmark_filter='matmul/standard/fp16/M1/' --benchmark_repetitions=3
// The machine's read bandwidth (memory/read) divided into the weight bytes per token is the
// bandwidth bound of decode; matmul M=1 rows report the fraction of it they reach as GB/s.
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
