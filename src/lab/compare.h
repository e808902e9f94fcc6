#pragma once
// `kvparity compare`: for every prompt and condition (dtype x kernels x sampler), free-running
// generations on both cache paths with the same seeded draws, then the cache-OFF path
// teacher-forced along the cache-ON trajectory with per-step logit metrics. Records go to
// results.jsonl one prompt at a time; a restarted run skips what is already there.
// With batch_size B > 1 the prompts also form fixed groups by index, [gB, (g+1)B), each decoded
// as one batch on the cache-ON path (Engine::generate_batch, every sequence under its solo
// sequence id); each record then gets a "batch" object comparing its batched run with its solo
// cache-ON run. A group with any record missing is decoded again whole (so a resumed run forms the
// same batches) and only the missing records are written.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/kv_type.h"
#include "kernels/kernels.h"
#include "lab/prompt_set.h"
#include "runtime/sampler.h"

namespace kvp {

struct Condition {
  DType dtype = DType::F16;
  KvType kv_dtype = KvType::of(DType::F16);
  KernelPolicy kernels = KernelPolicy::Standard;
  SamplerConfig sampler;
  bool control = false;  // an fp32 rerun requested by --control fp32
  std::string key() const;  // e.g. "fp16/kv=fp16/standard/greedy"
};

struct CompareOptions {
  std::string model;
  std::string tokenizer;
  std::vector<Prompt> prompts;
  std::vector<Condition> conditions;
  int max_new_tokens = 128;
  uint64_t seed = 1;
  int threads = 1;
  bool stop_at_eos = false;  // off by default: both paths then always produce max_new_tokens
  int batch_size = 1;        // > 1: also batched cache-ON decoding vs solo (above)
  std::string out_dir;
  bool progress = false;     // progress line on stderr
};

inline constexpr const char* kCompareResultsFile = "results.jsonl";

// Adds the fp32 control conditions (same kernels and sampler, dtype and KV dtype fp32).
void add_fp32_controls(std::vector<Condition>& conditions);

// What the results folder's manifest pins for `compare` (results_manifest.h): a resumed run must
// match it exactly.
nlohmann::json compare_settings(const CompareOptions& opts);

// Runs what is missing from out_dir/results.jsonl; returns the number of records written now.
// Refuses, before writing anything, a folder that holds another model or other settings.
int run_compare(const CompareOptions& opts);

// Sequence id for the counter-based RNG: a stable hash of the prompt id.
uint64_t sequence_id_for(const std::string& prompt_id);

}  // namespace kvp
