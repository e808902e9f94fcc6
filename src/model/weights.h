#pragma once
// The model's tensors in the run's compute dtype, q/k rows in the file's RoPE layout.
// Matrices already in that dtype, or quantised, point into the file mapping; the rest are
// converted once.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "io/checkpoint.h"
#include "model/config.h"

namespace kvp {

struct LayerWeights {
  TensorView attn_norm;             // [dim], fp32 storage, values representable in the compute dtype
  TensorView wq, wk, wv, wo;        // [q_dim, dim], [kv_dim, dim], [kv_dim, dim], [dim, q_dim]
  TensorView bq, bk, bv;            // Qwen2 biases (fp32 storage), invalid when absent
  TensorView ffn_norm;              // [dim] (Gemma-2: pre_feedforward_layernorm)
  // Gemma-2 only (invalid otherwise): post_attention_layernorm and post_feedforward_layernorm.
  // Gemma-2's four gains hold g = 1 + w computed in fp32 from w rounded to the compute dtype.
  TensorView post_attn_norm, post_ffn_norm;
  TensorView w_gate, w_up, w_down;  // [hidden, dim], [hidden, dim], [dim, hidden]
};

struct ModelWeights {
  // Compute dtype: every matrix holds values of it, stored in it, quantised, or (fp32 runs) as the
  // file's fp16/bf16 bytes, which widen to fp32 exactly.
  DType dtype = DType::F32;
  // Row order of wq/wk (and bq/bk) within each head, as in the file: RoPE reads the pairs where
  // they are, so no matrix is copied to reorder them.
  RopeLayout qk_layout = RopeLayout::Halves;
  TensorView embed;          // [vocab, dim]
  TensorView final_norm;     // [dim]
  TensorView lm_head;        // [vocab, dim] (the embedding when tied)
  std::vector<LayerWeights> layers;
  std::vector<std::shared_ptr<const void>> keepalive;
  std::vector<std::shared_ptr<AlignedBuffer>> owned;
  size_t matrix_bytes() const;  // bytes of weight matrices read per decoded token (incl. lm_head)
  // Where those bytes live: one (pointer, bytes) range per matrix.
  std::vector<std::pair<const void*, size_t>> matrix_ranges() const;
};

// Checks every tensor's presence and shape against the config (errors name the tensor and file),
// and converts to `dtype` what is neither in it nor quantised.
ModelWeights build_weights(const Checkpoint& ckpt, DType dtype);

}  // namespace kvp
