#include "lab/routing_difference.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "lab/stats.h"

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

void RoutingTally::add(const nlohmann::json& r, const nlohmann::json& first_divergence) {
  try {
    ++records_;
    sparse_layers_ = r.at("sparse_layers").get<int>();
    k_ = r.at("experts_per_token").get<int>();
    n_experts_ = r.at("n_experts").get<int>();
    for (const auto& n : r.at("layers_differ")) {
      ++steps_;
      layer_flips_ += n.get<long long>();
    }
    steps_differ_ += r.at("steps_differ").get<int>();
    const auto& first = r.at("first_step");
    const bool any = !first.is_null();
    records_differ_ += any;
    if (any) first_step_.push_back(first.get<double>());
    if (!first_divergence.is_null()) {
      ++diverged_;
      diverged_after_flip_ += any && first.get<long long>() <= first_divergence.get<long long>();
    }
    const auto& layers = r.at("layer_flips");
    if (by_layer_.size() < layers.size()) by_layer_.resize(layers.size(), -1);
    for (size_t l = 0; l < layers.size(); ++l)
      if (!layers[l].is_null()) by_layer_[l] = std::max(by_layer_[l], 0LL) + layers[l].get<long long>();
  } catch (const nlohmann::json::exception& e) {
    fail("teacher_forced.routing: missing or mistyped field ({})", e.what());
  }
}

nlohmann::json RoutingTally::to_json() const {
  const auto rate = [](double num, double den) { return den > 0 ? nlohmann::json(num / den) : nlohmann::json(nullptr); };
  nlohmann::json by_layer = nlohmann::json::array();
  for (long long n : by_layer_) by_layer.push_back(n < 0 ? nlohmann::json(nullptr) : nlohmann::json(n));
  return {{"records", records_},
          {"sparse_layers", sparse_layers_},
          {"experts_per_token", k_},
          {"n_experts", n_experts_},
          {"layer_flip_rate", rate(double(layer_flips_), double(steps_) * sparse_layers_)},
          {"step_flip_rate", rate(steps_differ_, steps_)},
          {"prompt_rate", rate(records_differ_, records_)},
          {"divergences_after_routing_flip",
           {{"count", diverged_after_flip_}, {"of", diverged_}, {"rate", rate(diverged_after_flip_, diverged_)}}},
          {"first_routing_difference_index", summarize(first_step_).to_json()},
          {"layer_flips", by_layer}};
}

}  // namespace kvp
