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

// One SwiGLU MLP's matrices: [hidden, dim], [hidden, dim], [dim, hidden]; GPT-OSS's experts also
// their biases (fp32 storage, values of the compute dtype; invalid when absent).
struct ExpertWeights {
  TensorView gate, up, down;
  TensorView gate_bias = {}, up_bias = {}, down_bias = {};
};

struct LayerWeights {
  // [dim], fp32 storage, values representable in the compute dtype (GPT-OSS: the file's, kept in
  // fp32); invalid for OLMo-2.
  TensorView attn_norm;
  TensorView wq, wk, wv, wo;        // [q_dim, dim], [kv_dim, dim], [kv_dim, dim], [dim, q_dim]
  TensorView bq, bk, bv;            // Qwen2's and GPT-OSS's biases (fp32 storage), invalid when absent
  TensorView bo;                    // GPT-OSS's o_proj bias [dim], invalid when absent
  TensorView sinks;                 // GPT-OSS's attention sinks [n_heads] (fp32 storage), invalid when absent
  // Qwen3/Gemma-3 per-head gains [head_dim], OLMo-2's whole-row gains [q_dim] / [kv_dim] (fp32
  // storage), invalid when absent.
  TensorView q_norm, k_norm;
  TensorView ffn_norm;              // [dim] (Gemma-2: pre_feedforward_layernorm; invalid for OLMo-2)
  // Gemma-2/3 and OLMo-2 only (invalid otherwise): post_attention_layernorm and post_feedforward_layernorm.
  // Their gains (q_norm/k_norm too) hold g = 1 + w computed in fp32 from w rounded to the compute dtype.
  TensorView post_attn_norm, post_ffn_norm;
  TensorView w_gate, w_up, w_down;  // [hidden, dim], [hidden, dim], [dim, hidden]; invalid in a sparse layer
  // Sparse layers (ModelConfig::moe_layer): the router [n_experts, dim] and the experts (of
  // expert_hidden_dim); Qwen2-MoE's shared expert and its gate [1, dim] (invalid when absent).
  TensorView router;
  TensorView router_bias;           // GPT-OSS's [n_experts], invalid when absent
  std::vector<ExpertWeights> experts;
  ExpertWeights shared;
  TensorView shared_gate;
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
  // Bytes of weight matrices read per decoded token (incl. lm_head); a sparse layer counts its
  // router, n_used of its experts (all are the same size) and the shared expert.
  size_t matrix_bytes() const;
  int moe_used = 0;  // the model's experts per token (ModelConfig::moe.n_used), for matrix_bytes
  // Every matrix: one (pointer, bytes) range each (all experts).
  std::vector<std::pair<const void*, size_t>> matrix_ranges() const;
};

// Checks every tensor's presence and shape against the config (errors name the tensor and file),
// and converts to `dtype` what is neither in it nor quantised.
ModelWeights build_weights(const Checkpoint& ckpt, DType dtype);

// What build_weights(ckpt, dtype) would hold, found by the same checks without converting anything
// (`inspect`: a 7B model's footprint in a moment, and the same errors a load gives).
struct WeightsFootprint {
  size_t in_place_bytes = 0;   // matrices used as the file holds them (memory-mapped)
  size_t converted_bytes = 0;  // matrices converted to the compute dtype (heap)
  size_t vector_bytes = 0;     // norm gains and biases, as fp32 (heap)
  size_t decode_bytes = 0;     // ModelWeights::matrix_bytes(): what a decoded token reads
  // Elements of the tensors the model reads (a tied head counted once, with the embedding).
  int64_t parameters = 0, embedding_parameters = 0, layer_parameters = 0, final_norm_parameters = 0,
          head_parameters = 0;
  std::vector<std::string> used;  // the checkpoint's tensors the model reads, in reading order
};
WeightsFootprint weights_footprint(const Checkpoint& ckpt, DType dtype);

}  // namespace kvp
