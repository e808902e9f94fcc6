// The pool under the kernels: spin-then-block hand-off must neither lose a wake-up nor run a job
// twice, whether regions come back to back (spinning path) or after a pause (blocking path).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace kvp {
namespace {

TEST(ThreadPoolHandOff, BackToBackRegionsCoverEveryIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> hits(1000);
    for (int round = 0; round < 2000; ++round) {
      const long n = round % 37;
      pool.parallel_for(n, [&](long b, long e, int) {
        for (long i = b; i < e; ++i) hits[size_t(i)].fetch_add(1, std::memory_order_relaxed);
      });
    }
    long total = 0;
    for (auto& h : hits) total += h.load();
    long want = 0;
    for (int round = 0; round < 2000; ++round) want += round % 37;
    EXPECT_EQ(total, want) << threads << " threads";
  }
}

TEST(ThreadPoolHandOff, RegionsAfterIdlePausesStillRun) {
  ThreadPool pool(3);
  for (int round = 0; round < 6; ++round) {
    // Longer than the spin window, so the workers are asleep on the condition variable.
    std::this_thread::sleep_for(std::chrono::milliseconds(round % 2 == 0 ? 2 : 0));
    std::atomic<int> ran{0};
    std::vector<int> who(3, -1);
    pool.run_on_all([&](int t) {
      who[size_t(t)] = t;
      ran.fetch_add(1);
    });
    EXPECT_EQ(ran.load(), 3);
    EXPECT_EQ(who, (std::vector<int>{0, 1, 2}));
  }
}

TEST(ThreadPoolHandOff, SlowWorkerIsWaitedFor) {
  ThreadPool pool(2);
  std::atomic<bool> done{false};
  pool.run_on_all([&](int t) {
    if (t == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // beyond the caller's spin
      done.store(true);
    }
  });
  EXPECT_TRUE(done.load());
}

TEST(ThreadPoolHandOff, DestroyWhileIdleOrFreshlyUsed) {
  for (int i = 0; i < 50; ++i) {
    ThreadPool pool(4);
    if (i % 2) pool.run_on_all([](int) {});
  }
  SUCCEED();
}

}  // namespace
}  // namespace kvp
