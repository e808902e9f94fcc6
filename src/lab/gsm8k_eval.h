#pragma once
// `kvparity eval gsm8k` (issue 7): every problem x model x sampling condition x dtype x KV type x
// kernel policy is generated on both sides of a comparison (run_spec.h; by default cache OFF as the
// baseline and cache ON as the candidate) with the same seeded draws (sequence id from the problem
// id), scored as lm-eval scores gsm8k, and compared token by token (the baseline teacher-forced
// along the candidate, lab/side_runner.h, unless flips are off). Records keep the names of the
// cache study: "on" is the candidate's side, "off" the baseline's. One record per item goes to
// OUT/gsm8k.jsonl (append-only, fsync'ed per item, written when the item's batch is done); a
// restarted run skips the items already there.
// OUT/gsm8k_manifest.json pins what makes records comparable (data, prompt, models, settings), so a
// restart or a merge with different settings is refused instead of silently mixing results.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/kernels.h"
#include "lab/results_manifest.h"
#include "lab/run_spec.h"
#include "lab/shard.h"
#include "runtime/chat_choice.h"
#include "runtime/sampler.h"

namespace kvp {

inline constexpr const char* kGsm8kResultsFile = "gsm8k.jsonl";
inline constexpr const char* kGsm8kManifestFile = "gsm8k_manifest.json";
// 2: the KV type joins the grid and the record key; records and settings name both sides.
inline constexpr int kGsm8kSchemaVersion = 2;

// A named sampling condition: "greedy", "temperature:T", "top-p:P", "top-k:K", "min-p:P"
// (temperature 1 unless it is the parameter).
struct Gsm8kCondition {
  std::string name;
  SamplerConfig sampler;
};
std::vector<Gsm8kCondition> parse_gsm8k_conditions(const std::string& csv);
// True when a condition samples (draws random numbers, so a seed matters).
bool any_sampling(const std::vector<Gsm8kCondition>& conditions);

struct Gsm8kModel {
  std::string path;
  std::string tokenizer;  // empty: found beside the model
};

struct Gsm8kOptions {
  std::string data;   // test split
  std::string train;  // exemplar source; empty: train.jsonl beside `data`
  std::vector<Gsm8kModel> models;
  std::vector<Gsm8kCondition> conditions;
  std::vector<DType> dtypes;
  std::vector<KvType> kv_dtypes;  // empty: each dtype's own
  std::vector<KernelPolicy> kernels;
  RunSpec baseline = RunSpec::parse(kDefaultBaselineSpec, "--baseline");
  RunSpec candidate = RunSpec::parse(kDefaultCandidateSpec, "--candidate");
  int shots = 5;
  int max_new_tokens = 256;
  int limit = 0;  // first N problems of the file (0: all)
  uint64_t seed = 1;
  int threads = 1;
  Device device = Device::Cpu;  // of both sides unless a SPEC sets device=
  SimdTarget simd = SimdTarget::Auto;  // of both sides unless a SPEC sets simd=
  // Items of one grid point decoded B at a time through Engine::generate_batch on each side that
  // does not set batch-size itself, in fixed groups of consecutive items of the shard; 1: one at a
  // time (Engine::generate).
  int batch_size = 1;
  ShardSpec shard;
  bool skip_long = false;  // prompts that do not fit the context: skipped records instead of an error
  // --chat-template: "none" (lm-eval's plain prompt), "auto" (each model's own) or a format, and
  // --system: exemplars as user/assistant turns, the question as the last user turn
  // (gsm8k_chat_messages), after the system message.
  ChatChoice chat;
  // Count token flips (the baseline teacher-forced along the candidate, keeping only its choices,
  // never logits). Off (--no-flips), records carry teacher_forced: null: under a batch-variant
  // policy, where the sides part early, the forced pass is a second cache-OFF pass, and only flips
  // need it.
  bool flips = true;
  std::string out_dir;
  bool progress = false;
  bool time_totals = true;  // each side's time on stderr at the end (timing.jsonl is always written)
};

std::string gsm8k_record_key(const nlohmann::json& record);

// A manifest's settings with the fields that older runs did not write filled in as those runs
// behaved ("flips": true), so that a resume or a merge compares like with like.
nlohmann::json gsm8k_settings_with_defaults(nlohmann::json settings);

// Runs what is missing; returns the number of records written now.
int run_gsm8k(const Gsm8kOptions& opts);

}  // namespace kvp
