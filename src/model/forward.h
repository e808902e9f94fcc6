#pragma once
// One forward pass over M consecutive tokens: reads K/V of earlier positions from the cache,
// writes the new rows' K/V into it, and produces logits. The same function serves cache-ON
// (prefill, then M = 1 per step) and cache-OFF (M = t+1 from position 0 every step).
#include <string>
#include <vector>

#include "core/device.h"
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

// fp32 scratch on the kernels' device, grown to the largest pass seen so far.
class ActivationBuffer {
 public:
  float* data() { return buf_.as<float>(); }
  size_t size() const { return buf_.size() / sizeof(float); }
  // Grows to at least n floats on device d (the contents are not kept), by grown_size's steps.
  void ensure(Device d, size_t n) {
    const bool here = buf_.device() == d;
    if (here && size() >= n) return;
    const size_t bytes = here ? grown_size(buf_.size(), n * sizeof(float)) : n * sizeof(float);
    buf_ = DeviceBuffer();  // the old block goes before the new one is asked for
    buf_ = DeviceBuffer(d, bytes);
  }
  void swap(ActivationBuffer& o) noexcept { std::swap(buf_, o.buf_); }

 private:
  DeviceBuffer buf_;
};

// Scratch buffers sized for the largest M seen so far; reused across calls.
struct Activations {
  // qkv holds q [M, q_dim], k and v [M, kv_dim] one after another; gate_up gate then up [M,
  // hidden]: the members of one matmul_group each (a decode row of each is one output row).
  ActivationBuffer x, xb, qkv, att, proj, gate_up, logits;
  ActivationBuffer qk_normed;              // Qwen3/Gemma-3: q's and k's per-head norms, RoPE's input
  // Sparse layers: router logits [M, n_experts]; an expert's gathered rows [M, dim], its gate and
  // up, its output [M, dim].
  ActivationBuffer router, moe_x, moe_gate_up, moe_y;
  // A mixture of experts: the experts each slice's last row chose, [slice][layer][k] (largest
  // probability first; -1 for a dense layer), written by every pass: what the routing of a step's
  // token was (StepInfo::experts). Empty for a dense model.
  std::vector<int> last_row_experts;
  std::vector<float> host_logits;          // the logits copied back from a device other than the CPU
  std::vector<NonFiniteEvent> nonfinite;  // events recorded under NonFinitePolicy::Warn
};

struct ForwardOptions {
  bool all_logits = true;  // logits for every row (as HF does) or only for the last
  NonFinitePolicy on_nonfinite = NonFinitePolicy::Error;
  ForwardHooks* hooks = nullptr;
};

// Returns a pointer to the logits in host memory: [M, vocab] when all_logits, else [1, vocab]
// (last row); valid until the next pass with the same Activations. Values are fp32 holding numbers rounded to the compute dtype (HF: lm_head in dtype, then .float()).
const float* forward(const Model& model, Kernels& kernels, KVCache& cache, Activations& act, const int* tokens, int M,
                     int start_pos, const ForwardOptions& opts = {});

// One sequence's share of a batched pass: n_tokens consecutive tokens at positions start_pos..,
// attending to (and written into) that sequence's own cache.
struct SequenceSlice {
  KVCache* cache = nullptr;
  const int* tokens = nullptr;
  int n_tokens = 0;
  int start_pos = 0;
};

// Several sequences in one pass (batched decoding, batched or chunked prefill): the slices' rows
// are concatenated, so every matmul and norm runs once with M = total tokens, while RoPE, cache
// writes and attention run per slice. Slices must use distinct caches. Returns logits
// [total, vocab] in slice order when all_logits, else [slices, vocab] (each slice's last row).
// Hooks are called once per slice, with that slice's rows and start position.
const float* forward_batch(const Model& model, Kernels& kernels, Activations& act,
                           const std::vector<SequenceSlice>& slices, const ForwardOptions& opts = {});

}  // namespace kvp
