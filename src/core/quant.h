#pragma once
// ggml's block-quantised weight formats (the ones GGUF files for Llama-family models use) and their
// dequantisation. A quantised row of K weights is K / block_elems(q) blocks stored back to back;
// each block carries its own scale(s) as fp16 and packed integer codes.
//
// The dequantised value of every weight is defined as ggml's reference dequantisation computes it
// (dequantize_row_* in ggml-quants.c) evaluated with IEEE fp32 and no contraction: a product
// `d * q - m` is a rounded multiply followed by a rounded subtract, never a fused multiply-add.
// Every kernel policy multiplies these exact fp32 values, so a quantised model gives the same bits
// as the same model dequantised to F32 first (docs/quantised-weights.md).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvp {

enum class QuantType : uint8_t { None, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS };
inline constexpr QuantType kLastQuantType = QuantType::IQ4_XS;  // the formats are None + 1 .. this

// IQ4_NL and IQ4_XS: a 4-bit code picks one of these 16 levels, not an evenly spaced one.
inline constexpr int8_t kIq4nlLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

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

// K-quant 6-bit scale/min pair j of 8 packed in 12 bytes (Q4_K, Q5_K): j < 4 keeps them in the
// low 6 bits of bytes j and j+4; j >= 4 splits them: low nibbles in byte j+4, top 2 bits in the
// top bits of bytes j-4 (scale) and j (min). Shared by the scalar and vectorised decoders.
inline void k4_scale_min(int j, const uint8_t* q, int* sc, int* mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// IQ4_XS sub-block i's scale code s (0..63; the scale is d * (s - 32)) in an IQ4_XS block: its low
// 4 bits are nibble i % 2 of scales_l[i / 2] (bytes 4..7), its high 2 bits bits 2i, 2i+1 of the
// 16-bit scales_h (bytes 2..3). Shared by the scalar and vectorised decoders.
inline int iq4_xs_scale(const uint8_t* block, int i) {
  const unsigned scales_h = unsigned(block[2]) | (unsigned(block[3]) << 8);
  return ((block[4 + i / 2] >> (4 * (i % 2))) & 0x0F) | int(((scales_h >> (2 * i)) & 3) << 4);
}

}  // namespace kvp
