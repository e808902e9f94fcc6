// STREAM-like memory bandwidth over buffers far beyond the last-level cache: a read-only sum
// (the access pattern of a decode GEMV) and a copy. Also the cost of one empty parallel region,
// which decode pays ~200 times per token.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "bench_common.h"
#include "kernels/bandwidth.h"
#include "kernels/simd_ops.h"

namespace kvp::bench {
namespace {

constexpr size_t kGiB = size_t(1) << 30;

void BM_Read(benchmark::State& state) {
  const int threads = int(state.range(0));
  static AlignedBuffer buf(kGiB);  // zero-filled, so every page is already mapped
  ThreadPool* pool = pool_for(threads);
  const size_t n = kGiB / sizeof(float);
  const float* p = buf.as<float>();
  std::vector<float> sums(static_cast<size_t>(threads));
  for (auto _ : state) {
    pool->run_on_all([&](int t) {
      const size_t b = n * size_t(t) / size_t(threads), e = n * size_t(t + 1) / size_t(threads);
      sums[size_t(t)] = simd::read_sum(p + b, e - b);
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kGiB));
}
BENCHMARK(BM_Read)->Name("memory/read_1GiB")->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Copy(benchmark::State& state) {
  const int threads = int(state.range(0));
  const size_t half = kGiB / 2;
  static AlignedBuffer src(half), dst(half);
  ThreadPool* pool = pool_for(threads);
  for (auto _ : state) {
    pool->run_on_all([&](int t) {
      const size_t b = half * size_t(t) / size_t(threads), e = half * size_t(t + 1) / size_t(threads);
      std::memcpy(dst.as<char>() + b, src.as<char>() + b, e - b);
    });
    benchmark::ClobberMemory();
  }
  // STREAM convention: a copied byte counts once read and once written.
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(2 * half));
}
BENCHMARK(BM_Copy)->Name("memory/copy_512MiB")->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// The function `kvparity bench` calls; reported as a counter so it can be compared with memory/read.
void BM_MeasureReadBandwidth(benchmark::State& state) {
  double gbs = 0;
  for (auto _ : state) gbs = measure_read_bandwidth_gbs(kGiB, int(state.range(0)));
  state.counters["GB/s"] = gbs;
}
BENCHMARK(BM_MeasureReadBandwidth)->Name("memory/measure_read_bandwidth_gbs")->ArgName("threads")->Arg(1)->Arg(2)
    ->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_ParallelRegion(benchmark::State& state) {
  ThreadPool* pool = pool_for(int(state.range(0)));
  std::vector<long> sink(64);
  for (auto _ : state) {
    pool->parallel_for(64, [&](long b, long e, int t) { sink[size_t(t)] += e - b; });
  }
  benchmark::DoNotOptimize(sink.data());
}
BENCHMARK(BM_ParallelRegion)->Name("threadpool/empty_parallel_for")->ArgName("threads")->Arg(2)->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvp::bench
