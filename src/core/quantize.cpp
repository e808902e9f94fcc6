#include "core/quantize.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace kvp {
namespace {

void put_half(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}
float stored_half(float v) { return f16_to_f32(f32_to_f16(v)); }

int clamp_round(float v, int lo, int hi) {
  const float r = std::nearbyint(v);
  return int(std::clamp(r, float(lo), float(hi)));
}

// The value of largest magnitude (keeping its sign), so a symmetric grid can put it on its
// extreme negative code, as ggml's legacy formats do.
float signed_absmax(const float* x, size_t n) {
  float m = 0.0f;
  for (size_t i = 0; i < n; ++i)
    if (std::fabs(x[i]) > std::fabs(m)) m = x[i];
  return m;
}

// Symmetric legacy block (Q4_0, Q5_0): codes c in [0, 2^bits), w = (c - 2^(bits-1)) * d.
void symmetric_block(const float* x, int bits, uint8_t* d_at, int* codes) {
  const int half_range = 1 << (bits - 1);
  const float d = stored_half(signed_absmax(x, 32) / float(-half_range));
  put_half(d_at, d);
  for (int j = 0; j < 32; ++j)
    codes[j] = d == 0.0f ? half_range : clamp_round(x[j] / d, -half_range, half_range - 1) + half_range;
}

// Affine legacy block (Q4_1, Q5_1): w = c * d + m with m the block minimum.
void affine_block(const float* x, int bits, uint8_t* d_at, uint8_t* m_at, int* codes) {
  const int top = (1 << bits) - 1;
  float lo = x[0], hi = x[0];
  for (int j = 1; j < 32; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
  const float d = stored_half((hi - lo) / float(top)), m = stored_half(lo);
  put_half(d_at, d);
  put_half(m_at, m);
  for (int j = 0; j < 32; ++j) codes[j] = d == 0.0f ? 0 : clamp_round((x[j] - m) / d, 0, top);
}

void pack_nibbles(const int* codes, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t((codes[j] & 0x0F) | ((codes[j + 16] & 0x0F) << 4));
}

uint32_t high_bits(const int* codes) {
  uint32_t qh = 0;
  for (int j = 0; j < 32; ++j) qh |= uint32_t((codes[j] >> 4) & 1) << j;
  return qh;
}

// K-quant affine sub-blocks (Q2_K, Q4_K, Q5_K): w = dl * c - ml with dl = d * sc, ml = dmin * mc,
// sc and mc unsigned codes of `scale_bits`. Sub-block scales round up so no code clamps.
struct Affine {
  int sc[16], mc[16];
  float d, dmin;
};
Affine affine_scales(const float* x, int n_sub, int sub, int top, int scale_bits) {
  const int smax = (1 << scale_bits) - 1;
  float scale[16], minv[16], max_scale = 0.0f, max_min = 0.0f;
  for (int s = 0; s < n_sub; ++s) {
    float lo = 0.0f, hi = x[s * sub];
    for (int l = 0; l < sub; ++l) lo = std::min(lo, x[s * sub + l]), hi = std::max(hi, x[s * sub + l]);
    scale[s] = (hi - lo) / float(top);
    minv[s] = -lo;
    max_scale = std::max(max_scale, scale[s]);
    max_min = std::max(max_min, minv[s]);
  }
  Affine a;
  a.d = stored_half(max_scale / float(smax));
  a.dmin = stored_half(max_min / float(smax));
  for (int s = 0; s < n_sub; ++s) {
    a.sc[s] = a.d == 0.0f ? 0 : std::min(smax, int(std::ceil(scale[s] / a.d)));
    a.mc[s] = a.dmin == 0.0f ? 0 : std::min(smax, int(std::ceil(minv[s] / a.dmin)));
  }
  return a;
}
int affine_code(float x, float dl, float ml, int top) { return dl == 0.0f ? 0 : clamp_round((x + ml) / dl, 0, top); }

void pack_scale_min_k4(const int* sc, const int* mc, uint8_t* q) {
  std::memset(q, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      q[j] |= uint8_t(sc[j] & 63);
      q[j + 4] |= uint8_t(mc[j] & 63);
    } else {
      q[j + 4] = uint8_t((sc[j] & 0x0F) | ((mc[j] & 0x0F) << 4));
      q[j - 4] |= uint8_t((sc[j] >> 4) << 6);
      q[j] |= uint8_t((mc[j] >> 4) << 6);
    }
  }
}

void q2_k(const float* x, uint8_t* b) {
  const Affine a = affine_scales(x, 16, 16, 3, 4);
  for (int s = 0; s < 16; ++s) b[s] = uint8_t(a.sc[s] | (a.mc[s] << 4));
  put_half(b + 80, a.d);
  put_half(b + 82, a.dmin);
  uint8_t* qs = b + 16;
  std::memset(qs, 0, 64);
  // Weight 128h + 32s + 16t + l lives in qs[32h + 16t + l] at bits 2s (see core/quant.cpp).
  for (int h = 0; h < 2; ++h)
    for (int s = 0; s < 4; ++s)
      for (int t = 0; t < 2; ++t) {
        const int sub = 8 * h + 2 * s + t;
        const float dl = a.d * float(a.sc[sub]), ml = a.dmin * float(a.mc[sub]);
        for (int l = 0; l < 16; ++l) {
          const int c = affine_code(x[128 * h + 32 * s + 16 * t + l], dl, ml, 3);
          qs[32 * h + 16 * t + l] |= uint8_t(c << (2 * s));
        }
      }
}

// K-quant symmetric sub-blocks (Q3_K, Q6_K): 16 sub-blocks of 16 whose scales put each
// sub-block's largest magnitude on code -half_range; the scales are themselves signed codes in
// [-code_max - 1, code_max] of d = largest |scale| / d_div.
struct Symmetric {
  int sc[16];
  float d;
};
Symmetric symmetric_scales(const float* x, int half_range, float d_div, int code_max) {
  float scale[16], max_abs = 0.0f;
  for (int s = 0; s < 16; ++s) {
    scale[s] = signed_absmax(x + 16 * s, 16) / float(-half_range);
    max_abs = std::max(max_abs, std::fabs(scale[s]));
  }
  Symmetric r;
  r.d = stored_half(max_abs / d_div);
  for (int s = 0; s < 16; ++s) r.sc[s] = r.d == 0.0f ? 0 : clamp_round(scale[s] / r.d, -code_max - 1, code_max);
  return r;
}

void q3_k(const float* x, uint8_t* b) {
  const Symmetric sym = symmetric_scales(x, 4, 32.0f, 31);
  const float d = sym.d;
  const int* sc = sym.sc;
  uint8_t* hm = b;
  uint8_t* qs = b + 32;
  uint8_t* sp = b + 96;
  std::memset(b, 0, 110);
  for (int i = 0; i < 16; ++i) {
    const int u = sc[i] + 32;
    if (i < 8)
      sp[i] |= uint8_t(u & 0x0F);
    else
      sp[i - 8] |= uint8_t((u & 0x0F) << 4);
    sp[8 + i % 4] |= uint8_t(((u >> 4) & 3) << (2 * (i / 4)));
  }
  put_half(b + 108, d);
  for (int h = 0; h < 2; ++h)
    for (int s = 0; s < 4; ++s)
      for (int t = 0; t < 2; ++t) {
        const int sub = 8 * h + 2 * s + t;
        const float dl = d * float(sc[sub]);
        for (int l = 0; l < 16; ++l) {
          const int v = dl == 0.0f ? 0 : clamp_round(x[128 * h + 32 * s + 16 * t + l] / dl, -4, 3);
          // Stored as two low bits plus a high bit that, when clear, subtracts 4.
          const int low = v >= 0 ? v : v + 4;
          qs[32 * h + 16 * t + l] |= uint8_t(low << (2 * s));
          if (v >= 0) hm[16 * t + l] |= uint8_t(1u << (4 * h + s));
        }
      }
}

void q45_k(const float* x, uint8_t* b, int bits) {
  const int top = (1 << bits) - 1;
  const Affine a = affine_scales(x, 8, 32, top, 6);
  put_half(b, a.d);
  put_half(b + 2, a.dmin);
  pack_scale_min_k4(a.sc, a.mc, b + 4);
  uint8_t* qh = bits == 5 ? b + 16 : nullptr;
  uint8_t* qs = b + (bits == 5 ? 48 : 16);
  if (qh != nullptr) std::memset(qh, 0, 32);
  for (int h = 0; h < 4; ++h) {
    const float d1 = a.d * float(a.sc[2 * h]), m1 = a.dmin * float(a.mc[2 * h]);
    const float d2 = a.d * float(a.sc[2 * h + 1]), m2 = a.dmin * float(a.mc[2 * h + 1]);
    for (int l = 0; l < 32; ++l) {
      const int c1 = affine_code(x[64 * h + l], d1, m1, top), c2 = affine_code(x[64 * h + 32 + l], d2, m2, top);
      qs[32 * h + l] = uint8_t((c1 & 0x0F) | ((c2 & 0x0F) << 4));
      if (qh != nullptr) qh[l] |= uint8_t(((c1 >> 4) & 1) << (2 * h) | ((c2 >> 4) & 1) << (2 * h + 1));
    }
  }
}

void q6_k(const float* x, uint8_t* b) {
  const Symmetric sym = symmetric_scales(x, 32, 127.0f, 127);
  const float d = sym.d;
  std::memset(b, 0, 210);
  uint8_t* ql = b;
  uint8_t* qh = b + 128;
  auto* sc = reinterpret_cast<int8_t*>(b + 192);
  for (int s = 0; s < 16; ++s) sc[s] = int8_t(sym.sc[s]);
  put_half(b + 208, d);
  // Weight 128h + 32r + l: nibble in ql[64h + l + 32(r&1)] (low for r < 2), top bits in
  // qh[32h + l] at bit 2r, sub-block 8h + l/16 + 2r (see core/quant.cpp).
  for (int h = 0; h < 2; ++h)
    for (int r = 0; r < 4; ++r)
      for (int l = 0; l < 32; ++l) {
        const float dl = d * float(sc[8 * h + l / 16 + 2 * r]);
        const int c = (dl == 0.0f ? 0 : clamp_round(x[128 * h + 32 * r + l] / dl, -32, 31)) + 32;
        uint8_t& q = ql[64 * h + l + 32 * (r & 1)];
        q |= uint8_t(r < 2 ? (c & 0x0F) : (c & 0x0F) << 4);
        qh[32 * h + l] |= uint8_t(((c >> 4) & 3) << (2 * r));
      }
}

// The IQ4 level nearest v (v in the levels' units): a binary search over the midpoints.
int nearest_level(float v) {
  static const auto mid = [] {
    std::array<float, 15> m{};
    for (int k = 0; k < 15; ++k) m[size_t(k)] = 0.5f * float(kIq4nlLevels[k] + kIq4nlLevels[k + 1]);
    return m;
  }();
  return int(std::upper_bound(mid.begin(), mid.end(), v) - mid.begin());
}

// The scale of 32 weights on the IQ4 levels: candidates putting the value of largest magnitude
// on or near the outermost level (-127), each with the least-squares scale of the levels it picks;
// the one with the smallest squared error (the largest sxl^2 / sll) wins.
float iq4_scale(const float* x) {
  const float m = signed_absmax(x, 32);
  if (m == 0.0f) return 0.0f;
  float best_d = m / -127.0f;
  double best = -1.0;
  for (int t = -7; t <= 7; ++t) {
    const float per_weight = (-127.0f + float(t)) / m;
    double sxl = 0, sll = 0;
    for (int j = 0; j < 32; ++j) {
      const double l = kIq4nlLevels[nearest_level(x[j] * per_weight)];
      sxl += double(x[j]) * l;
      sll += l * l;
    }
    if (sxl * sxl / sll > best) best = sxl * sxl / sll, best_d = float(sxl / sll);
  }
  return best_d;
}

void iq4_codes(const float* x, float d, int* codes) {
  for (int j = 0; j < 32; ++j) codes[j] = d == 0.0f ? 8 : nearest_level(x[j] / d);
}

// IQ4_XS: each sub-block's own scale, as a signed 6-bit multiple of d = the largest / -32.
void iq4_xs(const float* x, uint8_t* b) {
  float scale[8], largest = 0.0f;
  for (int i = 0; i < 8; ++i) {
    scale[i] = iq4_scale(x + 32 * i);
    if (std::fabs(scale[i]) > std::fabs(largest)) largest = scale[i];
  }
  const float d = stored_half(largest / -32.0f);
  std::memset(b, 0, 136);
  put_half(b, d);
  unsigned scales_h = 0;
  int codes[32];
  for (int i = 0; i < 8; ++i) {
    const int l = d == 0.0f ? 0 : clamp_round(scale[i] / d, -32, 31);
    b[4 + i / 2] |= uint8_t(((l + 32) & 0x0F) << (4 * (i % 2)));
    scales_h |= unsigned(((l + 32) >> 4) & 3) << (2 * i);
    iq4_codes(x + 32 * i, d * float(l), codes);
    pack_nibbles(codes, b + 8 + 16 * i);
  }
  b[2] = uint8_t(scales_h & 0xFF);
  b[3] = uint8_t(scales_h >> 8);
}

// MXFP4, as ggml's reference quantiser (quantize_row_mxfp4_ref) chooses: the exponent puts the
// block's largest magnitude amax at 8 to 16 times the scale d = 2^(e - 128), so that it lands near
// the top levels 8 and 12; e = floor(log2(amax)) - 2 + 127. The floor is ilogb's, exact for every
// float (subnormals included) where ggml's floorf(log2f(amax)) can round up for an amax within an
// ulp below a power of two (then ggml's e is one larger). e is clamped to [0, 254]: blocks below
// 2^-125 keep the smallest scale 2^-128 (their codes still nearest), and 254 is never reached by
// finite input (ilogb(FLT_MAX) = 127 gives 252). An all-zero block has e = 0 and codes 0.
// Each weight takes the level nearest x / d (exact: d is a power of two; an x so small that the
// quotient underflows is nearest 0 anyway), ties to the smaller magnitude and a zero magnitude
// always code 0, never 8 (-0): what ggml's first-index-wins search over its ordered table picks.
int mxfp4_code(float v) {
  static constexpr float kMid[7] = {0.5f, 1.5f, 2.5f, 3.5f, 5.0f, 7.0f, 10.0f};  // between levels 0,1,2,3,4,6,8,12
  const float a = std::fabs(v);
  int m = 0;
  while (m < 7 && a > kMid[m]) ++m;  // strictly above the midpoint: ties stay on the smaller level
  return m == 0 ? 0 : (v < 0.0f ? 8 : 0) | m;
}

void mxfp4(const float* x, uint8_t* b, int* codes) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  int e = 0;
  if (amax > 0.0f) {
    // The inner clamp only keeps ilogb(inf) = INT_MAX (input the caller is to refuse) from overflowing.
    e = std::clamp(std::clamp(std::ilogb(amax), -200, 200) - 2 + 127, 0, 254);
  }
  b[0] = uint8_t(e);
  const float d = mxfp4_scale(uint8_t(e));
  for (int j = 0; j < 32; ++j) codes[j] = mxfp4_code(x[j] / d);
  pack_nibbles(codes, b + 1);
}

}  // namespace

