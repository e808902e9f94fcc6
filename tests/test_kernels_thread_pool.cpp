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

// Pieces: every index exactly once, each call one whole piece (the last one shorter) aligned to
// the piece size (one thread, or a single piece: one call for everything); and a thread the host
// slows does not hold the others back: the fast thread takes the pieces the slow one has not got to.
TEST(ThreadPoolHandOff, PiecesCoverEveryIndexOnceAndGoToWhoeverIsFree) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (long n : {0L, 1L, 7L, 64L, 65L, 1000L})
      for (long piece : {1L, 16L, 64L, 300L}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> bad{0};
        const bool whole = threads == 1 || n <= piece;  // then one call does all of it
        pool.parallel_pieces(n, piece, [&](long b, long e, int t) {
          if (whole ? (b != 0 || e != n || t != 0)
                    : (b % piece != 0 || e - b > piece || (e - b < piece && e != n) || t < 0 || t >= threads))
            bad++;
          for (long i = b; i < e; ++i) hits[size_t(i)].fetch_add(1, std::memory_order_relaxed);
        });
        EXPECT_EQ(bad.load(), 0) << threads << " threads, n=" << n << " piece=" << piece;
        for (long i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "i=" << i << " n=" << n;
      }
  }
  ThreadPool pool(2);
  EXPECT_EQ(pool.piece_for(2048, 4, 16, 64), 256);  // 8 pieces
  EXPECT_EQ(pool.piece_for(100, 2, 8), 32);         // 25 rounded up to the alignment
  EXPECT_EQ(pool.piece_for(256, 4, 16, 64), 64);    // 32, raised to the floor
  std::atomic<int> by_fast{0};
  pool.parallel_pieces(40, 1, [&](long, long, int t) {
    if (t == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (t == 0) by_fast++;
  });
  EXPECT_GE(by_fast.load(), 30);
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
