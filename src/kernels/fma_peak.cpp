#include "kernels/fma_peak.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/thread_pool.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/fma_peak.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace kvp::peak {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Ten independent chains cover the FMA latency (4-5 cycles) times the FMA ports (2) of current x86
// cores, and with the two constants still fit AVX2's 16 vector registers. Returns the flops done.
double FmaChains(size_t iters, float* sink) {
  const hn::ScalableTag<float> d;
  const auto m = hn::Set(d, 0.9999999f), c = hn::Set(d, 1e-7f);
  auto a0 = hn::Set(d, 1.0f), a1 = hn::Set(d, 1.1f), a2 = hn::Set(d, 1.2f), a3 = hn::Set(d, 1.3f),
       a4 = hn::Set(d, 1.4f), a5 = hn::Set(d, 1.5f), a6 = hn::Set(d, 1.6f), a7 = hn::Set(d, 1.7f),
       a8 = hn::Set(d, 1.8f), a9 = hn::Set(d, 1.9f);
  for (size_t i = 0; i < iters; ++i) {
    a0 = hn::MulAdd(a0, m, c);
    a1 = hn::MulAdd(a1, m, c);
    a2 = hn::MulAdd(a2, m, c);
    a3 = hn::MulAdd(a3, m, c);
    a4 = hn::MulAdd(a4, m, c);
    a5 = hn::MulAdd(a5, m, c);
    a6 = hn::MulAdd(a6, m, c);
    a7 = hn::MulAdd(a7, m, c);
    a8 = hn::MulAdd(a8, m, c);
    a9 = hn::MulAdd(a9, m, c);
  }
  const auto s = hn::Add(hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), hn::Add(hn::Add(a4, a5), hn::Add(a6, a7))),
                         hn::Add(a8, a9));
  *sink = hn::GetLane(hn::SumOfLanes(d, s));
  return 2.0 * 10.0 * double(hn::Lanes(d)) * double(iters);
}

}  // namespace HWY_NAMESPACE
}  // namespace kvp::peak
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvp {
namespace peak {
HWY_EXPORT(FmaChains);
}  // namespace peak

double measure_fma_peak_gflops(int threads) {
  threads = std::max(1, threads);
  ThreadPool pool(threads);
  std::vector<float> sinks(static_cast<size_t>(threads));
  std::vector<double> flops(static_cast<size_t>(threads));
  constexpr size_t kIters = size_t(1) << 22;  // ~10-40 ms per thread
  auto pass = [&](int t) { flops[size_t(t)] = HWY_DYNAMIC_DISPATCH(peak::FmaChains)(kIters, &sinks[size_t(t)]); };
  pool.run_on_all(pass);  // warm-up: clocks up, the pool's threads started
  double best = 1e30, total = 0;
  for (int run = 0; run < 5; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run_on_all(pass);
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    best = std::min(best, dt.count());
  }
  for (double f : flops) total += f;
  volatile float keep = 0.0f;
  for (float s : sinks) keep = keep + s;
  return total / best / 1e9;
}

}  // namespace kvp
#endif
