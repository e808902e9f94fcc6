// Attention with TinyLlama-1.1B's geometry (32 query heads, 4 KV heads, head_dim 64, fp16
// activations): one decode step against 512 and 2048 cached keys, and a 256-row prefill, on an fp16
// cache; and the decode step against 2048 keys in each quantised KV type (attention/<policy>/
// decode_2048/kv:<type>), the cost a quantised cache adds or saves per step.
#include <benchmark/benchmark.h>

#include <cmath>
#include <string>
#include <vector>

#include "bench_common.h"

namespace kvp::bench {
namespace {

constexpr int kHeads = 32, kKvHeads = 4, kHeadDim = 64;

void run_attention(benchmark::State& state, KernelPolicy policy, int n_rows, int start_pos, int threads,
                   const KvType& kv = KvType::of(DType::F16)) {
  Kernels& k = kernels_for(policy, threads);
  const int capacity = 2048 + 64;
  const size_t cache_elems = size_t(kKvHeads) * capacity * kHeadDim;
  AlignedBuffer kc(kv.bytes(cache_elems)), vc(kv.bytes(cache_elems));
  {
    // The cache holds the pattern as the KV type stores it (encoded on write, as KVCache does).
    std::vector<float> x(cache_elems);
    fill_pattern(DType::F32, x.data(), cache_elems, 5);
    round_span(DType::F16, x.data(), cache_elems);
    kv_encode(kv, x.data(), cache_elems, kc.data());
    fill_pattern(DType::F32, x.data(), cache_elems, 6);
    round_span(DType::F16, x.data(), cache_elems);
    kv_encode(kv, x.data(), cache_elems, vc.data());
  }
  std::vector<float> q(size_t(n_rows) * kHeads * kHeadDim), out(q.size());
  fill_pattern(DType::F32, q.data(), q.size(), 7);
  round_span(DType::F16, q.data(), q.size());
  AttentionParams p;
  p.n_rows = n_rows;
  p.start_pos = start_pos;
  p.n_heads = kHeads;
  p.n_kv_heads = kKvHeads;
  p.head_dim = kHeadDim;
  p.q = q.data();
  p.k_cache = kc.data();
  p.v_cache = vc.data();
  p.kv = kv;
  p.capacity = capacity;
  p.out = out.data();
  p.score_divisor = std::sqrt(float(kHeadDim));
  p.act = DType::F16;
  for (auto _ : state) {
    k.attention(p);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  double pairs = 0;  // (query row, key) pairs per head
  for (int i = 0; i < n_rows; ++i) pairs += start_pos + i + 1;
  state.counters["FLOPS"] =
      benchmark::Counter(4.0 * pairs * kHeads * kHeadDim, benchmark::Counter::kIsIterationInvariantRate);
}

bool register_all() {
  struct Case {
    const char* name;
    int n_rows, start_pos;
  };
  const Case cases[] = {{"decode_512", 1, 511}, {"decode_2048", 1, 2047}, {"prefill_256", 256, 0}};
  for (KernelPolicy policy : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant, KernelPolicy::Portable})
    for (const Case& c : cases)
      for (int threads : {1, 2}) {
        if (policy == KernelPolicy::Reference && (threads != 1 || c.start_pos > 600)) continue;
        const std::string name = "attention/" + policy_name(policy) + "/" + c.name + "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
          run_attention(st, policy, c.n_rows, c.start_pos, threads);
        })->Unit(benchmark::kMicrosecond)->UseRealTime();
      }
  for (KernelPolicy policy : {KernelPolicy::Standard, KernelPolicy::Invariant, KernelPolicy::Portable})
    for (const char* kv_name : {"fp16", "q8_0", "q4_0", "fp8_e4m3"}) {
      const KvType kv = *parse_kv_type(kv_name);
      const std::string name = "attention/" + policy_name(policy) + "/decode_2048/kv:" + kv_name + "/threads:1";
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
        run_attention(st, policy, 1, 2047, 1, kv);
      })->Unit(benchmark::kMicrosecond)->UseRealTime();
    }
  return true;
}

const bool registered = register_all();

}  // namespace
}  // namespace kvp::bench
