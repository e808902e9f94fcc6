// The GPU's attention through the runtime's Kernels interface, fp16 activations and KV cache, at
// Llama-2-7B's geometry (32 heads, 32 KV heads, head_dim 128) and TinyLlama-1.1B's (32 / 4 / 64):
// one decode step against 512, 2048 and 8192 cached keys, a batch of 64 decode steps against 512
// keys each (one cache a sequence), and a 512-row prefill (a cache-OFF step's attention). Under
// `standard` a decode step is the split-KV kernel (one launch), under `invariant` the tensor-core
// kernel with each 128-key chunk of a (sequence, head) in a block of four warps
// (`KVPARITY_CUDA_SPLIT_WARPS=1`: one), under `portable` one warp a row: these rows say what the
// fixed order costs a step. Registered only in a build with CUDA; where no GPU opens, skipped with the error.
//   kvparity_bench --benchmark_filter='cuda_attention/'      (30 rows, a few seconds)
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.h"
#include "bench_gpu.h"
#include "core/device.h"
#include "core/kv_type.h"
#include "cuda/cuda_runtime_api.h"

namespace kvp::bench {
namespace {

struct Geometry {
  const char* name;
  int heads, kv_heads, head_dim;
};
constexpr Geometry kGeometries[] = {{"7b", 32, 32, 128}, {"1.1b", 32, 4, 64}};

struct Case {
  const char* name;
  int sequences, rows, start_pos;
};
constexpr Case kCases[] = {
    {"decode_512", 1, 1, 511},   {"decode_2048", 1, 1, 2047},   {"decode_8192", 1, 1, 8191},
    {"batch64_decode_512", 64, 1, 511}, {"prefill_512", 1, 512, 0},
};

// A device buffer of n fp16-representable values (as fp32, or encoded as the fp16 KV type).
DeviceBuffer pattern_on_gpu(size_t n, uint32_t seed, bool as_kv) {
  std::vector<float> x(n);
  fill_pattern(DType::F32, x.data(), n, seed);
  round_span(DType::F16, x.data(), n);
  const KvType kv = KvType::of(DType::F16);
  DeviceBuffer d(Device::Cuda, as_kv ? kv.bytes(n) : n * sizeof(float));
  if (as_kv) {
    std::vector<uint8_t> enc(kv.bytes(n));
    kv_encode(kv, x.data(), n, enc.data());
    host_to_device(Device::Cuda, d.data(), enc.data(), enc.size());
  } else {
    host_to_device(Device::Cuda, d.data(), x.data(), n * sizeof(float));
  }
  return d;
}

void run_gpu_attention(benchmark::State& state, KernelPolicy policy, Geometry g, Case c) {
  if (!gpu_error().empty()) {
    state.SkipWithError(("no usable GPU: " + gpu_error()).c_str());
    return;
  }
  try {
    Kernels& k = gpu_kernels(policy);
    const int capacity = c.start_pos + c.rows;
    const size_t cache_elems = size_t(g.kv_heads) * capacity * g.head_dim;
    const size_t q_elems = size_t(c.rows) * g.heads * g.head_dim;
    std::vector<DeviceBuffer> kc, vc, q, out;
    std::vector<AttentionParams> ps;
    for (int s = 0; s < c.sequences; ++s) {
      kc.push_back(pattern_on_gpu(cache_elems, 5 + 3 * s, true));
      vc.push_back(pattern_on_gpu(cache_elems, 6 + 3 * s, true));
      q.push_back(pattern_on_gpu(q_elems, 7 + 3 * s, false));
      out.emplace_back(Device::Cuda, q_elems * sizeof(float));
      AttentionParams p;
      p.n_rows = c.rows;
      p.start_pos = c.start_pos;
      p.n_heads = g.heads;
      p.n_kv_heads = g.kv_heads;
      p.head_dim = g.head_dim;
      p.q = q.back().as<float>();
      p.k_cache = kc.back().data();
      p.v_cache = vc.back().data();
      p.kv = KvType::of(DType::F16);
      p.capacity = capacity;
      p.out = out.back().as<float>();
      p.score_divisor = std::sqrt(float(g.head_dim));
      p.act = DType::F16;
      ps.push_back(p);
    }
    const int calls = c.rows > 1 ? 4 : 16;
    float probe = 0;
    auto once = [&] { c.sequences > 1 ? k.attention_batch(ps.data(), int(ps.size())) : k.attention(ps[0]); };
    once();
    k.to_host(&probe, ps[0].out, sizeof probe);
    for (auto _ : state) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < calls; ++r) once();
      k.to_host(&probe, ps[0].out, sizeof probe);
      const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
      state.SetIterationTime(dt.count() / calls);
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

bool register_gpu_attention() {
  if (!cuda::built()) return false;
  for (const Geometry& g : kGeometries)
    for (const Case& c : kCases)
      for (KernelPolicy pol : {KernelPolicy::Standard, KernelPolicy::Invariant, KernelPolicy::Portable}) {
        const std::string name =
            "cuda_attention/" + policy_name(pol) + "/fp16/" + std::string(g.name) + "/" + c.name;
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { run_gpu_attention(st, pol, g, c); })
            ->UseManualTime()
            ->MinTime(0.005)
            ->Unit(benchmark::kMicrosecond);
      }
  return true;
}

const bool registered = register_gpu_attention();

}  // namespace
}  // namespace kvp::bench
