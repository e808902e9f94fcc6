#pragma once
// Batched vs solo decoding: does a sequence come out the same when it shares its forward passes
// with other sequences (batched GEMMs with M = B, a batched prefill) as when it runs alone? The
// invariant kernels guarantee bitwise equality; for the standard policy this measures how often
// batching changes outputs (the "batch size changes my results" report every serving stack gets).
#include <memory>
#include <vector>

#include "model/model.h"
#include "runtime/generator.h"

namespace kvp {

struct BatchSoloSequence {
  std::vector<int> batch_ids, solo_ids;  // generated tokens
  int first_divergence = -1;             // first generated index where the tokens differ; -1: none
  // Over the steps whose prefixes are identical: max |logit_batch - logit_solo|, and whether any
  // logit differs in its bits there.
  double max_abs_logit_diff = 0.0;
  bool logits_bitwise_equal = true;
  int steps_compared = 0;
};

struct BatchSoloComparison {
  std::vector<BatchSoloSequence> sequences;
  int tokens_differ = 0;  // sequences whose generated tokens differ
  int logits_differ = 0;  // sequences with any logit bit different over the shared prefix
  double token_divergence_rate() const {
    return sequences.empty() ? 0.0 : double(tokens_differ) / double(sequences.size());
  }
  double logit_divergence_rate() const {
    return sequences.empty() ? 0.0 : double(logits_differ) / double(sequences.size());
  }
};

// One sequence's batched run against its solo run: generated tokens and each step's logits
// ([step][vocab]). Fills everything but nothing else (the counts of BatchSoloComparison).
BatchSoloSequence compare_batch_sequence(std::vector<int> batch_ids, const std::vector<std::vector<float>>& batch_logits,
                                         std::vector<int> solo_ids, const std::vector<std::vector<float>>& solo_logits);

// Runs all prompts as one batch (Engine::generate_batch) and each prompt alone (Engine::generate
// with sequence id gen.sequence_id + b, the id the batch gives it), with the same engine options.
BatchSoloComparison compare_batch_to_solo(const std::shared_ptr<const Model>& model, const EngineOptions& engine,
                                          const std::vector<std::vector<int>>& prompts, const GenerationConfig& gen);

}  // namespace kvp
