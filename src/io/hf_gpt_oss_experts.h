#pragma once
// GPT-OSS's experts as transformers holds them (GptOssExperts) and save_pretrained writes them in
// their dequantised form: per layer one gate_up_proj [experts, hidden, 2 x intermediate] whose
// columns interleave the experts' gate (even) and up (odd) outputs, used as `x @ gate_up_proj[e]`;
// gate_up_proj_bias [experts, 2 x intermediate], interleaved alike; down_proj [experts,
// intermediate, hidden] (`h @ down_proj[e]`) and down_proj_bias [experts, hidden], under
// mlp.experts. The matrices are the transposes of the [out, in] rows kvparity's matmuls read, so
// they are copied once into each expert's gate_proj / up_proj / down_proj (+ .bias) in the file's
// dtype; the down biases are views. Writing an HF directory fuses them back (fuse_*).
#include <cstddef>
#include <cstdint>

#include "io/checkpoint.h"

namespace kvp {

// Unpacks every layer's fused experts of a gpt_oss checkpoint `ck` (config read); a layer that
// already has the per-expert tensors is left as it is. A tensor of the wrong shape or dtype, one
// without its partners, a layer holding both forms, or MXFP4 blocks (not supported yet) is an
// error naming the tensor.
void unpack_gpt_oss_experts(Checkpoint& ck);

// One expert's slice of the fused tensors from its own (row-major, `elem` bytes a value):
// gate_up_proj [H][2I] from gate and up [I][H] (gate the even columns); down_proj [I][H] from
// down [H][I]; gate_up_proj_bias [2I] from the gate and up biases [I].
void fuse_gate_up(const uint8_t* gate, const uint8_t* up, size_t I, size_t H, size_t elem, uint8_t* dst);
void fuse_down(const uint8_t* down, size_t H, size_t I, size_t elem, uint8_t* dst);
void fuse_gate_up_bias(const uint8_t* gate_b, const uint8_t* up_b, size_t I, size_t elem, uint8_t* dst);

}  // namespace kvp
