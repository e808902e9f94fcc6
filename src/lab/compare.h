#pragma once
// `kvparity compare`: two ways of running the model (a baseline and a candidate side, run_spec.h;
// by default cache OFF vs cache ON) over every prompt and condition (the command's sweep of
// dtype x kernels x sampler): free-running generations on both sides with the same seeded draws,
// then the baseline teacher-forced along the candidate's trajectory with per-step logit metrics.
// Records go to results.jsonl one prompt at a time; a restarted run skips what is already there.
// Records keep the field names of the cache ON/OFF study: "on_*" are the candidate's, "off_*" the
// baseline's; "baseline" and "candidate" give both sides in full.
// A side with batch-size B > 1 decodes the prompts in fixed groups by index, [gB, (g+1)B), as one
// batch (Engine::generate_batch, every sequence under its solo sequence id), teacher forcing
// included. A group with any record missing is decoded again whole (so a resumed run forms the
// same batches) and only the missing records are written.
// --shard i/n takes, in every condition, the groups whose index is i mod n (with batch size 1 on
// both sides: the prompts whose index is); `kvparity merge` joins the shards' folders
// (compare_merge.h).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lab/prompt_set.h"
#include "lab/run_spec.h"
#include "lab/shard.h"
#include "runtime/chat_choice.h"
#include "runtime/sampler.h"

namespace kvp {

// One point of the sweep with both sides resolved through the SPECs.
struct Condition {
  RunDefaults point;  // the command's options for this condition
  RunSettings baseline, candidate;
  SamplerConfig sampler;
  bool control = false;     // an fp32 rerun requested by --control fp32
  std::string key() const;  // sides_key + sampler, e.g. "fp16/kv=fp16/standard/greedy"
};

struct CompareOptions {
  std::string model;
  std::string tokenizer;
  std::vector<Prompt> prompts;
  RunSpec baseline = RunSpec::parse(kDefaultBaselineSpec, "--baseline");
  RunSpec candidate = RunSpec::parse(kDefaultCandidateSpec, "--candidate");
  std::vector<Condition> conditions;  // add_condition
  int max_new_tokens = 128;
  uint64_t seed = 1;
  bool stop_at_eos = false;  // off by default: both paths then always produce max_new_tokens
  ChatChoice chat;           // --chat-template and --system (runtime/chat_for_model.h)
  ShardSpec shard;           // the slice of every condition's prompt groups this run takes
  // The first N prompts (0: all). Not a setting: a larger limit (or none) later runs on in the same
  // folder. A last group cut short by the limit is decoded as the smaller batch it is (its records'
  // "batch" says so), and keeps those records when a larger limit completes the group.
  int limit = 0;
  std::string out_dir;
  bool progress = false;     // progress line on stderr
  bool time_totals = true;   // each side's time on stderr at the end (timing.jsonl is always written)
};

inline constexpr const char* kCompareResultsFile = "results.jsonl";
// 2: records and the manifest name both sides (baseline, candidate); "batch" names each side's
// batch place; teacher_forced.logits_bitwise_equal.
inline constexpr int kCompareSchemaVersion = 2;

// Adds the condition of one sweep point, both sides resolved through opts' SPECs. Refuses a
// condition the SPECs make identical to one already there (both SPECs override the swept key).
void add_condition(CompareOptions& opts, const RunDefaults& point, const SamplerConfig& sampler);

// The prompts a condition decodes together: groups that hold whole batches of both sides, [gG,
// (g+1)G) by prompt index; 1 when both sides decode one prompt at a time.
size_t group_size(const Condition& cond);

// Adds the fp32 control conditions: each condition's sweep point with dtype and KV dtype fp32
// (keys a SPEC sets still win). Returns how many were added.
int add_fp32_controls(CompareOptions& opts);

// What the results folder's manifest pins for `compare` (results_manifest.h): a resumed run must
// match it exactly. A shard's settings name the shard ("shard": {"index","count"}; absent for the
// whole study, so a merged folder resumes as an unsharded run).
nlohmann::json compare_settings(const CompareOptions& opts);

// Runs what is missing from out_dir/results.jsonl; returns the number of records written now.
// Refuses, before writing anything, a folder that holds another model or other settings.
int run_compare(const CompareOptions& opts);

// Sequence id for the counter-based RNG: a stable hash of the prompt id.
uint64_t sequence_id_for(const std::string& prompt_id);

}  // namespace kvp
