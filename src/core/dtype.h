#pragma once
// Storage dtypes and the round-to-nearest-even conversions every rounding point uses (DESIGN.md §3).
// Activations live in fp32 buffers whose values are exactly representable in the compute dtype:
// rounding "to fp16" means fp32 -> fp16 (RNE) -> fp32, which is lossless on the way back.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace kvp {

enum class DType : uint8_t { F32, F16, BF16 };

std::string_view dtype_name(DType t);  // "fp32" | "fp16" | "bf16"
DType parse_dtype(std::string_view s);  // accepts fp32/f32/float32, fp16/f16/float16/half, bf16/bfloat16
inline size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }

inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// IEEE binary16, round-to-nearest-even, overflow -> +-inf, NaN stays NaN (quiet).
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

inline float bf16_to_f32(uint16_t b) { return bits_f32(uint32_t(b) << 16); }
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

inline float round_to(DType t, float f) {
  switch (t) {
    case DType::F32: return f;
    case DType::F16: return f16_to_f32(f32_to_f16(f));
    case DType::BF16: return bf16_to_f32(f32_to_bf16(f));
  }
  return f;
}

// Rounds n values in place to dtype t. Returns the index of the first non-finite value after
// rounding, or -1 when all are finite. This is where fp16 overflow becomes visible.
long round_span(DType t, float* x, size_t n);

// Converts n elements stored as `t` (raw bytes) to fp32.
void to_f32(DType t, const void* src, float* dst, size_t n);
// Converts n fp32 values into storage dtype t (RNE).
void from_f32(DType t, const float* src, void* dst, size_t n);

}  // namespace kvp
