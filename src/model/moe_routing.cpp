#include "model/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "kernels/portable_math.h"

namespace kvp {

ExpertRouting route_experts(const float* logits, int rows, int n_experts, int k, bool renormalise, DType act) {
  if (n_experts <= 0 || k <= 0 || k > n_experts) fail("routing: {} experts per row of {} experts", k, n_experts);
  ExpertRouting r;
  r.expert.resize(size_t(rows) * k);
  r.weight.resize(size_t(rows) * k);
  r.margin.resize(size_t(rows));
  r.rows_of.resize(size_t(n_experts));
  r.weight_of.resize(size_t(n_experts));
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
    std::iota(order.begin(), order.end(), 0);
    // torch.topk's order: largest first; equal probabilities by index, so the choice is defined.
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
      return p[size_t(a)] != p[size_t(b)] ? p[size_t(a)] > p[size_t(b)] : a < b;
    });
    float chosen = 0.0f;
    for (int j = 0; j < k; ++j) chosen += p[size_t(order[size_t(j)])];
    // Margins on the logits (what rounding moves), not the probabilities.
    r.margin[size_t(row)] = std::numeric_limits<float>::infinity();
    if (k < n_experts) {
      float next = -std::numeric_limits<float>::infinity();
      for (int j = k; j < n_experts; ++j) next = std::max(next, x[order[size_t(j)]]);
      r.margin[size_t(row)] = x[order[size_t(k - 1)]] - next;
    }
    for (int j = 0; j < k; ++j) {
      const int e = order[size_t(j)];
      const float w = round_to(act, renormalise ? p[size_t(e)] / chosen : p[size_t(e)]);
      r.expert[size_t(row) * k + j] = e;
      r.weight[size_t(row) * k + j] = w;
    }
  }
  for (int row = 0; row < rows; ++row)
    for (int j = 0; j < k; ++j) {
      const int e = r.expert[size_t(row) * k + j];
      r.rows_of[size_t(e)].push_back(row);
      r.weight_of[size_t(e)].push_back(r.weight[size_t(row) * k + j]);
    }
  return r;
}

}  // namespace kvp
