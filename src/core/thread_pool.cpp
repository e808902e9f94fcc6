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
// machine. On an oversubscribed one, polling burns the time slice the awaited thread needs, so
// each thread adapts its budget to the waits it sees: a wait that ended within kMaxSpinNs (spinning
// a little longer would have caught it) doubles the budget; a longer one (the pool idle between
// jobs, or the awaited thread descheduled) halves it. Judging by the whole wait, not by whether the
// spin alone succeeded, keeps a budget that has shrunk from never growing back.
//
// The cap is 500 us, not the few microseconds a serial gap takes, because a static split of a
// large matmul leaves one thread waiting for the other for tens to hundreds of microseconds, and a
// budget shrunk by those waits then sent the next short waits to sleep as well: with a 50 us cap a
// 64-token TinyLlama decode on two threads made 14,016 futex calls and 4,377 context switches,
// with 500 us 179 and 151.
constexpr int64_t kMaxSpinNs = 500'000;
constexpr int64_t kMinSpinNs = 1'000;
thread_local int64_t spin_budget_ns = kMaxSpinNs;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

using Clock = std::chrono::steady_clock;

int64_t ns_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

// Waits until pred() holds: polls for this thread's spin budget, then blocks on cv (whose
// notifier changes pred's inputs under mu), and adapts the budget to how long the wait took.
template <class Pred>
void await(Pred pred, std::mutex& mu, std::condition_variable& cv) {
  if (pred()) return;
  const auto start = Clock::now();
  bool caught = false;
  while (!caught) {
    // Reading the clock costs ~20 ns; checking it every 32 polls keeps that out of the way.
    for (int i = 0; i < 32 && !caught; ++i) {
      caught = pred();
      if (!caught) cpu_relax();
    }
    if (!caught && ns_since(start) >= spin_budget_ns) break;
  }
  if (!caught) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, pred);
  }
  const int64_t waited = ns_since(start);
  spin_budget_ns = waited <= kMaxSpinNs ? std::min(kMaxSpinNs, std::max(2 * spin_budget_ns, 2 * waited))
                                        : std::max(kMinSpinNs, spin_budget_ns / 2);
}

}  // namespace

int cores_here(int cap) { return std::clamp(int(std::thread::hardware_concurrency()), 1, std::max(1, cap)); }

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
    // generation_ and stop_ change under mu_, so a blocking wait cannot miss a notify.
    await(ready, mu_, start_cv_);
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
  await([&] { return pending_.load(std::memory_order_acquire) == 0; }, mu_, done_cv_);
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

long ThreadPool::piece_for(long n, int per_thread, long align, long at_least) const {
  const long parts = long(per_thread) * n_threads_;
  const long each = (n + parts - 1) / parts;
  return std::max(at_least, (each + align - 1) / align * align);
}

void ThreadPool::parallel_pieces(long n, long piece, const std::function<void(long, long, int)>& fn) {
  piece = std::max(1L, piece);
  if (n_threads_ == 1 || n <= piece) {
    if (n > 0) fn(0, n, 0);
    return;
  }
  std::atomic<long> next{0};
  run_on_all([&](int t) {
    for (long b = next.fetch_add(piece, std::memory_order_relaxed); b < n;
         b = next.fetch_add(piece, std::memory_order_relaxed))
      fn(b, std::min(n, b + piece), t);
  });
}

}  // namespace kvp
