#pragma once
// A mixture of experts: where two sides, computing the same steps, routed the row each step's
// token comes from to different experts (docs/metrics.md, "Routing"). `compare` and `eval gsm8k`
// both record it, from the candidate's steps and the baseline's teacher-forced along them.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lab/side_runner.h"
#include "model/config.h"

namespace kvp {

// The record's teacher_forced.routing (docs/results-schema.md): per step the sparse layers whose
// sets of k experts differ (the same experts in another rank order run the same MLPs), the steps
// with any, the first of them and its layers, and per layer how many steps differ. `what` names
// the item in errors (rows of the wrong size, another number of steps).
nlohmann::json routing_difference(const ModelConfig& c, const StepExperts& candidate, const StepExperts& baseline,
                                  const std::string& what);

// The records' routing differences added up, for a report's row or condition (summary.json's and
// the GSM8K summary's `routing`): layer-step, step and record rates, the records that diverged at
// or after their first routing difference, where the first difference came, per-layer counts.
class RoutingTally {
 public:
  // One record's teacher_forced.routing (as routing_difference wrote it) and the record's
  // first_divergence (null: none). A field missing or mistyped fails naming it.
  void add(const nlohmann::json& routing, const nlohmann::json& first_divergence);
  int records() const { return records_; }
  long long layer_flips() const { return layer_flips_; }
  nlohmann::json to_json() const;

 private:
  int records_ = 0, steps_ = 0, sparse_layers_ = 0, k_ = 0, n_experts_ = 0;
  long long layer_flips_ = 0;
  int steps_differ_ = 0, records_differ_ = 0, diverged_ = 0, diverged_after_flip_ = 0;
  std::vector<double> first_step_;
  std::vector<long long> by_layer_;  // per layer; -1 for a dense one
};

}  // namespace kvp
