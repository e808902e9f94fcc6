// Host-to-device copies (to_device): a model's weights on their first use, the norms' gains.
// A 7B model is 13.5 GB from a memory-mapped checkpoint, pageable memory, which the driver copies
// through staging buffers of its own: on an H100 host (2026-11-28) 1.5 GB/s from a cold page cache
// and 6.9 GB/s from a warm one. A copy of at least kStagedMin bytes therefore goes through two
// pinned buffers of ours: host threads fill one chunk while the copy engine reads the other, 17.4-
// 18.0 GB/s on that host (the 13.5 GB in 0.75 s against 8.8 s cold and 2.0 s warm). The same bytes
// either way; $KVPARITY_CUDA_STAGED_UPLOAD=0 takes the driver's path, for hosts where it is the
// faster one (every copy is timed: upload_totals, which bench prints; gpu_session.sh's `upload`
// stage runs both).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "core/env.h"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_runtime_api.h"

namespace kvp::cuda {
namespace {

constexpr size_t kChunk = size_t(32) << 20;     // bytes a staging buffer
constexpr size_t kStagedMin = size_t(4) << 20;  // smaller copies go straight
constexpr size_t kPartMin = size_t(4) << 20;    // bytes a host thread copies at least
constexpr size_t kMaxParts = 8;

EnvSwitch g_staged{"KVPARITY_CUDA_STAGED_UPLOAD", true};
std::mutex g_mutex;  // the staging buffers and the totals
UploadTotals g_totals;

// Two pinned buffers and the events that say when the copy engine is done reading each; made at
// the first staged copy and kept for the process (64 MiB of pinned host memory). A host that will
// not pin them (a container's limit) gets the driver's path, as with staging off: false.
struct Staging {
  void* buf[2] = {nullptr, nullptr};
  cudaEvent_t read[2] = {nullptr, nullptr};
  bool refused = false;
  bool ensure() {
    if (refused) return false;
    for (int b = 0; b < 2; ++b) {
      if (buf[b] == nullptr && cudaMallocHost(&buf[b], kChunk) != cudaSuccess) {
        buf[b] = nullptr;
        (void)cudaGetLastError();  // not sticky; cleared so that no later check reports it
        refused = true;
        return false;
      }
      if (read[b] == nullptr) KVP_CUDA_CHECK(cudaEventCreateWithFlags(&read[b], cudaEventDisableTiming));
    }
    return true;
  }
};
Staging g_staging;

// dst = src (n bytes), cut between up to kMaxParts host threads of at least kPartMin bytes each.
void parallel_copy(char* dst, const char* src, size_t n) {
  const size_t hw = std::max(1u, std::thread::hardware_concurrency());
  const size_t parts = std::min({kMaxParts, hw, std::max<size_t>(1, n / kPartMin)});
  const size_t per = (n + parts - 1) / parts;
  std::vector<std::thread> helpers;
  for (size_t a = per; a < n; a += per)
    helpers.emplace_back([=] { std::memcpy(dst + a, src + a, std::min(per, n - a)); });
  std::memcpy(dst, src, std::min(per, n));
  for (std::thread& t : helpers) t.join();
}

void staged_copy(char* dst, const char* src, size_t bytes) {
  for (size_t off = 0, i = 0; off < bytes; off += kChunk, ++i) {
    const int b = int(i % 2);
    const size_t n = std::min(kChunk, bytes - off);
    // The copy that last read this buffer is done (an event never recorded counts as done).
    KVP_CUDA_CHECK(cudaEventSynchronize(g_staging.read[b]));
    parallel_copy(static_cast<char*>(g_staging.buf[b]), src + off, n);
    KVP_CUDA_CHECK(cudaMemcpyAsync(dst + off, g_staging.buf[b], n, cudaMemcpyHostToDevice, stream()));
    KVP_CUDA_CHECK(cudaEventRecord(g_staging.read[b], stream()));
  }
}

}  // namespace

void to_device(void* dst, const void* src, size_t bytes) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto t0 = std::chrono::steady_clock::now();
  if (g_staged.on() && bytes >= kStagedMin && g_staging.ensure())
    staged_copy(static_cast<char*>(dst), static_cast<const char*>(src), bytes);
  else
    KVP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()));
  KVP_CUDA_CHECK(cudaStreamSynchronize(stream()));
  g_totals.bytes += bytes;
  g_totals.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

UploadTotals upload_totals() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_totals;
}
void set_staged_upload(bool on) { g_staged.set(on); }
bool staged_upload_on() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_staged.on() && !g_staging.refused;
}

}  // namespace kvp::cuda
