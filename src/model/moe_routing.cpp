#include "model/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "kernels/portable_math.h"

namespace kvp {

namespace {

ExpertRouting empty_routing(int rows, int n_experts, int k) {
  if (n_experts <= 0 || k <= 0 || k > n_experts) fail("routing: {} experts per row of {} experts", k, n_experts);
  ExpertRouting r;
  r.expert.resize(size_t(rows) * k);
  r.weight.resize(size_t(rows) * k);
  r.margin.resize(size_t(rows));
  r.rows_of.resize(size_t(n_experts));
  r.weight_of.resize(size_t(n_experts));
  return r;
}

// The k largest of v[0..n) first in `order`, as torch.topk orders them: largest first, equal values
// by index, so the choice is defined.
void top_k(const float* v, int n, int k, std::vector<int>& order) {
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int a, int b) { return v[a] != v[b] ? v[a] > v[b] : a < b; });
}

// The k-th chosen logit minus the largest unchosen one: margins on the logits (what rounding
// moves), not the probabilities; +inf when every expert is chosen.
float margin(const float* x, int n, int k, const std::vector<int>& order) {
  if (k >= n) return std::numeric_limits<float>::infinity();
  float next = -std::numeric_limits<float>::infinity();
  for (int j = k; j < n; ++j) next = std::max(next, x[order[size_t(j)]]);
  return x[order[size_t(k - 1)]] - next;
}

// Per expert, its rows (ascending) and their weights: the order the experts' outputs are added in.
void index_by_expert(ExpertRouting& r, int rows, int k) {
  for (int row = 0; row < rows; ++row)
    for (int j = 0; j < k; ++j) {
      const int e = r.expert[size_t(row) * k + j];
      r.rows_of[size_t(e)].push_back(row);
      r.weight_of[size_t(e)].push_back(r.weight[size_t(row) * k + j]);
    }
}

}  // namespace

ExpertRouting route_experts(const float* logits, int rows, int n_experts, int k, bool renormalise, DType act) {
  ExpertRouting r = empty_routing(rows, n_experts, k);
  std::vector<float> p(static_cast<size_t>(n_experts));
  std::vector<int> order(static_cast<size_t>(n_experts));
  for (int row = 0; row < rows; ++row) {
    const float* x = logits + size_t(row) * n_experts;
    float mx = -std::numeric_limits<float>::infinity();
    for (int e = 0; e < n_experts; ++e) {
      if (std::isnan(x[e])) fail("routing: router logit {} of row {} is NaN", e, row);
      mx = std::max(mx, x[e]);
    }
    // softmax in fp32 (F.softmax(..., dtype=torch.float)): exp(x - max), summed in index order.
    float sum = 0.0f;
    for (int e = 0; e < n_experts; ++e) {
      p[size_t(e)] = pmath::expf_rounded(x[e] - mx);
      sum += p[size_t(e)];
    }
    for (int e = 0; e < n_experts; ++e) p[size_t(e)] /= sum;
    top_k(p.data(), n_experts, k, order);
    float chosen = 0.0f;
    for (int j = 0; j < k; ++j) chosen += p[size_t(order[size_t(j)])];
    r.margin[size_t(row)] = margin(x, n_experts, k, order);
    for (int j = 0; j < k; ++j) {
      const int e = order[size_t(j)];
      const float w = round_to(act, renormalise ? p[size_t(e)] / chosen : p[size_t(e)]);
      r.expert[size_t(row) * k + j] = e;
      r.weight[size_t(row) * k + j] = w;
    }
  }
  index_by_expert(r, rows, k);
  return r;
}

ExpertRouting route_top_k_then_softmax(const float* logits, int rows, int n_experts, int k, DType act) {
  ExpertRouting r = empty_routing(rows, n_experts, k);
  std::vector<int> order(static_cast<size_t>(n_experts));
  std::vector<float> p(static_cast<size_t>(k));
  for (int row = 0; row < rows; ++row) {
    const float* x = logits + size_t(row) * n_experts;
    for (int e = 0; e < n_experts; ++e)
      if (std::isnan(x[e])) fail("routing: router logit {} of row {} is NaN", e, row);
    top_k(x, n_experts, k, order);
    // softmax(top_values, dtype=P): in fp32 over the k values as topk returns them (largest first,
    // so the max is the first), summed in that order, each probability rounded to P.
    const float mx = x[order[0]];
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) {
      p[size_t(j)] = pmath::expf_rounded(x[order[size_t(j)]] - mx);
      sum += p[size_t(j)];
    }
    r.margin[size_t(row)] = margin(x, n_experts, k, order);
    for (int j = 0; j < k; ++j) {
      r.expert[size_t(row) * k + j] = order[size_t(j)];
      r.weight[size_t(row) * k + j] = round_to(act, p[size_t(j)] / sum);
    }
  }
  index_by_expert(r, rows, k);
  return r;
}

ExpertRouting route_experts(const float* logits, int rows, const MoeConfig& moe, DType act) {
  if (moe.routing == MoeConfig::Routing::TopKThenSoftmax)
    return route_top_k_then_softmax(logits, rows, moe.n_experts, moe.n_used, act);
  return route_experts(logits, rows, moe.n_experts, moe.n_used, moe.norm_topk_prob, act);
}

}  // namespace kvp
