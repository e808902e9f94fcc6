#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kvp {
namespace {

// How long a waiting thread busy-polls before blocking. Long enough to cover the serial gap
// between two regions of a decode step (norms, RoPE, cache writes: a few microseconds) on an idle
// machine. On an oversubscribed one, polling burns the time slice the awaited thread needs and the
// scheduler then favours threads that slept, so each thread adapts: a poll that times out halves
// its budget, one that succeeds grows it back.
constexpr int64_t kMaxSpinNs = 50'000;
constexpr int64_t kMinSpinNs = 1'000;
thread_local int64_t spin_budget_ns = kMaxSpinNs;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Polls until pred() holds or this thread's spin budget has passed; returns pred()'s last value.
template <class Pred>
bool spin_until(Pred pred) {
  if (pred()) return true;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    // Reading the clock costs ~20 ns; checking it every 32 polls keeps that out of the way.
    for (int i = 0; i < 32; ++i) {
      if (pred()) {
        spin_budget_ns = std::min(kMaxSpinNs, spin_budget_ns + spin_budget_ns / 4 + 100);
        return true;
      }
      cpu_relax();
    }
    const int64_t waited = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now() - start).count();
    if (waited >= spin_budget_ns) {
      spin_budget_ns = std::max(kMinSpinNs, spin_budget_ns / 2);
      return pred();
    }
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_release);
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    auto ready = [&] {
      return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
    };
    if (!spin_until(ready)) {
      // generation_ and stop_ change under mu_, so checking them under it cannot miss a notify.
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, ready);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    (*job_)(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Taking the lock orders this notify after the caller's predicate check, if it is about to sleep.
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::run_on_all(const std::function<void(int)>& fn) {
  if (n_threads_ == 1) {
    fn(0);
    return;
  }
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_cv_.notify_all();
  fn(0);
  auto done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(done)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, done);
  }
}

void ThreadPool::parallel_for(long n, const std::function<void(long, long, int)>& fn) {
  const int t = n_threads_;
  if (t == 1 || n <= 1) {
    fn(0, n, 0);
    return;
  }
  run_on_all([&](int i) {
    const long begin = n * i / t;
    const long end = n * (i + 1) / t;
    if (begin < end) fn(begin, end, i);
  });
}

}  // namespace kvp
