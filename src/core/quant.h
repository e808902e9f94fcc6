#pragma once
// ggml's block-quantised weight formats (the ones GGUF files for Llama-family models use) and their
// dequantisation. A quantised row of K weights is K / block_elems(q) blocks stored back to back;
// each block carries its own scale(s) as fp16 (MXFP4: a power-of-two exponent byte) and packed
// integer codes.
//
// The dequantised value of every weight is defined as ggml's reference dequantisation computes it
// (dequantize_row_* in ggml-quants.c) evaluated with IEEE fp32 and no contraction: a product
// `d * q - m` is a rounded multiply followed by a rounded subtract, never a fused multiply-add.
// Every kernel policy multiplies these exact fp32 values, so a quantised model gives the same bits
// as the same model dequantised to F32 first (docs/quantised-weights.md).
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvp {

enum class QuantType : uint8_t {
  None, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4
};
inline constexpr QuantType kLastQuantType = QuantType::MXFP4;  // the formats are None + 1 .. this

// IQ4_NL and IQ4_XS: a 4-bit code picks one of these 16 levels, not an evenly spaced one.
inline constexpr int8_t kIq4nlLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// MXFP4 (OCP microscaling FP4): code c is an FP4 E2M1 value (bit 3 the sign), stored doubled as
// ggml does so that the levels are integers; code 8 (E2M1's -0) is +0 here, as in ggml's table.
inline constexpr int8_t kMxfp4Levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// The scale of an MXFP4 block with E8M0 exponent byte e, halved to match the doubled levels:
// exactly 2^(e - 128), built from its bits so that no libm is involved. e = 0 and 1 are the fp32
// subnormals 2^-128 and 2^-127 (the build never flushes subnormals to zero); e = 255 is 2^127.
// A level times it is exact in fp32 (the levels have at most 2 significant bits), or overflows to
// infinity for e >= 253 with a large level, as ggml's fp32 product does.
inline float mxfp4_scale(uint8_t e) {
  return std::bit_cast<float>(e >= 2 ? uint32_t(e - 1) << 23 : uint32_t(0x00200000u) << e);
}

std::string_view quant_name(QuantType q);  // "Q8_0", ...; "none" for None
std::vector<std::string_view> quant_names();  // every format's, in QuantType order
// Accepts the names above (case-insensitive); nullopt for anything else.
std::optional<QuantType> parse_quant(std::string_view s);
// ggml's type id of a format (GGML_TYPE_Q8_0 = 8, ...), and back: nullopt for ids that are not
// one of these formats (F32/F16/BF16 included).
uint32_t quant_ggml_type(QuantType q);
std::optional<QuantType> quant_from_ggml_type(uint32_t id);

size_t block_elems(QuantType q);  // 32 for the legacy formats, 256 for the K-quants
size_t block_bytes(QuantType q);
// Bytes of one row of `cols` weights; cols must be a multiple of block_elems(q).
inline size_t quant_row_bytes(QuantType q, size_t cols) { return cols / block_elems(q) * block_bytes(q); }

// Dequantises `n_blocks` consecutive blocks starting at `blocks` into n_blocks * block_elems(q)
// floats at `out`.
void dequantize_blocks(QuantType q, const void* blocks, size_t n_blocks, float* out);

}  // namespace kvp
