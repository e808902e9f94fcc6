#include "core/dtype.h"

#include <cmath>

#include "core/error.h"

namespace kvp {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "fp32";
    case DType::F16: return "fp16";
    case DType::BF16: return "bf16";
  }
  return "?";
}

DType parse_dtype(std::string_view s) {
  if (s == "fp32" || s == "f32" || s == "float32" || s == "F32") return DType::F32;
  if (s == "fp16" || s == "f16" || s == "float16" || s == "half" || s == "F16") return DType::F16;
  if (s == "bf16" || s == "bfloat16" || s == "BF16") return DType::BF16;
  fail_usage("unknown dtype '{}' (expected fp32, fp16 or bf16)", s);
}

uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // NaN, keep payload top bits
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520 -> inf
  if (abs < 0x38800000u) {  // below the smallest fp16 normal (2^-14): subnormal or zero
    if (abs < 0x33000000u) return sign;  // < 2^-25 rounds to zero (exact half-way 2^-25 ties to even 0)
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // value = mant * 2^(exp-150); fp16 subnormal unit = 2^-24
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return uint16_t(sign | q);
  }
  // Normal range: rebias exponent, round mantissa from 23 to 10 bits (carry may bump the exponent).
  uint32_t v = abs - 0x38000000u;  // exponent bias 127 -> 15
  v += 0xfffu + ((v >> 13) & 1u);
  return uint16_t(sign | (v >> 13));
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u));  // NaNs come out quiet, as F16C does
  if (exp == 0) {
    if (mant == 0) return bits_f32(sign);
    return (h & 0x8000u ? -1.0f : 1.0f) * std::ldexp(float(mant), -24);
  }
  return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

long round_span(DType t, float* x, size_t n) {
  long first_bad = -1;
  switch (t) {
    case DType::F32:
      break;
    case DType::F16:
      for (size_t i = 0; i < n; ++i) x[i] = f16_to_f32(f32_to_f16(x[i]));
      break;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) x[i] = bf16_to_f32(f32_to_bf16(x[i]));
      break;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) { first_bad = long(i); break; }
  }
  return first_bad;
}

void to_f32(DType t, const void* src, float* dst, size_t n) {
  switch (t) {
    case DType::F32: std::memcpy(dst, src, n * 4); return;
    case DType::F16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::BF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
  }
}

void from_f32(DType t, const float* src, void* dst, size_t n) {
  switch (t) {
    case DType::F32: std::memcpy(dst, src, n * 4); return;
    case DType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    case DType::BF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
  }
}

}  // namespace kvp
