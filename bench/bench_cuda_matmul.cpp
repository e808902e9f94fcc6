// The GPU's matmuls at Llama-2-7B's shapes, fp16 weights and activations, through the runtime's
// Kernels interface: cuBLAS (`standard`), each kernel of the `invariant` policy's tensor-core GEMM
// forced for every M (they give the same bits, so cuda_invariant_gemm_kernel.cuh's dispatch can
// pick by speed alone; `invariant:mma` is that dispatch, `invariant:auto` the family this GPU runs
// by default: wgmma-tma+mma16b on an H100 or H200), and the `portable` CUDA-core GEMM.
// M = 1..64 are decode steps, bound by reading W (GBps: weight bytes a second); larger M are
// prefills, cache-OFF steps and big batches (TFLOPS). Registered only in a build with CUDA; where no
// GPU opens, every row is skipped with the CUDA error. On the GPU machine, e.g.
//   kvparity_bench --benchmark_filter='cuda_matmul/'      (612 rows, a few minutes)
// Time per call is GPU throughput: an iteration launches 32 matmuls (4 past M = 64) back to back,
// cycling through four copies of W, then waits once; a row runs until its calls add up to 64 ms
// (decode sizes) or 50 ms.
#include <benchmark/benchmark.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.h"
#include "bench_gpu.h"
#include "core/device.h"
#include "cuda/cuda_runtime_api.h"

