#pragma once
// `kvparity patch`: activation patching between two ways of running a model, SPECs as compare's
// (run_spec.h), by default cache OFF (baseline) and cache ON (candidate). At a step where the two
// free runs choose different tokens, the candidate's computation is re-run with either the residual
// stream of one layer (or of all layers) or the cached K/V entries (of one layer, or all) replaced
// by the baseline's values. Each row of the result says whether the next token then follows the
// baseline, and how much of the baseline's continuation the patched candidate reproduces. K/V are
// patched into the candidate's cache, so the candidate runs with cache ON; the baseline may run
// either way (cache OFF: the K/V its one pass computed).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "lab/run_spec.h"
#include "runtime/chat_choice.h"
#include "runtime/sampler.h"

namespace kvp {

struct PatchOptions {
  std::string model, tokenizer, prompt = "Once upon a time";
  ChatChoice chat;  // --chat-template and --system (runtime/chat_for_model.h): the prompt as a user turn
  DType dtype = DType::F16;
  KernelPolicy kernels = KernelPolicy::Standard;
  SamplerConfig sampler;
  uint64_t seed = 1;
  int threads = 1;
  Device device = Device::Cpu;
  SimdTarget simd = SimdTarget::Auto;
  int max_new_tokens = 96;  // horizon searched for the first divergence
  int step = -1;            // generated-token index to patch at; -1: the first divergence
  int continuation = 16;    // tokens generated after the patched step
  // KV patching copies cached positions [kv_begin, kv_end) (clamped to the positions before the
  // step); the default is every cached position.
  int kv_begin = 0, kv_end = -1;
  RunSpec baseline = RunSpec::parse(kDefaultBaselineSpec, "--baseline");
  RunSpec candidate = RunSpec::parse(kDefaultCandidateSpec, "--candidate");
  bool default_sides() const;  // cache OFF vs ON, nothing else set
};

struct PatchRow {
  std::string kind;   // "residual" | "kv"
  int layer = -1;     // -1: all layers
  int next_token = -1;
  bool next_follows_off = false;
  int continuation_agree = 0;   // leading tokens equal to cache-OFF's continuation
  double max_abs_logit_diff_to_off = 0;  // patched cache-ON logits vs cache-OFF logits at the step
};

// on/off in the names below stand for candidate/baseline (the sides of the default comparison).
struct PatchResult {
  RunSettings baseline, candidate;
  int step = 0, position = 0, first_divergence = -1;
  int kv_begin = 0, kv_end = 0;  // the KV positions the "kv" rows replaced
  int on_token = -1, off_token = -1;
  std::vector<int> off_continuation;
  double unpatched_max_abs_logit_diff = 0;
  std::vector<PatchRow> rows;
};

inline constexpr const char* kPatchResultsFile = "patch.json";

// Both sides resolved against the options; refuses sides patch cannot run (usage errors).
std::pair<RunSettings, RunSettings> patch_sides(const PatchOptions& opts);
PatchResult run_patch(const PatchOptions& opts);
nlohmann::json patch_json(const PatchResult& r, const PatchOptions& opts);
// One row per layer, residual and KV patches side by side; the default sides are called ON/OFF,
// other comparisons CAND/BASE.
std::string patch_table(const PatchResult& r, bool default_sides = true);

// The settings a results folder's manifest pins for `patch` (results_manifest.h).
nlohmann::json patch_settings(const PatchOptions& opts);
// Refuses a folder holding another model or a patch run with other settings; writes nothing.
void check_patch_dir(const std::string& dir, const PatchOptions& opts);
// Records the manifest and writes dir/patch.json (checks again: the folder may have changed).
void save_patch(const std::string& dir, const nlohmann::json& patch, const PatchOptions& opts);

}  // namespace kvp
