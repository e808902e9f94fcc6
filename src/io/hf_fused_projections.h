#pragma once
// Phi-3's (and Phi-4's) fused projections: one self_attn.qkv_proj [(heads + 2 x kv_heads) x
// head_dim, hidden] holding q's rows, then k's, then v's, and one mlp.gate_up_proj [2 x
// intermediate, hidden] holding the gate's rows, then up's (Phi3MLP: `gate, up = gate_up.chunk(2)`,
// the first half activated). Each part is a contiguous run of rows, so it becomes a view under
// the name the weights builder reads, nothing copied; the rounding points are those of the
// separate projections (each output element is one dot product, rounded once).
#include "io/checkpoint.h"

namespace kvp {

// Splits every layer's fused projections of `ck` (config already read). A fused tensor of the
// wrong shape, one beside the separate tensors it stands for, or a bias on it (Phi-3 has none, and
// an unread bias would be another model) is an error naming the tensor.
void split_fused_projections(Checkpoint& ck);

}  // namespace kvp
