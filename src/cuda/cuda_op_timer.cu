#include "cuda/cuda_op_timer.cuh"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/cuda_common.cuh"
#include "cuda/cuda_runtime_api.h"

namespace kvp::cuda {
namespace {

struct Pending {
  std::string phase;
  const char* name;
  cudaEvent_t start, stop;
};
struct Total {
  double ms = 0;
  long count = 0;
};

std::mutex g_mutex;
bool g_on = false;
std::string g_phase = "-";
std::vector<Pending> g_pending;
std::vector<cudaEvent_t> g_free;
std::map<std::pair<std::string, std::string>, Total> g_totals;

cudaEvent_t take_event() {
  if (!g_free.empty()) {
    cudaEvent_t e = g_free.back();
    g_free.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  check(cudaEventCreate(&e), "cudaEventCreate (op timing)");
  return e;
}

// Folds every finished span into the totals (waits for the GPU).
void drain() {
  if (g_pending.empty()) return;
  check(cudaStreamSynchronize(stream()), "op timing");
  for (const Pending& p : g_pending) {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, p.start, p.stop), "cudaEventElapsedTime (op timing)");
    Total& t = g_totals[{p.phase, p.name}];
    t.ms += ms;
    ++t.count;
    g_free.push_back(p.start);
    g_free.push_back(p.stop);
  }
  g_pending.clear();
}

}  // namespace

bool op_timing_on() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_on;
}

void set_op_timing(bool on) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_on = on;
}

void op_timing_phase(const std::string& phase) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_on) drain();
  g_phase = phase;
}

std::vector<OpTime> op_times() {
  std::lock_guard<std::mutex> lock(g_mutex);
  drain();
  std::vector<OpTime> out;
  for (const auto& [key, t] : g_totals) out.push_back(OpTime{key.first, key.second, t.ms, t.count});
  std::stable_sort(out.begin(), out.end(), [](const OpTime& a, const OpTime& b) {
    return a.phase != b.phase ? a.phase < b.phase : a.ms > b.ms;
  });
  return out;
}

void reset_op_times() {
  std::lock_guard<std::mutex> lock(g_mutex);
  drain();
  g_totals.clear();
}

OpSpan::OpSpan(const char* name) : name_(name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_on) return;
  start_ = take_event();
  check(cudaEventRecord(start_, stream()), "cudaEventRecord (op timing)");
}

OpSpan::~OpSpan() {
  if (start_ == nullptr) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  cudaEvent_t stop = take_event();
  cudaEventRecord(stop, stream());
  g_pending.push_back(Pending{g_phase, name_, start_, stop});
  if (g_pending.size() > 20000) {
    try {
      drain();
    } catch (...) {  // a failing GPU is reported by the next checked call
    }
  }
}

}  // namespace kvp::cuda
