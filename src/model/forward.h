#pragma once
// One forward pass over M consecutive tokens: reads K/V of earlier positions from the cache,
// writes the new rows' K/V into it, and produces logits. The same function serves cache-ON
// (prefill, then M = 1 per step) and cache-OFF (M = t+1 from position 0 every step).
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "model/model.h"
#include "runtime/hooks.h"
#include "runtime/kv_cache.h"

namespace kvp {

enum class NonFinitePolicy { Error, Warn };

// Where a NaN/Inf first appeared (e.g. fp16 overflow).
struct NonFiniteEvent {
  std::string tensor;
  int layer = -1;
  int position = -1;
  int index = -1;  // element index within the row
  float value = 0.0f;
  std::string describe() const;
};

// Scratch buffers sized for the largest M seen so far; reused across calls.
struct Activations {
  std::vector<float> x, xb, q, k, v, att, proj, gate, up, logits;
  int rows_capacity = 0;
  std::vector<NonFiniteEvent> nonfinite;  // events recorded under NonFinitePolicy::Warn
};

struct ForwardOptions {
  bool all_logits = true;  // logits for every row (as HF does) or only for the last
  NonFinitePolicy on_nonfinite = NonFinitePolicy::Error;
  ForwardHooks* hooks = nullptr;
};

// Returns a pointer to the logits: [M, vocab] when all_logits, else [1, vocab] (last row).
// Values are fp32 holding numbers rounded to the compute dtype (HF: lm_head in dtype, then .float()).
const float* forward(const Model& model, Kernels& kernels, KVCache& cache, Activations& act, const int* tokens, int M,
                     int start_pos, const ForwardOptions& opts = {});

}  // namespace kvp
