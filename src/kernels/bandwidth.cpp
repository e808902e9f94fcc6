#include "kernels/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/simd_ops.h"

namespace kvp {

double measure_read_bandwidth_gbs(size_t bytes, int threads) {
  threads = std::max(1, threads);
  const size_t n = std::max<size_t>(bytes / sizeof(float), 1024);
  ThreadPool pool(threads);
  // AlignedBuffer zero-fills from the calling thread, which also faults every page in, so the
  // timed passes measure reads rather than page faults.
  AlignedBuffer buf(n * sizeof(float));
  const float* p = buf.as<float>();
  std::vector<float> sums(static_cast<size_t>(threads));
  auto pass = [&](int t) {
    const size_t b = n * size_t(t) / size_t(threads), e = n * size_t(t + 1) / size_t(threads);
    sums[size_t(t)] = simd::read_sum(p + b, e - b);
  };
  pool.run_on_all(pass);  // warm-up: TLB and the pool's threads
  double best = 1e30;
  for (int run = 0; run < 5; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run_on_all(pass);
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    best = std::min(best, dt.count());
  }
  // The sums are data-dependent results, so the reads cannot be elided; they are all zero.
  volatile float sink = 0.0f;
  for (float s : sums) sink = sink + s;
  return double(n * sizeof(float)) / best / 1e9;
}

}  // namespace kvp
