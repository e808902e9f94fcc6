#include "core/kv_type.h"

#include <array>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/quant.h"
#include "core/quantize.h"

namespace kvp {
namespace {

struct Fp8Spec {
  int mant_bits, bias;
  float max;
  bool has_inf;  // E5M2: exponent field all ones holds inf/NaN; E4M3FN: only S.1111.111 is NaN
};

Fp8Spec spec(KvFormat f) {
  return f == KvFormat::FP8_E4M3 ? Fp8Spec{3, 7, 448.0f, false} : Fp8Spec{2, 15, 57344.0f, true};
}

std::array<float, 256> fp8_table(KvFormat f) {
  const Fp8Spec s = spec(f);
  const int exp_bits = 7 - s.mant_bits, exp_max = (1 << exp_bits) - 1, mant_max = (1 << s.mant_bits) - 1;
  std::array<float, 256> t{};
  for (int b = 0; b < 256; ++b) {
    const int e = (b >> s.mant_bits) & exp_max, m = b & mant_max;
    float v;
    if (s.has_inf && e == exp_max)
      v = m == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    else if (!s.has_inf && e == exp_max && m == mant_max)
      v = std::numeric_limits<float>::quiet_NaN();
    else if (e == 0)
      v = std::ldexp(float(m), 1 - s.bias - s.mant_bits);
    else
      v = std::ldexp(float(m + (1 << s.mant_bits)), e - s.bias - s.mant_bits);
    t[size_t(b)] = (b & 0x80) ? -v : v;
  }
  return t;
}

const std::array<float, 256>& table(KvFormat f) {
  static const std::array<float, 256> e4m3 = fp8_table(KvFormat::FP8_E4M3), e5m2 = fp8_table(KvFormat::FP8_E5M2);
  return f == KvFormat::FP8_E4M3 ? e4m3 : e5m2;
}

}  // namespace

uint8_t f32_to_fp8(KvFormat f, float x) {
  const Fp8Spec s = spec(f);
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a == 0.0f) return sign;
  // The quantum of a's binade (or of the subnormals), then one RNE rounding to it; exact scaling.
  int k;
  std::frexp(a, &k);  // a = m * 2^k, m in [0.5, 1): floor(log2 a) = k - 1
  const int e = std::max(k - 1, 1 - s.bias);
  float r = std::isinf(a) ? s.max : std::ldexp(std::nearbyint(std::ldexp(a, s.mant_bits - e)), e - s.mant_bits);
  if (r > s.max) r = s.max;  // saturate
  if (r == 0.0f) return sign;
  std::frexp(r, &k);
  const int re = k - 1;
  int exp_field, mant;
  if (re < 1 - s.bias) {
    exp_field = 0;
    mant = int(std::ldexp(r, s.bias - 1 + s.mant_bits));
  } else {
    exp_field = re + s.bias;
    mant = int(std::ldexp(r, s.mant_bits - re)) - (1 << s.mant_bits);
  }
  return uint8_t(sign | (exp_field << s.mant_bits) | mant);
}

float fp8_to_f32(KvFormat f, uint8_t b) { return table(f)[b]; }

KvType KvType::of(DType t) {
  return KvType(t == DType::F32 ? KvFormat::F32 : t == DType::F16 ? KvFormat::F16 : KvFormat::BF16);
}

DType KvType::dtype() const {
  switch (format) {
    case KvFormat::F16: return DType::F16;
    case KvFormat::BF16: return DType::BF16;
    default: return DType::F32;
  }
}

std::string KvType::name() const {
  switch (format) {
    case KvFormat::F32: case KvFormat::F16: case KvFormat::BF16: return std::string(dtype_name(dtype()));
    case KvFormat::Q8_0: return "q8_0";
    case KvFormat::Q4_0: return "q4_0";
    case KvFormat::FP8_E4M3: return "fp8_e4m3";
    case KvFormat::FP8_E5M2: return "fp8_e5m2";
  }
  return "?";
}

QuantType KvType::block_quant() const {
  return format == KvFormat::Q8_0 ? QuantType::Q8_0 : format == KvFormat::Q4_0 ? QuantType::Q4_0 : QuantType::None;
}

size_t KvType::block_elems() const {
  const QuantType q = block_quant();
  return q == QuantType::None ? 1 : kvp::block_elems(q);
}

size_t KvType::bytes(size_t n) const {
  switch (format) {
    case KvFormat::Q8_0: case KvFormat::Q4_0: return quant_row_bytes(block_quant(), n);
    case KvFormat::FP8_E4M3: case KvFormat::FP8_E5M2: return n;
    default: return n * dtype_size(dtype());
  }
}

std::optional<KvType> parse_kv_type(std::string_view s) {
  KvType k;
  if (s == "q8_0") k.format = KvFormat::Q8_0;
  else if (s == "q4_0") k.format = KvFormat::Q4_0;
  else if (s == "fp8_e4m3") k.format = KvFormat::FP8_E4M3;
  else if (s == "fp8_e5m2") k.format = KvFormat::FP8_E5M2;
  else {
    try {
      return KvType::of(parse_dtype(s));
    } catch (const Error&) {
      return std::nullopt;
    }
  }
  return k;
}

void kv_encode(const KvType& t, const float* x, size_t n, void* dst) {
  auto* o = static_cast<uint8_t*>(dst);
  switch (t.format) {
    case KvFormat::F32: case KvFormat::F16: case KvFormat::BF16: return from_f32(t.dtype(), x, dst, n);
    case KvFormat::FP8_E4M3: case KvFormat::FP8_E5M2:
      for (size_t i = 0; i < n; ++i) o[i] = f32_to_fp8(t.format, x[i] / t.scale);
      return;
    case KvFormat::Q8_0: case KvFormat::Q4_0: {
      const QuantType q = t.block_quant();
      const size_t bb = block_bytes(q);
      for (size_t b = 0; b < n / 32; ++b, x += 32, o += bb) {
        bool finite = true;
        for (int j = 0; j < 32; ++j) finite = finite && std::isfinite(x[j]);
        if (finite) {
          quantize_row(q, x, 32, o);
        } else {
          // A block with NaN/Inf reads back as NaN throughout: its scale is NaN.
          std::fill(o, o + bb, uint8_t(0));
          const uint16_t nan = 0x7E00;
          std::memcpy(o, &nan, 2);
        }
      }
      return;
    }
  }
}

void kv_decode(const KvType& t, const void* src, size_t first, size_t n, float* out) {
  const auto* s = static_cast<const uint8_t*>(src);
  switch (t.format) {
    case KvFormat::F32: case KvFormat::F16: case KvFormat::BF16:
      return to_f32(t.dtype(), s + first * dtype_size(t.dtype()), out, n);
    case KvFormat::FP8_E4M3: case KvFormat::FP8_E5M2: {
      const auto& tab = table(t.format);
      for (size_t i = 0; i < n; ++i) out[i] = tab[s[first + i]] * t.scale;
      return;
    }
    case KvFormat::Q8_0: case KvFormat::Q4_0:
      return dequantize_blocks(t.block_quant(), s + t.bytes(first), n / t.block_elems(), out);
  }
}

}  // namespace kvp
