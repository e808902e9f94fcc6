#include "core/quant.h"

#include <cctype>
#include <cstring>

#include "core/dtype.h"

// Block layouts (ggml-common.h), all fields little-endian, fp16 scales as IEEE binary16:
//  Q8_0  34 B: d; int8 q[32]                                  w = q * d
//  Q4_0  18 B: d; u8 qs[16] (low nibbles: w 0-15, high: 16-31) w = (nib - 8) * d
//  Q4_1  20 B: d, m; u8 qs[16]                                w = nib * d + m
//  Q5_0  22 B: d; u32 qh (bit j: 5th bit of w j); u8 qs[16]    w = (nib | hi << 4) - 16) * d
//  Q5_1  24 B: d, m; u32 qh; u8 qs[16]                        w = (nib | hi << 4) * d + m
//  Q2_K  84 B: u8 scales[16] (low 4: scale, high 4: min); u8 qs[64] (2-bit); d; dmin
//  Q3_K 110 B: u8 hmask[32]; u8 qs[64]; u8 scales[12] (16 x 6-bit); d
//  Q4_K 144 B: d; dmin; u8 scales[12] (8 x 6-bit scale + 8 x 6-bit min); u8 qs[128]
//  Q5_K 176 B: d; dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]
//  Q6_K 210 B: u8 ql[128]; u8 qh[64]; int8 scales[16]; d
//  IQ4_NL 18 B: d; u8 qs[16] (as Q4_0)                      w = d * kIq4nlLevels[nib]
//  IQ4_XS 136 B: d; u16 scales_h; u8 scales_l[4]; u8 qs[128] (8 sub-blocks of 32, 6-bit scales)
//  MXFP4 17 B: u8 e (E8M0); u8 qs[16] (as Q4_0)              w = kMxfp4Levels[nib] * 2^(e - 128)
// The element order inside the K-quant blocks is spelled out in each decoder below.

