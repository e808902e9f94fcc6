#pragma once
// How one attention call's slices are cut into launches (host code; cuda_kernels.cu submits them).
// Under `standard`, slices of several rows go to the prefill kernel and one-row slices (decode
// steps) to the split-KV decode kernel, whose split length follows the number of cached keys.
// Under `invariant` with the tensor-core kernel, the same cut, but a decode step's keys are split
// at the fixed 128-key chunks that the prefill kernel merges at (cuda_attention_mma_kernel.cuh),
// which keeps its bits the prefill's. Otherwise (portable, or invariant where the tensor-core
// kernel does not apply) every slice goes to one kernel.
#include <algorithm>
#include <utility>
#include <vector>

#include "cuda/cuda_ops.h"
#include "kernels/kernels.h"

namespace kvp::cuda {

struct AttentionPlan {
  std::vector<AttnDesc> rows;   // every row of these slices through the prefill kernel
  std::vector<AttnDesc> steps;  // one-row slices through the decode launch
  int max_rows = 0;             // of `rows`
  int max_pos = 0;              // fixed-order: of `steps`' positions
  int splits = 0;               // standard: partial-state slots a (step, head) (the decode grid's width)
};

inline AttnDesc attention_desc(const AttentionParams& x) {
  return AttnDesc{x.q, x.out, x.k_cache, x.v_cache, x.n_rows, x.start_pos, x.capacity, 1, 0, 0};
}

// `standard`: enough (head, split) warps to give every multiprocessor a few, however many
// sequences. The launch is always shaped for `splits` (warps beyond a slice's splits return at
// once), so that consecutive decode steps launch the same grid and replay as one graph. A split
// holds at least split_keys keys (a warp takes 32 at a time): 32 by default (measured on an H100,
// decode after a 512-token prompt: 64 -> 32 took 1.1B from 427 to 486 tok/s and 7B from 138 to
// 144; 16 gave 7B 143.5 against 146), `KVPARITY_CUDA_SPLIT_KEYS` to change it.
inline AttentionPlan plan_standard_attention(const AttentionParams* p, int n, int sm_count, int split_keys = 32) {
  AttentionPlan plan;
  const int decoders = int(std::count_if(p, p + n, [](const AttentionParams& x) { return x.n_rows == 1; }));
  plan.splits = std::max(1, 8 * sm_count / std::max(1, decoders * p[0].n_heads));
  for (int i = 0; i < n; ++i) {
    const AttentionParams& x = p[i];
    if (x.n_rows <= 0) continue;
    AttnDesc d = attention_desc(x);
    if (x.n_rows > 1) {
      plan.max_rows = std::max(plan.max_rows, x.n_rows);
      plan.rows.push_back(d);
      continue;
    }
    const int first = x.sliding_window > 0 ? std::max(0, x.start_pos - x.sliding_window + 1) : 0;
    const int keys = x.start_pos - first + 1;
    // The split length follows the number of cached keys: splits of at least split_keys keys, no
    // more splits than the GPU needs.
    const int splits = std::clamp((keys + split_keys - 1) / std::max(split_keys, 1), 1, plan.splits);
    d.split_len = (keys + splits - 1) / splits;
    d.n_splits = (keys + d.split_len - 1) / d.split_len;
    d.part0 = int(plan.steps.size()) * x.n_heads * plan.splits;
    plan.steps.push_back(d);
  }
  return plan;
}

// The fixed-order policies: split_steps (invariant on tensor cores) sends one-row slices to the
// chunked decode (desc i's part0 = i x n_heads); else every slice goes to `rows`.
inline AttentionPlan plan_fixed_order_attention(const AttentionParams* p, int n, bool split_steps) {
  AttentionPlan plan;
  for (int i = 0; i < n; ++i) {
    if (p[i].n_rows <= 0) continue;
    AttnDesc d = attention_desc(p[i]);
    if (split_steps && d.n_rows == 1) {
      d.part0 = int(plan.steps.size()) * p[i].n_heads;
      plan.max_pos = std::max(plan.max_pos, d.start_pos);
      plan.steps.push_back(d);
    } else {
      plan.max_rows = std::max(plan.max_rows, d.n_rows);
      plan.rows.push_back(d);
    }
  }
  return plan;
}

// The first row of a call's attention output when one launch's slices (`descs`: the plan's rows or
// its steps) write the whole of it (`beside`, the other kind, empty), one block of rows `width`
// floats apart in any order of slices; else nullptr. Where that launch may also be the output's
// rounding point (CudaKernels::submit_attention).
inline const float* output_block(const std::vector<AttnDesc>& descs, const std::vector<AttnDesc>& beside,
                                 size_t width) {
  if (!beside.empty() || descs.empty()) return nullptr;
  std::vector<std::pair<const float*, int>> outs;
  for (const AttnDesc& d : descs) outs.emplace_back(d.out, d.n_rows);
  std::sort(outs.begin(), outs.end());
  const float* next = outs[0].first;
  for (const auto& [out, rows] : outs) {
    if (out != next || rows <= 0) return nullptr;
    next = out + size_t(rows) * width;
  }
  return outs[0].first;
}

}  // namespace kvp::cuda
