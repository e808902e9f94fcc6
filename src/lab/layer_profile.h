#pragma once
// `kvparity profile`: at one decoding step with identical prefixes on both sides, where does the
// difference between two ways of running the model appear and how does it grow through the layers?
// The sides are SPECs (run_spec.h), by default cache OFF (baseline) and cache ON (candidate); the
// prefix is the prompt and the candidate's greedy tokens before the step. Per layer: the residual
// stream at the new position after attention and after the MLP, the attention and MLP outputs, and
// the K/V entries each side's cache holds at every position, per KV head.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "lab/run_spec.h"
#include "runtime/chat_choice.h"

namespace kvp {

struct ProfileOptions {
  std::string model, tokenizer, prompt = "Once upon a time";
  ChatChoice chat;  // --chat-template and --system (runtime/chat_for_model.h): the prompt as a user turn
  std::vector<DType> dtypes{DType::F32, DType::F16, DType::BF16};
  KernelPolicy kernels = KernelPolicy::Standard;
  int threads = 1;
  Device device = Device::Cpu;
  SimdTarget simd = SimdTarget::Auto;
  int step = 1;  // generated-token index whose logits are compared; 1 = the first decode step (M = 1)
  RunSpec baseline = RunSpec::parse(kDefaultBaselineSpec, "--baseline");
  RunSpec candidate = RunSpec::parse(kDefaultCandidateSpec, "--candidate");
  // True when the sides are the cache study's (cache OFF vs ON, nothing else set).
  bool default_sides() const;
};

struct MaxMean {
  double max = 0, mean = 0;
};

struct LayerProfile {
  MaxMean resid_mid, resid_post, attn_out, mlp_out;
  std::vector<MaxMean> k, v;  // per KV head, over all positions and head_dim
  // Sparse layers (mixtures of experts) only: the router's logits at the row, and the experts
  // each side chose there (largest first), the baseline's margin to its next expert.
  bool sparse = false;
  MaxMean router;
  std::vector<int> experts_baseline, experts_candidate;
  double router_margin = 0;
  // Whether the two sides run different experts (as sets: the order does not change the sum).
  bool experts_differ() const;
};

struct DtypeProfile {
  std::string dtype;       // the --dtype value of this condition (a SPEC's dtype= may override it on a side)
  std::string condition;   // sides_key of the two sides
  RunSettings baseline, candidate;
  int position = 0;        // sequence position of the compared row
  std::vector<int> tokens; // the shared prefix (prompt + greedy cache-ON tokens)
  std::vector<LayerProfile> layers;
  MaxMean logits;
};

inline constexpr const char* kProfileResultsFile = "profile.json";

// One condition per --dtype value, each side resolved against it; refuses sides profile cannot
// run and conditions that collapse into one (usage errors naming the option and key).
std::vector<std::pair<RunSettings, RunSettings>> profile_sides(const ProfileOptions& opts);
// Refuses out-of-range steps (usage error) before any work.
std::vector<DtypeProfile> run_profile(const ProfileOptions& opts);
nlohmann::json profile_json(const std::vector<DtypeProfile>& p, const ProfileOptions& opts);
// "layer -> max |Δ|" table with one column per condition (residual stream after each layer).
std::string profile_table(const std::vector<DtypeProfile>& p, bool default_sides = true);

// The settings a results folder's manifest pins for `profile` (results_manifest.h).
nlohmann::json profile_settings(const ProfileOptions& opts);
// Refuses a folder holding another model or a profile with other settings; writes nothing.
void check_profile_dir(const std::string& dir, const ProfileOptions& opts);
// Records the manifest and writes dir/profile.json (checks again: the folder may have changed).
void save_profile(const std::string& dir, const nlohmann::json& profile, const ProfileOptions& opts);

}  // namespace kvp
