#pragma once
// The model's tensors in the run's compute dtype and kvparity's internal RoPE layout (Halves).
// Tensors already in that dtype and layout point into the file mapping; the rest are converted once.
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
  DType dtype = DType::F32;  // compute dtype of the matrices
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
// converts to `dtype`, and reorders q/k rows to the internal RoPE layout.
ModelWeights build_weights(const Checkpoint& ckpt, DType dtype);

// Row permutations between RoPE layouts for a [n_heads*head_dim, in] matrix (or bias when in == 1).
// Exact: they only move rows.
void interleaved_to_halves(const void* src, void* dst, DType t, int n_heads, int head_dim, int64_t in);
void halves_to_interleaved(const void* src, void* dst, DType t, int n_heads, int head_dim, int64_t in);
// The same moves for rows of any byte size (quantised rows carry their blocks).
void permute_qk_rows(const void* src, void* dst, size_t row_bytes, int n_heads, int head_dim, bool to_halves);

}  // namespace kvp
