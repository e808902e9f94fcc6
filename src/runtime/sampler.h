#pragma once
// Token choice from logits (DESIGN.md §6). Sampling takes its uniform draw as an argument, so the
// caller decides where randomness comes from (the counter-based RNG keyed by seed/sequence/step).
#include <string>
#include <vector>

namespace kvp {

enum class SamplerKind { Greedy, Temperature, TopK, TopP, MinP };

struct SamplerConfig {
  SamplerKind kind = SamplerKind::Greedy;
  double temperature = 1.0;
  int top_k = 40;
  double top_p = 0.9;
  double min_p = 0.05;
  // Throws a usage error naming the option when a parameter is out of range.
  void validate() const;
  std::string describe() const;  // e.g. "top-p(p=0.9,T=0.8)"
};

SamplerKind parse_sampler(const std::string& s);  // greedy|temperature|top-k|top-p|min-p
std::string sampler_name(SamplerKind k);

// Argmax; ties go to the lowest id.
int argmax(const float* logits, int n);

// Chooses a token with uniform draw u in [0, 1). Greedy ignores u. Probabilities are computed in
// fp64 from logits / temperature, restricted by top-k / top-p / min-p, and u is mapped through the
// cumulative distribution over candidates ordered by (probability desc, id asc).
int sample_token(const float* logits, int n, const SamplerConfig& cfg, double u);

}  // namespace kvp
