// CudaKernels' attention (cuda_kernels.cuh): each call's slices planned by policy (the standard
// split-KV decode and flash prefill, or the fixed-order kernels of portable and invariant), their
// descriptors uploaded through the staging ring and every launch submitted under its signature, so
// that a decode step replays as a graph.
#include "cuda/cuda_kernels.cuh"

namespace kvp::cuda {

void CudaKernels::attention_batch(const AttentionParams* p, int n) {
  OpSpan span("attention");
  if (n <= 0) return fusion_.flush();
  const AttentionParams& a = p[0];
  if (a.n_heads <= 0 || a.n_kv_heads <= 0 || a.n_heads % a.n_kv_heads != 0 || a.head_dim <= 0)
    fail_input("attention: " + std::to_string(a.n_heads) + " query heads cannot share " +
               std::to_string(a.n_kv_heads) + " KV heads (head_dim " + std::to_string(a.head_dim) + ")");
  if (a.head_dim > 256)
    fail_input("attention on CUDA: head_dim " + std::to_string(a.head_dim) + " is above the supported 256");
  // GPT-OSS's sinks (one layer's, shared by every slice of the call): their device copy, made on
  // the layer's first call and kept at one address, which the launch signatures hash with the
  // shape (a replayed graph reads what its capture read).
  AttnShape s{a.n_heads, a.n_kv_heads,     a.head_dim,      a.score_divisor, a.score_scale,
              a.softcap, a.sliding_window, store_of(a.act), kv_store(a.kv)};
  if (a.sinks != nullptr) s.sinks = weights_->vector(a.sinks, a.n_heads);
  // Fixed order (every row in an order that depends on its own keys alone), invariant: the
  // tensor-core flash kernel where it applies, its keys in chunks merged in order, and decode
  // steps by chunk in blocks of their own, then merged the same way (the same bits:
  // cuda_attention_mma_kernel.cuh); else (and portable) the portable kernel.
  const bool tc = policy_ == KernelPolicy::Invariant && attention_mma_applies(s);
  AttentionPlan plan = fixed_order() ? plan_fixed_order_attention(p, n, tc)
                                     : plan_standard_attention(p, n, sm_count(), decode_split_keys());
  // Where the tensor-core prefill kernel reads every row, the held rotation may write q for it in
  // 16 bits (take_q16), decided before the flush launches that rotation.
  const bool mma_rows_only = plan.steps.empty() && (fixed_order() ? tc : attention_mma_applies(s)) &&
                             plan.max_rows <= attention_mma_max_rows();
  const bool q16 = mma_rows_only && take_q16(plan.rows, s);
  fusion_.flush();
  for (int i = 0; i < n; ++i) wrote(p[i].out, size_t(p[i].n_rows) * p[i].n_heads * p[i].head_dim);
  if (fixed_order()) {
    // Never the portable kernel for some rows of a tensor-core call: the bits would part.
    if (tc && plan.max_rows > attention_mma_max_rows())
      fail_input("attention: " + std::to_string(plan.max_rows) +
                 " rows in one slice, past the tensor-core kernel's " + std::to_string(attention_mma_max_rows()));
    if (!plan.rows.empty()) {
      const AttnDesc* descs = upload(kAttnPrefillDescs, plan.rows.data(), plan.rows.size());
      const int nr = int(plan.rows.size()), max_rows = plan.max_rows;
      const uint64_t sig = signature(kPrefill, descs, nr, max_rows, s, tc, q16);
      if (!tc) {
        graphs_.submit(sig, [=] { launch_portable_attention(descs, nr, max_rows, s); });
      } else {
        submit_attention(sig, plan.rows, plan.steps, s, [=](const AttnStore& st) {
          // attention_mma_applies and the row limit above: the kernel that takes `st` runs.
          if (!launch_attention_prefill_mma(descs, nr, max_rows, s, true, st))
            fail_input("attention: the tensor-core kernel refused a call it was planned for");
        });
      }
    }
    if (!plan.steps.empty()) {
      const int slots = attention_split_slots(plan.max_pos);
      if (slots > 65535)
        fail_input("attention: position " + std::to_string(plan.max_pos) + " is past what a decode grid holds");
      float* parts = part_mem(plan.steps.size(), a, slots);
      unsigned* counts = count_mem(plan.steps.size(), a.n_heads);
      const AttnDesc* descs = upload(kAttnDecodeDescs, plan.steps.data(), plan.steps.size());
      const int nd = int(plan.steps.size());
      submit_attention(
          signature(kDecode, descs, nd, slots, s, parts, counts), plan.steps, plan.rows, s,
          [=](const AttnStore& st) { launch_attention_split_decode_mma(descs, nd, s, parts, slots, counts, st); });
    }
    return;
  }
  if (!plan.rows.empty()) {
    const AttnDesc* descs = upload(kAttnPrefillDescs, plan.rows.data(), plan.rows.size());
    const int np = int(plan.rows.size()), max_rows = plan.max_rows;
    submit_attention(signature(kPrefill, descs, np, max_rows, s, q16), plan.rows, plan.steps, s,
                     [=](const AttnStore& st) { launch_attention_prefill(descs, np, max_rows, s, st); });
  }
  if (!plan.steps.empty()) {
    const int splits = plan.splits;
    float* parts = part_mem(plan.steps.size(), a, splits);
    unsigned* counts = count_mem(plan.steps.size(), a.n_heads);
    const AttnDesc* descs = upload(kAttnDecodeDescs, plan.steps.data(), plan.steps.size());
    const int nd = int(plan.steps.size());
    submit_attention(signature(kDecode, descs, nd, splits, s, parts, counts), plan.steps, plan.rows, s,
                     [=](const AttnStore& st) { launch_attention_decode(descs, nd, splits, s, parts, counts, st); });
  }
}

}  // namespace kvp::cuda
