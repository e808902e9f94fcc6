#pragma once
// Per-step logit divergence between the two cache paths (docs/metrics.md): max and mean |Δlogit|,
// KL(p_on || p_off) in fp64, and the top-1 margin of the cache-ON logits.
#include <vector>

namespace kvp {

struct StepMetrics {
  double max_abs_logit_diff = 0;
  double mean_abs_logit_diff = 0;
  double kl = 0;           // KL(p_on || p_off), softmax at temperature 1, fp64
  double top1_margin = 0;  // cache-ON logits: top-1 minus top-2
};

StepMetrics step_metrics(const float* logits_on, const float* logits_off, int vocab);

}  // namespace kvp
