#pragma once
// Cache-ON vs cache-OFF for one prompt: both free-running generations (same seeded draws), the
// first divergence index and the logit gap while the two paths still share a prefix (docs/metrics.md).
#include <memory>
#include <vector>

#include "model/model.h"
#include "runtime/generator.h"

namespace kvp {

struct PathComparison {
  std::vector<int> on_ids, off_ids;  // generated tokens of each path
  int first_divergence = -1;         // first generated index where they differ; -1 if identical
  // max |logit_on - logit_off| over steps whose prefixes are identical (steps 0..first_divergence).
  double max_abs_logit_diff = 0.0;
  int steps_compared = 0;
};

PathComparison compare_cache_paths(const std::shared_ptr<const Model>& model, const EngineOptions& engine,
                                   const std::vector<int>& prompt, GenerationConfig gen);

}  // namespace kvp