void quantize_row(QuantType q, const float* x, size_t n, void* out) {
  const size_t be = block_elems(q), bb = block_bytes(q);
  auto* o = static_cast<uint8_t*>(out);
  int codes[32];
  for (size_t i = 0; i < n / be; ++i, x += be, o += bb) {
    switch (q) {
      case QuantType::None: return;
      case QuantType::Q8_0: {
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = stored_half(amax / 127.0f);
        put_half(o, d);
        for (int j = 0; j < 32; ++j) o[2 + j] = uint8_t(int8_t(d == 0.0f ? 0 : clamp_round(x[j] / d, -127, 127)));
        break;
      }
      case QuantType::Q4_0:
        symmetric_block(x, 4, o, codes);
        pack_nibbles(codes, o + 2);
        break;
      case QuantType::Q4_1:
        affine_block(x, 4, o, o + 2, codes);
        pack_nibbles(codes, o + 4);
        break;
      case QuantType::Q5_0: {
        symmetric_block(x, 5, o, codes);
        const uint32_t qh = high_bits(codes);
        std::memcpy(o + 2, &qh, 4);
        pack_nibbles(codes, o + 6);
        break;
      }
      case QuantType::Q5_1: {
        affine_block(x, 5, o, o + 2, codes);
        const uint32_t qh = high_bits(codes);
        std::memcpy(o + 4, &qh, 4);
        pack_nibbles(codes, o + 8);
        break;
      }
      case QuantType::Q2_K: q2_k(x, o); break;
      case QuantType::Q3_K: q3_k(x, o); break;
      case QuantType::Q4_K: q45_k(x, o, 4); break;
      case QuantType::Q5_K: q45_k(x, o, 5); break;
      case QuantType::Q6_K: q6_k(x, o); break;
      case QuantType::IQ4_NL: {
        const float d = stored_half(iq4_scale(x));
        put_half(o, d);
        iq4_codes(x, d, codes);
        pack_nibbles(codes, o + 2);
        break;
      }
      case QuantType::IQ4_XS:
        iq4_xs(x, o);
        break;
      case QuantType::MXFP4:
        mxfp4(x, o, codes);
        break;
    }
  }
}

}  // namespace kvp