namespace kvp {
namespace {

struct Info {
  const char* name;
  uint32_t ggml;
  size_t elems, bytes;
};

constexpr Info kInfo[] = {
    {"none", 0, 1, 4},        {"Q8_0", 8, 32, 34},    {"Q4_0", 2, 32, 18},    {"Q4_1", 3, 32, 20},
    {"Q5_0", 6, 32, 22},      {"Q5_1", 7, 32, 24},    {"Q2_K", 10, 256, 84},  {"Q3_K", 11, 256, 110},
    {"Q4_K", 12, 256, 144},   {"Q5_K", 13, 256, 176}, {"Q6_K", 14, 256, 210}, {"IQ4_NL", 20, 32, 18},
    {"IQ4_XS", 23, 256, 136}, {"MXFP4", 39, 32, 17},
};
static_assert(sizeof(kInfo) / sizeof(kInfo[0]) == size_t(kLastQuantType) + 1, "one row per QuantType");
constexpr size_t kCount = sizeof(kInfo) / sizeof(kInfo[0]);

const Info& info(QuantType q) { return kInfo[size_t(q) < kCount ? size_t(q) : 0]; }

// K-quant 6-bit scale/min pair j of 8 packed in 12 bytes (Q4_K, Q5_K): j < 4 keeps them in the
// low 6 bits of bytes j and j+4; j >= 4 splits them: low nibbles in byte j+4, top 2 bits in the
// top bits of bytes j-4 (scale) and j (min). The vectorised decoders (kernels/quant_blocks-inl.h) unpack the same
// fields several at a time.
void k4_scale_min(int j, const uint8_t* q, int* sc, int* mn) {
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
// 16-bit scales_h (bytes 2..3). The vectorised decoders (kernels/quant_blocks-inl.h) unpack the same fields several at
// a time.
int iq4_xs_scale(const uint8_t* block, int i) {
  const unsigned scales_h = unsigned(block[2]) | (unsigned(block[3]) << 8);
  return ((block[4 + i / 2] >> (4 * (i % 2))) & 0x0F) | int(((scales_h >> (2 * i)) & 3) << 4);
}

// Q3_K sub-block i's signed scale (-32..31) from the block's 12 packed scale bytes at sp (block
// bytes 96..107): stored + 32 in 6 bits, the low 4 in byte i % 8 (low nibble for i < 8, high for
// i >= 8), the high 2 in byte 8 + i % 4 at bit 2 * (i / 4).
int q3_k_scale(const uint8_t* sp, int i) {
  const int lo = i < 8 ? (sp[i] & 0x0F) : (sp[i - 8] >> 4);
  const int hi = (sp[8 + i % 4] >> (2 * (i / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

void q8_0(const uint8_t* b, float* y) {
  const float d = half(b);
  for (int j = 0; j < 32; ++j) y[j] = float(int8_t(b[2 + j])) * d;
}

void q4_0(const uint8_t* b, float* y) {
  const float d = half(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = float((qs[j] & 0x0F) - 8) * d;
    y[j + 16] = float((qs[j] >> 4) - 8) * d;
  }
}

void q4_1(const uint8_t* b, float* y) {
  const float d = half(b), m = half(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = float(qs[j] & 0x0F) * d + m;
    y[j + 16] = float(qs[j] >> 4) * d + m;
  }
}

uint32_t u32_at(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void q5_0(const uint8_t* b, float* y) {
  const float d = half(b);
  const uint32_t qh = u32_at(b + 2);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int hi0 = int((qh >> j) & 1u) << 4, hi1 = int((qh >> (j + 16)) & 1u) << 4;
    y[j] = float(((qs[j] & 0x0F) | hi0) - 16) * d;
    y[j + 16] = float(((qs[j] >> 4) | hi1) - 16) * d;
  }
}

void q5_1(const uint8_t* b, float* y) {
  const float d = half(b), m = half(b + 2);
  const uint32_t qh = u32_at(b + 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    const int hi0 = int((qh >> j) & 1u) << 4, hi1 = int((qh >> (j + 16)) & 1u) << 4;
    y[j] = float((qs[j] & 0x0F) | hi0) * d + m;
    y[j + 16] = float((qs[j] >> 4) | hi1) * d + m;
  }
}

// Q2_K: 16 sub-blocks of 16 weights. Codes of weights [128h + 32s + 16t + l] (h < 2, s < 4,
// t < 2, l < 16) are bits 2s..2s+1 of qs[32h + 16t + l]; sub-block 8h + 2s + t has scale
// scales[..] & 15 and min scales[..] >> 4, both multiplied by the super-block's d / dmin.
void q2_k(const uint8_t* b, float* y) {
  const uint8_t* sc = b;
  const uint8_t* qs = b + 16;
  const float d = half(b + 80), dmin = half(b + 82);
  int is = 0;
  for (int h = 0; h < 2; ++h, qs += 32) {
    for (int s = 0; s < 4; ++s) {
      for (int t = 0; t < 2; ++t, ++is) {
        const float dl = d * float(sc[is] & 0x0F), ml = dmin * float(sc[is] >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * float((qs[16 * t + l] >> (2 * s)) & 3) - ml;
      }
    }
  }
}

// Q3_K: like Q2_K's order, with a third bit from hmask (bit set: +0, clear: -4) and signed 6-bit
// scales packed into 12 bytes (q3_k_scale). Weight [128h + 32s + 16t + l]'s third bit is bit
// 4h + s of hmask[16t + l].
void q3_k(const uint8_t* b, float* y) {
  const uint8_t* hm = b;
  const uint8_t* qs = b + 32;
  const uint8_t* sp = b + 96;
  const float d = half(b + 108);
  int scales[16];
  for (int i = 0; i < 16; ++i) scales[i] = q3_k_scale(sp, i);
  int is = 0;
  uint8_t mask = 1;
  for (int h = 0; h < 2; ++h, qs += 32) {
    for (int s = 0; s < 4; ++s, mask = uint8_t(mask << 1)) {
      for (int t = 0; t < 2; ++t, ++is) {
        const float dl = d * float(scales[is]);
        for (int l = 0; l < 16; ++l) {
          const int q = int((qs[16 * t + l] >> (2 * s)) & 3) - ((hm[16 * t + l] & mask) ? 0 : 4);
          *y++ = dl * float(q);
        }
      }
    }
  }
}

// Q4_K (qh null): 8 sub-blocks of 32; weights [64h + l] and [64h + 32 + l] are the low and high
// nibbles of qs[32h + l], in sub-blocks 2h and 2h+1. Q5_K adds a fifth bit: for weight [64h + l]
// bit 2h of qh[l], for [64h + 32 + l] bit 2h+1.
void q45_k(const uint8_t* b, const uint8_t* qh, const uint8_t* qs, float* y) {
  const float d = half(b), dmin = half(b + 2);
  const uint8_t* sp = b + 4;
  for (int h = 0; h < 4; ++h, qs += 32) {
    int sc, mn;
    k4_scale_min(2 * h, sp, &sc, &mn);
    const float d1 = d * float(sc), m1 = dmin * float(mn);
    k4_scale_min(2 * h + 1, sp, &sc, &mn);
    const float d2 = d * float(sc), m2 = dmin * float(mn);
    const uint8_t u1 = uint8_t(1u << (2 * h)), u2 = uint8_t(2u << (2 * h));
    for (int l = 0; l < 32; ++l) *y++ = d1 * float((qs[l] & 0x0F) + (qh != nullptr && (qh[l] & u1) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * float((qs[l] >> 4) + (qh != nullptr && (qh[l] & u2) ? 16 : 0)) - m2;
  }
}
void q4_k(const uint8_t* b, float* y) { q45_k(b, nullptr, b + 16, y); }
void q5_k(const uint8_t* b, float* y) { q45_k(b, b + 16, b + 48, y); }

// Q6_K: two halves of 128; in half h, weight [128h + 32r + l] (r < 4, l < 32) takes its low
// nibble from ql[64h + l + 32 (r & 1)] (low nibble for r < 2, high for r >= 2) and its top two
// bits from qh[32h + l] at bit 2r; it is signed (- 32) with scale scales[8h + l/16 + 2r] * d,
// evaluated as (d * scale) * q.
void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half(b + 208);
  for (int h = 0; h < 2; ++h, ql += 64, qh += 32, sc += 8, y += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = int((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = int((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * float(sc[is]) * float(q1);
      y[l + 32] = d * float(sc[is + 2]) * float(q2);
      y[l + 64] = d * float(sc[is + 4]) * float(q3);
      y[l + 96] = d * float(sc[is + 6]) * float(q4);
    }
  }
}

// IQ4_NL: Q4_0's nibble order (low nibbles weights 0-15, high 16-31), each code a level of the
// table. d times a level (at most 7 bits) is exact in fp32.
void iq4_nl(const uint8_t* b, float* y) {
  const float d = half(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(kIq4nlLevels[qs[j] & 0x0F]);
    y[j + 16] = d * float(kIq4nlLevels[qs[j] >> 4]);
  }
}

// IQ4_XS: 8 sub-blocks of 32 in IQ4_NL's order, sub-block i with scale d * (s - 32), s a 6-bit code
// (iq4_xs_scale).
// d * (s - 32) is exact (11 + 6 bits), and so is its product with a level (+ 7 bits: 24).
void iq4_xs(const uint8_t* b, float* y) {
  const float d = half(b);
  const uint8_t* qs = b + 8;
  for (int i = 0; i < 8; ++i, qs += 16, y += 32) {
    const float dl = d * float(iq4_xs_scale(b, i) - 32);
    for (int j = 0; j < 16; ++j) {
      y[j] = dl * float(kIq4nlLevels[qs[j] & 0x0F]);
      y[j + 16] = dl * float(kIq4nlLevels[qs[j] >> 4]);
    }
  }
}

// MXFP4: Q4_0's nibble order, each code an FP4 level (doubled) times the block's power of two
// (core/quant.h's mxfp4_scale, which says why the product is exact).
void mxfp4(const uint8_t* b, float* y) {
  const float d = mxfp4_scale(b[0]);
  const uint8_t* qs = b + 1;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(kMxfp4Levels[qs[j] & 0x0F]);
    y[j + 16] = d * float(kMxfp4Levels[qs[j] >> 4]);
  }
}

}  // namespace

std::string_view quant_name(QuantType q) { return info(q).name; }

std::vector<std::string_view> quant_names() {
  std::vector<std::string_view> v;
  for (size_t i = 1; i < kCount; ++i) v.emplace_back(kInfo[i].name);
  return v;
}

std::optional<QuantType> parse_quant(std::string_view s) {
  for (size_t i = 1; i < kCount; ++i) {
    const std::string_view n = kInfo[i].name;
    if (n.size() != s.size()) continue;
    bool eq = true;
    for (size_t c = 0; c < n.size() && eq; ++c) eq = std::toupper(static_cast<unsigned char>(s[c])) == n[c];
    if (eq) return QuantType(i);
  }
  return std::nullopt;
}

uint32_t quant_ggml_type(QuantType q) { return info(q).ggml; }

std::optional<QuantType> quant_from_ggml_type(uint32_t id) {
  for (size_t i = 1; i < kCount; ++i)
    if (kInfo[i].ggml == id) return QuantType(i);
  return std::nullopt;
}

size_t block_elems(QuantType q) { return info(q).elems; }
size_t block_bytes(QuantType q) { return info(q).bytes; }

void dequantize_blocks(QuantType q, const void* blocks, size_t n_blocks, float* out) {
  const auto* b = static_cast<const uint8_t*>(blocks);
  const size_t bb = block_bytes(q), be = block_elems(q);
  void (*f)(const uint8_t*, float*) = nullptr;
  switch (q) {
    case QuantType::None: return;
    case QuantType::Q8_0: f = q8_0; break;
    case QuantType::Q4_0: f = q4_0; break;
    case QuantType::Q4_1: f = q4_1; break;
    case QuantType::Q5_0: f = q5_0; break;
    case QuantType::Q5_1: f = q5_1; break;
    case QuantType::Q2_K: f = q2_k; break;
    case QuantType::Q3_K: f = q3_k; break;
    case QuantType::Q4_K: f = q4_k; break;
    case QuantType::Q5_K: f = q5_k; break;
    case QuantType::Q6_K: f = q6_k; break;
    case QuantType::IQ4_NL:
      f = iq4_nl;
      break;
    case QuantType::IQ4_XS:
      f = iq4_xs;
      break;
    case QuantType::MXFP4:
      f = mxfp4;
      break;
  }
  for (size_t i = 0; i < n_blocks; ++i) f(b + i * bb, out + i * be);
}

}  // namespace kvp
