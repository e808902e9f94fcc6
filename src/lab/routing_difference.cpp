#include "lab/routing_difference.h"

#include <algorithm>
#include <vector>

#include "core/error.h"

namespace kvp {

nlohmann::json routing_difference(const ModelConfig& c, const StepExperts& candidate, const StepExperts& baseline,
                                  const std::string& what) {
  if (candidate.size() != baseline.size())
    fail("{}: the teacher-forced baseline has {} routing rows for {} candidate steps", what, baseline.size(),
         candidate.size());
  const size_t k = size_t(c.moe.n_used);
  nlohmann::json layers_differ = nlohmann::json::array(), first_layers = nlohmann::json::array(),
                 layer_flips = nlohmann::json::array();
  std::vector<int> per_layer(size_t(c.n_layers), 0);
  int sparse = 0, steps_differ = 0;
  for (int l = 0; l < c.n_layers; ++l) sparse += c.moe_layer(l);
  nlohmann::json first_step = nullptr;
  const auto experts_of = [k](const std::vector<int>& row, int l) {
    std::vector<int> e(row.begin() + std::ptrdiff_t(size_t(l) * k), row.begin() + std::ptrdiff_t(size_t(l + 1) * k));
    std::sort(e.begin(), e.end());
    return e;
  };
  for (size_t s = 0; s < candidate.size(); ++s) {
    if (candidate[s].size() != size_t(c.n_layers) * k || baseline[s].size() != candidate[s].size())
      fail("{}: step {}: routing rows of {} and {} entries for {} layers x {} experts", what, s, candidate[s].size(),
           baseline[s].size(), c.n_layers, k);
    int n = 0;
    for (int l = 0; l < c.n_layers; ++l) {
      if (!c.moe_layer(l) || experts_of(candidate[s], l) == experts_of(baseline[s], l)) continue;
      ++n;
      ++per_layer[size_t(l)];
      if (first_step.is_null()) first_step = s;
      if (first_step.get<size_t>() == s) first_layers.push_back(l);
    }
    layers_differ.push_back(n);
    steps_differ += n > 0;
  }
  for (int l = 0; l < c.n_layers; ++l)
    layer_flips.push_back(c.moe_layer(l) ? nlohmann::json(per_layer[size_t(l)]) : nlohmann::json(nullptr));
  return {{"sparse_layers", sparse},        {"experts_per_token", c.moe.n_used}, {"n_experts", c.moe.n_experts},
          {"layers_differ", layers_differ}, {"steps_differ", steps_differ},      {"first_step", first_step},
          {"first_layers", first_layers},   {"layer_flips", layer_flips}};
}

}  // namespace kvp