namespace kvp::bench {
namespace {

constexpr int64_t kMaxM = 16384, kMaxK = 11008, kMaxN = 32000;

constexpr Shape kShapes[] = {
    {"7b_q_4096x4096", 4096, 4096},
    {"7b_gate_11008x4096", 11008, 4096},
    {"7b_down_4096x11008", 4096, 11008},
    {"7b_lm_head_32000x4096", 32000, 4096},
};

// Host weights: kCopies buffers per shape for the whole run (the device keeps its copies by host
// address, so a buffer is never reused for another shape). A row cycles through the copies, so
// that a decode-sized GEMM reads W from HBM, as in a decode step, rather than from the 50 MB L2
// that one 32 MB matrix called back to back would sit in.
constexpr int kCopies = 4;
std::vector<TensorView> gpu_weights(const Shape& s) {
  static std::map<std::string, std::vector<std::vector<uint16_t>>> held;
  auto& bufs = held[s.name];
  if (bufs.empty()) {
    bufs.resize(kCopies);
    bufs[0].resize(size_t(s.N * s.K));
    fill_pattern(DType::F16, bufs[0].data(), bufs[0].size(), 23);
    for (int c = 1; c < kCopies; ++c) bufs[size_t(c)] = bufs[0];
  }
  std::vector<TensorView> views;
  for (auto& b : bufs) {
    TensorView v;
    v.name = std::string("bench.") + s.name;
    v.dtype = DType::F16;
    v.shape = {s.N, s.K};
    v.data = b.data();
    views.push_back(v);
  }
  return views;
}

// x (fp16 values in fp32, as a pass holds them) for the largest M and K, and y for the largest
// M and N: every row uses a prefix.
struct GpuBuffers {
  DeviceBuffer x, y;
};
GpuBuffers& gpu_buffers() {
  static GpuBuffers b = [] {
    GpuBuffers g{DeviceBuffer(Device::Cuda, size_t(kMaxM * kMaxK) * sizeof(float)),
                 DeviceBuffer(Device::Cuda, size_t(kMaxM * kMaxN) * sizeof(float))};
    std::vector<uint16_t> h(size_t(kMaxM * kMaxK));
    fill_pattern(DType::F16, h.data(), h.size(), 5);
    std::vector<float> f(h.size());
    to_f32(DType::F16, h.data(), f.data(), f.size());
    host_to_device(Device::Cuda, g.x.data(), f.data(), f.size() * sizeof(float));
    return g;
  }();
  return b;
}

// The variant that switches standard's own decode GEMV on (cuda::set_standard_gemv) instead of
// forcing an invariant kernel.
const std::string kGemv = "gemv";

void run_gpu_matmul(benchmark::State& state, KernelPolicy policy, const std::string& gemm_kernel, int M,
                    Shape s) {
  if (!gpu_error().empty()) {
    state.SkipWithError(("no usable GPU: " + gpu_error()).c_str());
    return;
  }
  Kernels& k = gpu_kernels(policy);
  const std::vector<TensorView> W = gpu_weights(s);
  GpuBuffers& b = gpu_buffers();
  const auto* x = b.x.as<float>();
  auto* y = b.y.as<float>();
  // Calls per wait: enough that the wait's round trip does not count for the short decode GEMMs.
  const int calls = M <= 64 ? 32 : 4;
  double seconds = 0;  // per call, summed over the iterations
  try {
    if (gemm_kernel == kGemv)
      cuda::set_standard_gemv(true);
    else if (!gemm_kernel.empty())
      cuda::set_invariant_gemm_kernel(gemm_kernel);
    float probe = 0;
    for (const TensorView& w : W) k.matmul(x, M, w, DType::F16, y);  // uploads (once) and warms up
    k.to_host(&probe, y, sizeof probe);
    for (auto _ : state) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < calls; ++r) k.matmul(x, M, W[size_t(r % kCopies)], DType::F16, y);
      k.to_host(&probe, y, sizeof probe);
      const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
      state.SetIterationTime(dt.count() / calls);
      seconds += dt.count() / calls;
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
  if (gemm_kernel == kGemv)
    cuda::set_standard_gemv(false);
  else if (!gemm_kernel.empty())
    cuda::set_invariant_gemm_kernel("auto");
  if (seconds <= 0) return;
  // Plain values (not Google Benchmark rates, which print with SI prefixes and "/s").
  const double n = double(state.iterations());
  state.counters["TFLOPS"] = 2.0 * M * double(s.N) * double(s.K) * n / seconds / 1e12;
  state.counters["GBps"] = double(W[0].nbytes()) * n / seconds / 1e9;
}

bool register_gpu() {
  if (!cuda::built()) return false;
  struct Variant {
    KernelPolicy policy;
    // gemm_kernel: forced for the invariant policy, kGemv: standard's own GEMV switched on ("" none)
    std::string name, gemm_kernel;
  };
  // standard-gemv: kvparity's own decode GEMV in place of cuBLAS (up to 4 rows; cuBLAS beyond).
  std::vector<Variant> variants = {{KernelPolicy::Standard, "standard", ""},
                                   {KernelPolicy::Standard, "standard-gemv", kGemv}};
  for (const std::string& g : cuda::invariant_gemm_kernels())
    variants.push_back({KernelPolicy::Invariant, "invariant:" + g, g});
  variants.push_back({KernelPolicy::Portable, "portable", ""});
  for (const Shape& s : kShapes)
    for (const Variant& v : variants)
      for (int M : {1, 16, 64, 256, 512, 2048, 16384}) {
        // The decode kernels and the CUDA-core GEMM take seconds a row at the largest M.
        const bool decode_kernel = v.gemm_kernel == "ring" || v.gemm_kernel == "registers" ||
                                   v.gemm_kernel == "pipelined" || v.gemm_kernel == "wgmma64x32" ||
                                   v.gemm_kernel == "wgmma-tma64x32" || v.gemm_kernel == "wgmma-tma64x64" ||
                                   v.gemm_kernel == "wgmma-mma16" ||
                                   v.gemm_kernel == "wgmma-mma16b" || v.gemm_kernel == "wgmma-mma16x";
        if (M > 2048 && (decode_kernel || v.policy == KernelPolicy::Portable)) continue;
        if (v.gemm_kernel == kGemv && M > 1) continue;  // decode; past 4 rows cuBLAS
        const std::string name = "cuda_matmul/" + v.name + "/fp16/M" + std::to_string(M) + "/" + s.name;
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
          run_gpu_matmul(st, v.policy, v.gemm_kernel, M, s);
        })->UseManualTime()->MinTime(M <= 64 ? 0.002 : 0.0125)->Unit(benchmark::kMicrosecond);
      }
  return true;
}

const bool registered = register_gpu();

}  // namespace
}  // namespace kvp::bench
