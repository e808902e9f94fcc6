// Profiler ranges around a benchmark's phases: the GPU work queued from one profile_phase() call to
// the next is an NVTX push/pop range of that name, so Nsight Compute can take the kernels of one
// phase alone (`ncu --nvtx --nvtx-include "batch-cache-off/"`; scripts/gpu_session.sh ncu), where
// counting launches to skip would depend on every pass before it. NVTX v3 is header-only and does
// nothing until a profiler injects itself: no library to link, nothing to pay without one.
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <mutex>
#include <string>

#include "cuda/cuda_runtime_api.h"

namespace kvp::cuda {

namespace {
std::mutex g_mutex;
bool g_open = false;
}  // namespace

void profile_phase(const std::string& phase) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_open) nvtxRangePop();
  g_open = phase != "-" && !phase.empty();
  if (!g_open) return;
  std::string name = phase;  // spaces would need quoting in every filter
  std::replace(name.begin(), name.end(), ' ', '-');
  nvtxRangePushA(name.c_str());
}

}  // namespace kvp::cuda
