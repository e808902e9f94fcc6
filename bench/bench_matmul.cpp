// matmul on the shapes of one TinyLlama-1.1B layer (and its lm_head): the decode GEMV (M = 1) and
// a batched decode step (M = 4) are memory-bound, so they report GB/s of weights streamed; the
// prefill GEMMs (M = 64, 256) report FLOP/s. The scalar reference policy runs only the small
// shapes. Policies: reference, standard, invariant.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "bench_common.h"

namespace kvp::bench {
namespace {

struct Shape {
  const char* name;
  int64_t N, K;
};
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
    k.matmul(x.data(), M, W, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  // Bytes: the weights only (what bounds decode); x and y are tiny next to them.
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(W.nbytes()));
  state.counters["FLOPS"] =
      benchmark::Counter(2.0 * M * double(s.N) * double(s.K), benchmark::Counter::kIsIterationInvariantRate);
}

bool register_all() {
  for (KernelPolicy policy : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant})
    for (DType wt : {DType::F32, DType::F16, DType::BF16})
      for (int M : {1, 4, 64, 256})
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
  return true;
}

const bool registered = register_all();

}  // namespace
}  // namespace kvp::bench
