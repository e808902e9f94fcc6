#pragma once
// `kvparity profile`: at one decoding step with identical prefixes on both paths, where does the
// cache-ON vs cache-OFF difference appear and how does it grow through the layers? Per layer: the
// residual stream at the new position after attention and after the MLP, the attention and MLP
// outputs, and the K/V entries (cached vs recomputed) at every position, per KV head.
#include <nlohmann/json.hpp>
#include <string>

#include <vector>

#include "kernels/kernels.h"

namespace kvp {

struct ProfileOptions {
  std::string model, tokenizer, prompt = "Once upon a time";
  std::vector<DType> dtypes{DType::F32, DType::F16, DType::BF16};
  KernelPolicy kernels = KernelPolicy::Standard;
  int threads = 1;
  Device device = Device::Cpu;
  int step = 1;  // generated-token index whose logits are compared; 1 = the first decode step (M = 1)
};

struct MaxMean {
  double max = 0, mean = 0;
};

struct LayerProfile {
  MaxMean resid_mid, resid_post, attn_out, mlp_out;
  std::vector<MaxMean> k, v;  // per KV head, over all positions and head_dim
};

struct DtypeProfile {
  std::string dtype;
  int position = 0;        // sequence position of the compared row
  std::vector<int> tokens; // the shared prefix (prompt + greedy cache-ON tokens)
  std::vector<LayerProfile> layers;
  MaxMean logits;
};

inline constexpr const char* kProfileResultsFile = "profile.json";

// Refuses out-of-range steps (usage error) before any work.
std::vector<DtypeProfile> run_profile(const ProfileOptions& opts);
nlohmann::json profile_json(const std::vector<DtypeProfile>& p, const ProfileOptions& opts);
// "layer -> max |Δ|" table with one column per dtype (residual stream after each layer).
std::string profile_table(const std::vector<DtypeProfile>& p);

// The settings a results folder's manifest pins for `profile` (results_manifest.h).
nlohmann::json profile_settings(const ProfileOptions& opts);
// Refuses a folder holding another model or a profile with other settings; writes nothing.
void check_profile_dir(const std::string& dir, const ProfileOptions& opts);
// Records the manifest and writes dir/profile.json (checks again: the folder may have changed).
void save_profile(const std::string& dir, const nlohmann::json& profile, const ProfileOptions& opts);

}  // namespace kvp
