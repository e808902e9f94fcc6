#pragma once
// The cache-ON and cache-OFF paths of one checkpoint under `invariant`: every decode step's logits
// after a prefill of `prefill` tokens equal, bit for bit, those of recomputing the whole sequence.
#include <gtest/gtest.h>

#include <vector>

#include "io/checkpoint.h"
#include "model/model.h"
#include "runtime/generator.h"

namespace kvp::test {

inline void expect_invariant_cache_paths_agree(const Checkpoint& ck, DType dt, const std::vector<int>& toks,
                                               int prefill) {
  EngineOptions eo;
  eo.kernels = KernelPolicy::Invariant;
  Engine on(Model::from_checkpoint(ck, dt), eo), off(Model::from_checkpoint(ck, dt), eo);
  const int V = ck.config.vocab_size;
  on.forward(toks.data(), prefill, 0, ForwardOptions{});
  for (int t = prefill; t < int(toks.size()); ++t) {
    ForwardOptions last;
    last.all_logits = false;
    const float* c = on.forward(toks.data() + t, 1, t, last);
    const std::vector<float> cached(c, c + V);
    const float* u = off.forward_uncached(toks.data(), t + 1, last);
    EXPECT_EQ(cached, std::vector<float>(u, u + V)) << dtype_name(dt) << " step " << t;
  }
}

}  // namespace kvp::test
