#include "lab/path_comparison.h"

#include <algorithm>
#include <cmath>

namespace kvp {

PathComparison compare_cache_paths(const std::shared_ptr<const Model>& model, const EngineOptions& engine_opts,
                                   const std::vector<int>& prompt, GenerationConfig gen) {
  Engine engine(model, engine_opts);
  std::vector<std::vector<float>> logits_on, logits_off;
  auto record = [](std::vector<std::vector<float>>& into) {
    return [&into](const StepInfo& s) { into.emplace_back(s.logits, s.logits + s.vocab); };
  };
  gen.cache = CacheMode::On;
  const GenerationResult on = engine.generate(prompt, gen, nullptr, record(logits_on));
  gen.cache = CacheMode::Off;
  const GenerationResult off = engine.generate(prompt, gen, nullptr, record(logits_off));

  PathComparison r;
  r.on_ids = on.output_ids;
  r.off_ids = off.output_ids;
  const size_t common = std::min(r.on_ids.size(), r.off_ids.size());
  for (size_t i = 0; i < common; ++i)
    if (r.on_ids[i] != r.off_ids[i]) {
      r.first_divergence = int(i);
      break;
    }
  if (r.first_divergence < 0 && r.on_ids.size() != r.off_ids.size()) r.first_divergence = int(common);
  const size_t last = r.first_divergence < 0 ? common : size_t(r.first_divergence) + 1;
  for (size_t s = 0; s < std::min({last, logits_on.size(), logits_off.size()}); ++s) {
    for (size_t v = 0; v < logits_on[s].size(); ++v)
      r.max_abs_logit_diff = std::max(r.max_abs_logit_diff, std::fabs(double(logits_on[s][v]) - logits_off[s][v]));
    ++r.steps_compared;
  }
  return r;
}

}  // namespace kvp
