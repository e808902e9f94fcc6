// matmul on the shapes of one TinyLlama-1.1B layer (and its lm_head): the decode GEMV (M = 1) and
// batched decode steps (M = 4, 8) are memory-bound, so they report GB/s of weights streamed; the
// prefill GEMMs (M = 64, 256) report FLOP/s. The scalar reference policy runs only the small
// shapes. Policies: reference, standard, invariant, portable. Then Llama-2-7B's decode GEMVs
// (M = 1, GB/s) and prefill GEMMs (K = 4096 and 11008, M = 64..512, fp16 weights) with their share
// of the measured fp32 FMA peak (pct_peak) on the SIMD target in use (kvparity_bench --simd=avx2
// measures AVX2 on an AVX-512 machine).
#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

#include "bench_common.h"
#include "kernels/fma_peak.h"

namespace kvp::bench {
namespace {

constexpr Shape kShapes[] = {
    {"q_o_2048x2048", 2048, 2048},
    {"kv_256x2048", 256, 2048},
    {"gate_up_5632x2048", 5632, 2048},
    {"down_2048x5632", 2048, 5632},
    {"lm_head_32000x2048", 32000, 2048},
};

void run_matmul(benchmark::State& state, KernelPolicy policy, DType wt, int M, Shape s, int threads) {
  Kernels& k = kernels_for(policy, threads);
  const TensorView W = weights(wt, s.N, s.K);
  std::vector<float> x(size_t(M * s.K)), y(size_t(M * s.N));
  fill_pattern(DType::F32, x.data(), x.size(), 3);
  for (auto _ : state) {
    k.matmul(x.data(), M, W, DType::F32, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  // Bytes: the weights only (what bounds decode); x and y are tiny next to them.
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(W.nbytes()));
  state.counters["FLOPS"] =
      benchmark::Counter(2.0 * M * double(s.N) * double(s.K), benchmark::Counter::kIsIterationInvariantRate);
}

constexpr Shape k7bShapes[] = {
    {"7b_q_4096x4096", 4096, 4096},
    {"7b_gate_11008x4096", 11008, 4096},
    {"7b_down_4096x11008", 4096, 11008},
};

void run_prefill_gemm(benchmark::State& state, KernelPolicy policy, int M, Shape s, int threads) {
  static std::map<int, double> peak;  // threads -> GFLOP/s, measured once per process
  if (!peak.count(threads)) peak[threads] = measure_fma_peak_gflops(threads);
  run_matmul(state, policy, DType::F16, M, s, threads);
  state.counters["pct_peak"] = benchmark::Counter(100.0 * 2.0 * M * double(s.N) * double(s.K) / (peak[threads] * 1e9),
                                                  benchmark::Counter::kIsIterationInvariantRate);
}

bool register_all() {
  for (KernelPolicy policy : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant, KernelPolicy::Portable})
    for (DType wt : {DType::F32, DType::F16, DType::BF16})
      for (int M : {1, 4, 8, 64, 256})
        for (const Shape& s : kShapes)
          for (int threads : {1, 2}) {
            if (policy == KernelPolicy::Reference) {
              // Scalar and single-threaded: only shapes that finish in well under a second.
              if (threads != 1) continue;
              if (!((M == 1 && (s.N == 2048 && s.K == 2048)) || (M == 1 && s.N == 256) || (M == 64 && s.N == 256)))
                continue;
            }
            const std::string name = "matmul/" + policy_name(policy) + "/" + std::string(dtype_name(wt)) + "/M" +
                                     std::to_string(M) + "/" + s.name + "/threads:" + std::to_string(threads);
            auto* b = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
              run_matmul(st, policy, wt, M, s, threads);
            });
            b->Unit(benchmark::kMillisecond)->UseRealTime();
            if (policy == KernelPolicy::Reference) b->Iterations(2);
          }
  // Llama-2-7B's decode GEMVs: weights streamed from memory (bytes_per_second; the matrices are
  // 32-86 MB, past any cache).
  for (KernelPolicy policy : {KernelPolicy::Standard, KernelPolicy::Invariant, KernelPolicy::Portable})
    for (const Shape& s : k7bShapes)
      for (int threads : {1, 2}) {
        const std::string name = "matmul/" + policy_name(policy) + "/fp16/M1/" + s.name + "/threads:" +
                                 std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
          run_matmul(st, policy, DType::F16, 1, s, threads);
        })->Unit(benchmark::kMillisecond)->UseRealTime();
      }
  for (KernelPolicy policy : {KernelPolicy::Standard, KernelPolicy::Invariant, KernelPolicy::Portable})
    for (int M : {64, 128, 256, 512})
      for (const Shape& s : k7bShapes)
        for (int threads : {1, 2}) {
          const std::string name = "matmul/" + policy_name(policy) + "/fp16/M" + std::to_string(M) + "/" + s.name +
                                   "/threads:" + std::to_string(threads);
          benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
            run_prefill_gemm(st, policy, M, s, threads);
          })->Unit(benchmark::kMillisecond)->UseRealTime();
        }
  return true;
}

const bool registered = register_all();

}  // namespace
}  // namespace kvp::bench
