// The GPU the process runs on: opened once, one stream for all work, memory accounting, and the
// host-facing copies of core/device.h (to_device's: cuda_upload.cu).
#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/env.h"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_op_timer.cuh"
#include "cuda/cuda_runtime_api.h"

namespace kvp::cuda {
namespace {

struct Context {
  bool ok = false;
  std::string error;  // why the GPU could not be opened
  cudaStream_t stream = nullptr;
  cudaDeviceProp prop{};
  int device = 0;
};

std::once_flag g_once;
Context g_ctx;
// Bytes allocated through alloc(), for bench's peak device memory.
std::mutex g_mem_mutex;
std::unordered_map<void*, size_t> g_sizes;
size_t g_live = 0, g_peak = 0;

void open_once() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    g_ctx.error = std::string("no usable CUDA device: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
    return;
  }
  if (n == 0) {
    g_ctx.error = "no usable CUDA device: cudaGetDeviceCount found none";
    return;
  }
  if ((e = cudaSetDevice(0)) != cudaSuccess || (e = cudaGetDeviceProperties(&g_ctx.prop, 0)) != cudaSuccess ||
      (e = cudaStreamCreateWithFlags(&g_ctx.stream, cudaStreamNonBlocking)) != cudaSuccess) {
    g_ctx.error =
        std::string("CUDA device 0 could not be opened: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
    return;
  }
  g_ctx.ok = true;
}

}  // namespace

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  fail_input(std::string("CUDA error in ") + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

namespace {
EnvSwitch g_pdl{"KVPARITY_CUDA_PDL", false};

// pdl_entry waits only in code compiled for sm_90 or later: a build whose kernels come from older
// PTX (CMAKE_CUDA_ARCHITECTURES=80 on an H100) would launch early with no wait at all.
__global__ void pdl_probe_kernel() { pdl_entry(); }
bool pdl_supported() {
  static const bool ok = [] {
    if (!g_ctx.ok || g_ctx.prop.major < 9) return false;
    cudaFuncAttributes a{};
    return cudaFuncGetAttributes(&a, pdl_probe_kernel) == cudaSuccess && a.ptxVersion >= 90 && a.binaryVersion >= 90;
  }();
  return ok;
}
}  // namespace

void set_programmatic_launch(bool on) { g_pdl.set(on); }
bool programmatic_launch_on() { return g_pdl.on(); }
bool programmatic_launch_available() { return pdl_supported(); }
// Off while operations are timed: the events between kernels would serialise them anyway.
bool pdl_launch() { return g_pdl.on() && pdl_supported() && !op_timing_on(); }

void allow_smem(const void* kernel, size_t bytes) {
  static std::mutex mu;
  static std::unordered_map<const void*, size_t> allowed;
  const std::lock_guard<std::mutex> lock(mu);
  size_t& have = allowed[kernel];
  if (have >= bytes) return;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
        "allowing a kernel its shared memory");
  have = bytes;
}

bool built() { return true; }

void open() {
  std::call_once(g_once, open_once);
  if (!g_ctx.ok) fail_input("--device cuda: " + g_ctx.error);
}

std::string why_unusable() {
  std::call_once(g_once, open_once);
  return g_ctx.ok ? std::string() : g_ctx.error;
}

cudaStream_t stream() {
  open();
  return g_ctx.stream;
}

int sm_count() {
  open();
  return g_ctx.prop.multiProcessorCount;
}
int compute_capability() {
  open();
  return g_ctx.ok ? g_ctx.prop.major * 10 + g_ctx.prop.minor : 0;
}
std::string gpu_name() {
  open();
  return g_ctx.prop.name;
}

std::string describe() {
  open();
  const auto& p = g_ctx.prop;
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  const auto ver = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  return std::string(p.name) + " (" + fixed(double(p.totalGlobalMem) / double(1u << 30), 1) + " GiB, sm_" +
         std::to_string(p.major) + std::to_string(p.minor) + ", " + std::to_string(p.multiProcessorCount) +
         " SMs; CUDA runtime " + ver(runtime) + ", driver " + ver(driver) + ")";
}

void* alloc(size_t bytes) {
  open();
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    size_t free_b = 0, total_b = 0;
    cudaGetLastError();
    cudaMemGetInfo(&free_b, &total_b);
    fail_input("CUDA out of memory: " + std::to_string(bytes >> 20) + " MiB requested, " + std::to_string(free_b >> 20) +
               " MiB free of " + std::to_string(total_b >> 20) + " MiB on the GPU (" + cudaGetErrorName(e) + ")");
  }
  std::lock_guard<std::mutex> lock(g_mem_mutex);
  g_sizes[p] = bytes;
  g_live += bytes;
  if (g_live > g_peak) g_peak = g_live;
  return p;
}

void release(void* p) noexcept {
  if (p == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_mem_mutex);
    auto it = g_sizes.find(p);
    if (it != g_sizes.end()) {
      g_live -= it->second;
      g_sizes.erase(it);
    }
  }
  // Freeing waits for the work queued on the buffer; a buffer is only dropped once unused.
  cudaFree(p);
}

size_t peak_allocated() {
  std::lock_guard<std::mutex> lock(g_mem_mutex);
  return g_peak;
}
void reset_peak_allocated() {
  std::lock_guard<std::mutex> lock(g_mem_mutex);
  g_peak = g_live;
}

void to_host(void* dst, const void* src, size_t bytes) {
  KVP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream()));
  KVP_CUDA_CHECK(cudaStreamSynchronize(stream()));
}

}  // namespace kvp::cuda
