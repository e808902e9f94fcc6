#pragma once
// Which experts the rows of a sparse layer run, and with what weights, as transformers'
// MixtralSparseMoeBlock and Qwen2/Qwen3MoeSparseMoeBlock decide it (v4.51):
//   routing_weights = softmax(router_logits, dtype=float32)      router_logits already in P
//   routing_weights, selected = topk(routing_weights, k)          largest first
//   routing_weights /= routing_weights.sum(-1)                    when renormalised
//   routing_weights = routing_weights.to(P)
// The experts then run in index order, each over the rows that chose it (ascending), and their
// weighted outputs are summed into the rows in that order (index_add_ in P).
//
// The routing is a discrete decision taken from rounded numbers: a row whose k-th and (k+1)-th
// router logits are close can pick another expert when cache ON and OFF (or two machines) round
// the router's input differently, and then its MLP output differs by far more than rounding. The
// softmax is computed on the host with pmath's exp, so the same logits route the same way on
// every machine and under every kernel policy.
#include <vector>

#include "core/dtype.h"
#include "model/config.h"

namespace kvp {

struct ExpertRouting {
  std::vector<int> expert;    // [rows * k]: row r's experts, largest probability first (ties: lower index)
  std::vector<float> weight;  // [rows * k]: their weights, rounded to the compute dtype
  // Per expert, the rows that chose it (ascending) and each one's weight: the order the experts'
  // outputs are added in.
  std::vector<std::vector<int>> rows_of;
  std::vector<std::vector<float>> weight_of;
  // Per row: the k-th largest router logit minus the (k+1)-th (how near the row is to choosing
  // another expert; +inf when k = n_experts).
  std::vector<float> margin;
};

// logits: [rows, n_experts] host values of the compute dtype `act`. A NaN logit is an error naming
// the layer (the caller checks the logits' rounding point first, so this is a second line).
ExpertRouting route_experts(const float* logits, int rows, int n_experts, int k, bool renormalise, DType act);

// GPT-OSS's GptOssTopKRouter instead: the k largest logits (as topk orders them), then
// softmax(top_values, dtype=P): exp(x - max) in fp32 over those k alone, summed largest first,
// each weight rounded to P. The weights sum to 1 without renormalising.
ExpertRouting route_top_k_then_softmax(const float* logits, int rows, int n_experts, int k, DType act);

// The routing `moe` says (MoeConfig::routing).
ExpertRouting route_experts(const float* logits, int rows, const MoeConfig& moe, DType act);

}  // namespace kvp
