#pragma once
// Measured fp32 FMA throughput, the ceiling for compute-bound prefill: a GEMM of M rows does
// 2*M*N*K flops, so its GFLOP/s against this peak says how much of the cores it uses. Measured on
// the SIMD target the kernels dispatch to (simd_target.h), so `--simd avx2` gives AVX2's peak.
namespace kvp {

// Best of a few runs of independent FMA chains in registers on `threads` threads (a pool created
// for the measurement), in GFLOP/s (an FMA counts 2 flops per lane).
double measure_fma_peak_gflops(int threads);

}  // namespace kvp
