#pragma once
// End-to-end speed of the engine: prefill and decode throughput for cache-ON, and the time of one
// cache-OFF step, per dtype / kernel policy / thread count, against the memory-bandwidth bound.
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"

#include "core/kv_type.h"
#include "io/checkpoint.h"
#include "kernels/kernels.h"
#include "kernels/simd_target.h"

namespace kvp {

struct BenchConfig {
  std::vector<DType> dtypes{DType::F32};
  std::vector<KernelPolicy> policies{KernelPolicy::Standard};
  std::vector<int> threads{1};
  std::vector<Device> devices{Device::Cpu};  // each measured (threads apply to the CPU)
  std::vector<KvType> kv_types;  // KV caches measured; empty: each dtype's own
  std::vector<SimdTarget> simds{SimdTarget::Auto};  // CPU SIMD targets, each measured
  int prompt_tokens = 64;     // prefill length
  int decode_tokens = 32;     // decode steps timed
  int cache_off_tokens = 64;  // sequence length of the timed cache-OFF step
  int repeats = 2;            // best of
  double bandwidth_gbs = 0;   // 0: measure
  // > 1: also decode B sequences of prompt_tokens as one batch (generate_batch, greedy) and report
  // their tokens per second, prefill excluded.
  int batch = 1;
  // With batch > 1: also time one cache-OFF step of the B sequences together, B x cache_off_tokens
  // rows from position 0 in one pass: a step of the GSM8K study's cache-OFF side under --batch-size.
  bool batch_cache_off = false;
  // Logits of every row in the prefill and the cache-OFF step, as `generate` computes them (so its
  // cache-OFF last row is the prefill's, bitwise); false: the last row's only, as serving stacks
  // and llama-bench's prompt test do (decode steps have one row either way).
  bool all_logits = false;
  // cuda: time every kernel operation with events (passes run eagerly, no graph replay); read the
  // totals with cuda::op_times(), phases "prefill", "decode", "cache-off" (and "batch cache-off").
  bool op_times = false;
};

struct BenchResult {
  std::string device = "cpu", kernels, dtype, kv_dtype;
  std::string simd;  // the Highway target the CPU kernels ran ("AVX3" = AVX-512, "AVX2", "SCALAR"); "" on a GPU
  int threads = 1;
  int prompt_tokens = 0, decode_tokens = 0, cache_off_tokens = 0;
  bool all_logits = false;  // BenchConfig::all_logits
  double prefill_tok_s = 0, decode_tok_s = 0, cache_off_step_s = 0;
  double prefill_gflops = 0;            // matrix (the head's rows computed) and attention flops per second
  double peak_gflops = 0;               // cpu: measured fp32 FMA peak on this SIMD target and thread count
  double prefill_fraction_of_peak = 0;
  double model_bytes = 0;             // bytes of weight matrices read per decoded token
  double kv_bytes = 0;                // bytes of KV cache read per decoded token, over the timed steps
  double bandwidth_gbs = 0;           // measured read bandwidth with this many threads
  double bandwidth_bound_tok_s = 0;   // bandwidth / (model_bytes + kv_bytes)
  double decode_fraction_of_bound = 0;
  double peak_rss_mb = 0;
  double peak_device_mb = 0;          // cuda: peak device memory allocated by kvparity so far
  // cuda: the nodes of the graph a decode step of this configuration replays (0: none replayed)
  size_t decode_graph_kernel_nodes = 0, decode_graph_nodes = 0;
  std::string decode_graph_kernels;   // the kernel nodes by name: "name xN, ..."
  int batch = 1;                      // BenchConfig::batch
  double batch_decode_tok_s = 0;      // tokens of all B sequences per second of batched decode
  double batch_cache_off_step_s = 0;  // BenchConfig::batch_cache_off's step (0: not timed)
  // Share of the resident weight matrices mapped with 2 MiB pages after the runs (-1: unknown).
  double weights_huge_page_share = -1;
};

// Bytes of K and V that decode steps at positions first .. first + steps - 1 read, per step: every
// layer reads each cached position (its window's, in a windowed layer) up to and including its own.
double kv_bytes_per_decode_step(const ModelConfig& cfg, const KvType& kv, int first, int steps);

// Refuses (usage error) a configuration run_bench cannot run, before anything is loaded.
void check_bench_config(const BenchConfig& cfg);
// `progress` (may be null) receives one line per finished configuration.
std::vector<BenchResult> run_bench(const Checkpoint& ckpt, const BenchConfig& cfg,
                                   void (*progress)(const BenchResult&) = nullptr);

// The table, plus a note under it when the weights sat mostly in 4 KiB pages.
std::string bench_table(const std::vector<BenchResult>& rows);
std::string bench_json(const std::vector<BenchResult>& rows);
// The GPU time per operation gathered under BenchConfig::op_times, per pass of each phase.
std::string op_times_table();

}  // namespace kvp
