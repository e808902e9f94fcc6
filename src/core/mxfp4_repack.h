#pragma once
// Hugging Face's MXFP4 checkpoints (GPT-OSS) store a matrix [rows, k] as two uint8 tensors:
// `*_blocks` [rows, k / 32, 16], a 32-weight group's FP4 (E2M1) codes two to a byte, weight 2b in
// the low nibble of byte b and weight 2b + 1 in the high one, and `*_scales` [rows, k / 32], the
// group's E8M0 exponent s (scale 2^(s - 127)). The codes index the FP4 levels {+0, +0.5, +1, +1.5,
// +2, +3, +4, +6, -0, -0.5, ..., -6}, ggml's kMxfp4Levels halved, and ggml's scale is the halved
// 2^(e - 128): weight (code, s) of the HF layout is ggml MXFP4's (same code, e = s), so repacking
// moves nibbles and copies exponents, and changes no value (but -0, code 8, which ggml reads as
// +0: a zero weight's sign reaches no sum that has a nonzero term).
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kvp {

// Writes rows * k / 32 ggml MXFP4 blocks (core/quant.h, 17 bytes each: exponent, then Q4_0's nibble
// order) at out_ggml, row-major like the source. `blocks` holds rows * k / 2 bytes, `scales`
// rows * k / 32. k must be a multiple of 32 (kvp::Error otherwise, naming `tensor` when given).
void repack_hf_mxfp4(const uint8_t* blocks, const uint8_t* scales, size_t rows, size_t k, uint8_t* out_ggml,
                     std::string_view tensor = {});

// The inverse, for writing the HF layout: rows * k / 32 ggml MXFP4 blocks at `ggml` into `blocks`
// (rows * k / 2 bytes) and `scales` (rows * k / 32); either may be null when only the other is
// wanted. Codes and exponents are copied, so repack_hf_mxfp4 of the result gives `ggml` back.
void repack_ggml_mxfp4_to_hf(const uint8_t* ggml, size_t rows, size_t k, uint8_t* blocks, uint8_t* scales,
                             std::string_view tensor = {});

}  // namespace kvp
