#pragma once
// A mixture of experts: where two sides, computing the same steps, routed the row each step's
// token comes from to different experts (docs/metrics.md, "Routing"). `compare` and `eval gsm8k`
// both record it, from the candidate's steps and the baseline's teacher-forced along them.
#include <nlohmann/json.hpp>
#include <string>

#include "lab/side_runner.h"
#include "model/config.h"

namespace kvp {

// The record's teacher_forced.routing (docs/results-schema.md): per step the sparse layers whose
// sets of k experts differ (the same experts in another rank order run the same MLPs), the steps
// with any, the first of them and its layers, and per layer how many steps differ. `what` names
// the item in errors (rows of the wrong size, another number of steps).
nlohmann::json routing_difference(const ModelConfig& c, const StepExperts& candidate, const StepExperts& baseline,
                                  const std::string& what);

}  // namespace kvp
