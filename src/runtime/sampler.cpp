#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "kernels/portable_math.h"

namespace kvp {

SamplerKind parse_sampler(const std::string& s) {
  if (s == "greedy") return SamplerKind::Greedy;
  if (s == "temperature") return SamplerKind::Temperature;
  if (s == "top-k") return SamplerKind::TopK;
  if (s == "top-p") return SamplerKind::TopP;
  if (s == "min-p") return SamplerKind::MinP;
  fail_usage("unknown sampler '{}' (expected greedy, temperature, top-k, top-p or min-p)", s);
}

std::string sampler_name(SamplerKind k) {
  switch (k) {
    case SamplerKind::Greedy: return "greedy";
    case SamplerKind::Temperature: return "temperature";
    case SamplerKind::TopK: return "top-k";
    case SamplerKind::TopP: return "top-p";
    case SamplerKind::MinP: return "min-p";
  }
  return "?";
}

void SamplerConfig::validate() const {
  if (kind == SamplerKind::Greedy) return;
  if (!(temperature > 0.0) || !std::isfinite(temperature))
    fail_usage("--temperature must be > 0 for sampler '{}' (got {}); use --sampler greedy for argmax",
               sampler_name(kind), temperature);
  if (kind == SamplerKind::TopK && top_k <= 0) fail_usage("--top-k must be >= 1 (got {})", top_k);
  if (kind == SamplerKind::TopP && !(top_p > 0.0 && top_p <= 1.0))
    fail_usage("--top-p must be in (0, 1] (got {})", top_p);
  if (kind == SamplerKind::MinP && !(min_p >= 0.0 && min_p <= 1.0))
    fail_usage("--min-p must be in [0, 1] (got {})", min_p);
}

std::string SamplerConfig::describe() const {
  switch (kind) {
    case SamplerKind::Greedy: return "greedy";
    case SamplerKind::Temperature: return fmt::format("temperature(T={})", temperature);
    case SamplerKind::TopK: return fmt::format("top-k(k={},T={})", top_k, temperature);
    case SamplerKind::TopP: return fmt::format("top-p(p={},T={})", top_p, temperature);
    case SamplerKind::MinP: return fmt::format("min-p(p={},T={})", min_p, temperature);
  }
  return "?";
}

int argmax(const float* logits, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

int sample_token(const float* logits, int n, const SamplerConfig& cfg, double u) {
  if (cfg.kind == SamplerKind::Greedy) return argmax(logits, n);
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  // Stable order by logit desc, id asc: equal probabilities never depend on sort internals.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  size_t keep = size_t(n);
  if (cfg.kind == SamplerKind::TopK) keep = std::min(keep, size_t(cfg.top_k));
  const double max_logit = double(logits[order[0]]);
  std::vector<double> p(keep);
  double sum = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    // pmath::exp, not libm's: libms differ in the last bit, and the portable policy promises the
    // same ids (not only the same logits) on every machine.
    p[i] = pmath::exp((double(logits[order[i]]) - max_logit) / cfg.temperature);
    sum += p[i];
  }
  for (auto& x : p) x /= sum;
  if (cfg.kind == SamplerKind::TopP) {
    double cum = 0.0;
    size_t k = 0;
    while (k < keep) {
      cum += p[k++];
      if (cum >= cfg.top_p) break;
    }
    keep = k;
  } else if (cfg.kind == SamplerKind::MinP) {
    const double threshold = cfg.min_p * p[0];
    size_t k = 1;
    while (k < keep && p[k] >= threshold) ++k;
    keep = k;
  }
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) total += p[i];
  const double target = u * total;
  double cum = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    cum += p[i];
    if (target < cum) return order[i];
  }
  return order[keep - 1];
}

}  // namespace kvp
