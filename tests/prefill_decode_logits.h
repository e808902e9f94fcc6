#pragma once
// The logits of a prefill of all but the last token (M >= 16 reaches the blocked GEMM paths) and of
// one decode step after it (M = 1: the GEMV paths), every row's kept: what the quantised-format tests
// compare bit for bit between a quantised model and its dequantised twin.
#include <memory>
#include <vector>

#include "model/model.h"
#include "runtime/generator.h"

namespace kvp::test {

inline std::vector<float> prefill_then_decode_logits(const std::shared_ptr<Model>& m, KernelPolicy pol, int threads,
                                                     const std::vector<int>& tokens) {
  EngineOptions eo;
  eo.kernels = pol;
  eo.threads = threads;
  Engine e(m, eo);
  const int V = m->config.vocab_size;
  ForwardOptions fo;
  fo.all_logits = true;
  const int P = int(tokens.size()) - 1;
  const float* l = e.forward(tokens.data(), P, 0, fo);
  std::vector<float> out(l, l + size_t(P) * V);
  l = e.forward(tokens.data() + P, 1, P, ForwardOptions{});
  out.insert(out.end(), l, l + V);
  return out;
}

}  // namespace kvp::test
