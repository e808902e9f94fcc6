#pragma once
// A mixture's experts as transformers v5 holds them in memory, and writes them with
// save_pretrained(save_original_format=False): one [experts, 2 x intermediate, hidden] gate_up_proj
// (each expert's gate rows, then its up rows: `gate, up = linear(x, gate_up_proj[e]).chunk(2)`) and
// one [experts, hidden, intermediate] down_proj per layer, under mlp.experts (Mixtral's block too:
// v5 renames block_sparse_moe to mlp). Each expert's matrices are contiguous slices of those, so
// they become views under the per-expert names the weights builder reads, nothing copied.
#include "io/checkpoint.h"

namespace kvp {

// Splits every sparse layer's fused experts of `ck` (a MoE config already read) into per-expert
// views; a layer with the per-expert tensors is left as it is. A fused tensor of the wrong shape,
// one without its partner, or a layer holding both forms is an error naming the tensor.
void split_fused_experts(Checkpoint& ck);

}  // namespace kvp
