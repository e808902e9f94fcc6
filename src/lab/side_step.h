#pragma once
// One decoding step of one side (run_spec.h), computed the way that side computes it, for the
// single-step analyses (`profile`, `patch`): the logits of the last position of a sequence whose
// earlier tokens are given, and the side's K/V cache holding every position of it afterwards.
//   cache ON : the prompt prefilled (in prefill-chunk pieces when the side sets one), then one row
//              per position up to the last; the hooks see only the last step's pass;
//   cache OFF: the whole sequence in one pass (the hooks see every row of it and pick their own).
// Batches are `compare`'s business: a side with batch-size > 1 is refused (resolve_single_sequence_sides).
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lab/run_spec.h"
#include "io/checkpoint.h"
#include "model/model.h"
#include "runtime/generator.h"

namespace kvp {

// Both sides resolved against the command's options `d`; refuses (usage error naming the option)
// a side these analyses cannot run: batch-size > 1.
std::pair<RunSettings, RunSettings> resolve_single_sequence_sides(const RunSpec& baseline, const RunSpec& candidate,
                                                                  const RunDefaults& d, const std::string& command);

// Whether the SPECs are the cache study's pair (cache OFF vs ON, nothing else set).
bool default_sides(const RunSpec& baseline, const RunSpec& candidate);

// Adds to a results manifest's settings what profile and patch pin beyond their own options: a
// device other than the CPU, a pinned SIMD target, and SPECs other than the default pair (left out
// otherwise, so folders written before those existed keep their manifests).
void add_side_settings(nlohmann::json& settings, Device device, SimdTarget simd, const RunSpec& baseline,
                       const RunSpec& candidate);

// Fills the engine's cache with positions [0, end) of `seq` the cache-ON way: the prompt (its first
// `prompt_len` tokens, at most `end`) prefilled in the engine's prefill-chunk pieces, then one row per
// position. Clears the cache first.
void cache_on_prefix(Engine& engine, const std::vector<int>& seq, int prompt_len, int end);

// The logits [vocab] that `side` computes for the last position of `seq` (prompt = its first
// `prompt_len` tokens). Clears the engine's cache first; afterwards it holds positions [0, seq.size()).
std::vector<float> side_step_logits(Engine& engine, CacheMode cache, const std::vector<int>& seq, int prompt_len,
                                    ForwardHooks* hooks);

// Models of one checkpoint in the compute dtypes asked for, each built once.
class ModelsByDtype {
 public:
  explicit ModelsByDtype(const std::string& path);
  std::shared_ptr<const Model> get(DType dtype);

 private:
  Checkpoint ckpt_;
  std::vector<std::pair<DType, std::shared_ptr<const Model>>> models_;
};

}  // namespace kvp
