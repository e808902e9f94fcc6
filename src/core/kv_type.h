#pragma once
// What the KV cache stores. Besides the float dtypes, the quantised caches users deploy:
//  q8_0, q4_0  llama.cpp's cache types: blocks of 32 along head_dim, an fp16 scale each (the
//              ggml Q8_0/Q4_0 layouts of core/quant.h, written by core/quantize.h's quantiser)
//  fp8_e4m3    OCP FP8 E4M3 ("FN": bias 7, no infinities, max 448, NaN S.1111.111)
//  fp8_e5m2    OCP FP8 E5M2 (bias 15, max finite 57344)
// FP8 is stored as fp8(x / scale) with round-to-nearest-even and saturation to the largest finite
// value (infinities included), NaN kept; read back as fp8 * scale (scale 1.0 by default, as vLLM's).
// K/V are encoded when written and decoded to fp32 when attention reads them.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/quant.h"

namespace kvp {

enum class KvFormat : uint8_t { F32, F16, BF16, Q8_0, Q4_0, FP8_E4M3, FP8_E5M2 };

struct KvType {
  KvFormat format = KvFormat::F32;
  float scale = 1.0f;  // FP8 formats only

  KvType() = default;
  KvType(DType t) : format(of(t).format) {}  // NOLINT: a float dtype is a KV type
  KvType(KvFormat f, float s = 1.0f) : format(f), scale(s) {}
  static KvType of(DType t);
  bool is_dtype() const { return format == KvFormat::F32 || format == KvFormat::F16 || format == KvFormat::BF16; }
  DType dtype() const;              // the float dtype (is_dtype() only)
  std::string name() const;         // "fp16", "q8_0", "fp8_e4m3", ... (scale not included)
  QuantType block_quant() const;    // the ggml block layout of q8_0/q4_0; QuantType::None otherwise
  size_t block_elems() const;       // 32 for q8_0/q4_0, else 1
  size_t bytes(size_t n) const;     // storage of n elements (a multiple of block_elems())
  bool operator==(const KvType&) const = default;
};

// "fp32"/"fp16"/"bf16" (and parse_dtype's spellings), "q8_0", "q4_0", "fp8_e4m3", "fp8_e5m2".
std::optional<KvType> parse_kv_type(std::string_view s);

// Encodes n floats (a multiple of t.block_elems()) at dst.
void kv_encode(const KvType& t, const float* x, size_t n, void* dst);
// Decodes elements [first, first + n) of an encoded array (first and n multiples of
// t.block_elems()) into fp32.
void kv_decode(const KvType& t, const void* src, size_t first, size_t n, float* out);

// FP8 conversions (scale 1): round to nearest even, saturating, NaN -> NaN.
uint8_t f32_to_fp8(KvFormat f, float x);
float fp8_to_f32(KvFormat f, uint8_t b);

}  // namespace kvp
