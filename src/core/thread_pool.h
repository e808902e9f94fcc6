#pragma once
// A persistent pool: workers sleep between jobs so a decode step does not pay thread start-up.
// parallel_for hands out contiguous index ranges; how a kernel uses them (split outputs only, or
// split a reduction too) is the kernel policy's business, not the pool's.
//
// A decode step opens ~200 parallel regions, each far shorter than a futex wake-up (20-50 us), so
// workers and the caller first spin briefly on atomics and only then block on the condition
// variables. The spin is bounded in time, so an idle pool costs no CPU.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvp {

// The cores this machine reports, at least 1 and at most `cap`: hardware_concurrency() may answer 0
// (unknown), and a 192-core host should not get 192 threads for work that stops scaling long before.
int cores_here(int cap);

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Runs fn(thread_index) on every thread (the caller is thread 0) and waits for all.
  void run_on_all(const std::function<void(int)>& fn);
  // Splits [0, n) into size() contiguous chunks (some may be empty) and runs fn(begin, end, thread).
  void parallel_for(long n, const std::function<void(long, long, int)>& fn);
  // Hands out [0, n) in pieces of `piece` (the last one shorter) to whichever thread is free, in
  // increasing order: for work whose result does not depend on which thread does which part, on
  // hosts where one thread runs slower than another (a busy neighbour, a hybrid CPU's small cores).
  // With one thread, or n <= piece, it is a single call fn(0, n, 0).
  void parallel_pieces(long n, long piece, const std::function<void(long, long, int)>& fn);
  // The piece that gives each thread about `per_thread` pieces of [0, n): a multiple of `align`,
  // at least `at_least`.
  long piece_for(long n, int per_thread, long align, long at_least = 1) const;

 private:
  void worker(int index);
  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;  // published by the release increment of generation_
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace kvp
