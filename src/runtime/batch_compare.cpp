#include "runtime/batch_compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace kvp {

BatchSoloSequence compare_batch_sequence(std::vector<int> batch_ids, const std::vector<std::vector<float>>& batch_logits,
                                         std::vector<int> solo_ids, const std::vector<std::vector<float>>& solo_logits) {
  BatchSoloSequence q;
  q.batch_ids = std::move(batch_ids);
  q.solo_ids = std::move(solo_ids);
  const size_t n = std::min(q.batch_ids.size(), q.solo_ids.size());
  for (size_t i = 0; i < n && q.first_divergence < 0; ++i)
    if (q.batch_ids[i] != q.solo_ids[i]) q.first_divergence = int(i);
  if (q.first_divergence < 0 && q.batch_ids.size() != q.solo_ids.size()) q.first_divergence = int(n);
  // Step i's logits depend on tokens before i, so they are comparable up to the divergence.
  const size_t steps = std::min({batch_logits.size(), solo_logits.size(),
                                 q.first_divergence < 0 ? n : size_t(q.first_divergence) + 1});
  for (size_t i = 0; i < steps; ++i) {
    const auto& x = batch_logits[i];
    const auto& y = solo_logits[i];
    if (x.size() != y.size() || std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) != 0)
      q.logits_bitwise_equal = false;
    for (size_t v = 0; v < std::min(x.size(), y.size()); ++v)
      q.max_abs_logit_diff = std::max(q.max_abs_logit_diff, double(std::fabs(x[v] - y[v])));
  }
  q.steps_compared = int(steps);
  return q;
}

BatchSoloComparison compare_batch_to_solo(const std::shared_ptr<const Model>& model, const EngineOptions& engine,
                                          const std::vector<std::vector<int>>& prompts, const GenerationConfig& gen) {
  const size_t B = prompts.size();
  std::vector<std::vector<std::vector<float>>> batch_logits(B), solo_logits(B);
  BatchSoloComparison out;
  out.sequences.resize(B);
  {
    Engine e(model, engine);
    const auto results = e.generate_batch(prompts, gen, nullptr, [&](int b, const StepInfo& s) {
      batch_logits[size_t(b)].emplace_back(s.logits, s.logits + s.vocab);
    });
    for (size_t b = 0; b < B; ++b) out.sequences[b].batch_ids = results[b].output_ids;
  }
  Engine solo(model, engine);
  for (size_t b = 0; b < B; ++b) {
    GenerationConfig g = gen;
    g.sequence_id = gen.sequence_id + b;
    out.sequences[b].solo_ids = solo.generate(prompts[b], g, nullptr, [&](const StepInfo& s) {
      solo_logits[b].emplace_back(s.logits, s.logits + s.vocab);
    }).output_ids;
  }
  for (size_t b = 0; b < B; ++b) {
    BatchSoloSequence& q = out.sequences[b];
    q = compare_batch_sequence(std::move(q.batch_ids), batch_logits[b], std::move(q.solo_ids), solo_logits[b]);
    out.tokens_differ += q.first_divergence >= 0;
    out.logits_differ += !q.logits_bitwise_equal;
  }
  return out;
}

}  // namespace kvp
