#include "kernels/elementwise.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/portable_math.h"
#include "kernels/simd_ops.h"

namespace kvp {

YarnRange yarn_correction_range(int head_dim, float theta, const RopeScalingSpec& y, bool portable_math) {
  auto ln = [&](double v) { return portable_math ? pmath::log(v) : std::log(v); };
  const double dim = head_dim, base = theta, orig = y.original_max_pos;
  // find_correction_dim: the dimension whose wavelength makes `rotations` turns in orig positions.
  auto dim_of = [&](double rotations) { return (dim * ln(orig / (rotations * 2.0 * M_PI))) / (2.0 * ln(base)); };
  double low = dim_of(y.beta_fast), high = dim_of(y.beta_slow);
  if (y.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  return {std::max(low, 0.0), std::min(high, dim - 1.0)};
}

namespace {

// _compute_yarn_parameters on the fp32 tensors: every operation rounds to fp32 as torch's do, the
// Python numbers (factor, the range) entering as floats. inv_freq holds 1 / pos_freq on entry.
void apply_yarn(std::vector<float>& inv_freq, const std::vector<float>& pos_freq, int head_dim, float theta,
                const RopeScalingSpec& y, bool portable_math) {
  const YarnRange r = yarn_correction_range(head_dim, theta, y, portable_math);
  const double hi = r.low == r.high ? r.high + 0.001 : r.high;  // linear_ramp_factor's singularity guard
  const float lo = float(r.low), span = float(hi - r.low), factor = y.factor;
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float extrapolation = inv_freq[i];
    const float interpolation = 1.0f / (factor * pos_freq[i]);
    const float ramp = std::clamp((float(i) - lo) / span, 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    const float a = interpolation * (1.0f - extrapolation_factor);
    const float b = extrapolation * extrapolation_factor;
    inv_freq[i] = a + b;
  }
}

}  // namespace

std::vector<float> rope_inv_freq(int head_dim, float theta, const RopeScalingSpec& sc, bool portable_math,
                                 bool long_factors) {
  const int half = head_dim / 2;
  // pos_freq = theta^(2i/head_dim); inv_freq = 1 / pos_freq.
  std::vector<float> pos_freq(static_cast<size_t>(half)), inv_freq(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    const float exponent = float(2 * i) / float(head_dim);
    pos_freq[size_t(i)] = portable_math ? pmath::powf_rounded(theta, exponent) : std::pow(theta, exponent);
    inv_freq[size_t(i)] = 1.0f / pos_freq[size_t(i)];
  }
  if (sc.type == RopeScalingSpec::Type::LongRope) {
    // 1.0 / (ext_factors * base**inv_freq_shape): the product rounds before the reciprocal.
    const std::vector<float>& ext = long_factors ? sc.long_factors : sc.short_factors;
    for (int i = 0; i < half; ++i) inv_freq[size_t(i)] = 1.0f / (ext.at(size_t(i)) * pos_freq[size_t(i)]);
  } else if (sc.type == RopeScalingSpec::Type::Yarn) {
    apply_yarn(inv_freq, pos_freq, head_dim, theta, sc, portable_math);
  } else if (sc.type == RopeScalingSpec::Type::Linear) {
    for (auto& f : inv_freq) f = f / sc.factor;  // _compute_linear_scaling_rope_parameters
  } else if (sc.type == RopeScalingSpec::Type::FreqFactors) {
    for (int i = 0; i < half; ++i) inv_freq[size_t(i)] /= sc.freq_factors.at(size_t(i));
  } else if (sc.type == RopeScalingSpec::Type::Llama3) {
    // _compute_llama3_parameters, elementwise on the fp32 inv_freq tensor.
    const double old_len = double(sc.original_max_pos);
    const double low_wavelen = old_len / double(sc.low_freq_factor);
    const double high_wavelen = old_len / double(sc.high_freq_factor);
    const float two_pi = float(2.0 * M_PI);
    for (auto& f : inv_freq) {
      const float wavelen = two_pi / f;
      float g = double(wavelen) > low_wavelen ? f / sc.factor : f;
      const float smooth = (float(old_len) / wavelen - sc.low_freq_factor) / (sc.high_freq_factor - sc.low_freq_factor);
      const float smoothed = (1.0f - smooth) * g / sc.factor + smooth * g;
      const bool medium = !(double(wavelen) < high_wavelen) && !(double(wavelen) > low_wavelen);
      f = medium ? smoothed : g;
    }
  }
  return inv_freq;
}

namespace {
using ScalingType = RopeScalingSpec::Type;
}  // namespace

RopeTable::RopeTable(int head_dim, int max_positions, float theta, const RopeScalingSpec& sc, bool portable_math,
                     RopeRounding rounding, int rotary_dim)
    : head_dim_(head_dim),
      rotary_dim_(rotary_dim > 0 ? rotary_dim : head_dim),
      max_positions_(max_positions),
      long_(sc.type == ScalingType::LongRope),
      theta_(theta),
      scaling_(sc),
      portable_math_(portable_math),
      rounding_(rounding),
      attention_factor_(
          float(sc.type == ScalingType::Yarn || sc.type == ScalingType::LongRope ? sc.attention_factor : 1.0)),
      inv_freq_(rope_inv_freq(rotary_dim_, theta, sc, portable_math)) {
  if (rotary_dim_ % 2 != 0 || rotary_dim_ > head_dim)
    throw std::invalid_argument("RoPE rotary dimension " + std::to_string(rotary_dim_) + " for head_dim " +
                                std::to_string(head_dim));
  if (long_) inv_freq_long_ = rope_inv_freq(rotary_dim_, theta, sc, portable_math, true);
  const size_t n = size_t(rows()) * size_t(head_dim / 2);
  cos_.reset(new float[n]);
  sin_.reset(new float[n]);
  filled_.reset(new std::once_flag[size_t((rows() + kBlock - 1) / kBlock)]);
}

RopeTable RopeTable::identity(int head_dim, int max_positions) {
  RopeTable t(head_dim, max_positions, 1.0f, {}, true);
  std::fill(t.inv_freq_.begin(), t.inv_freq_.end(), 0.0f);
  return t;
}

const RopeTable& RopeTable::portable() const {
  if (portable_math_) return *this;
  std::call_once(twin_->once, [this] {
    twin_->table =
        std::make_unique<RopeTable>(head_dim_, max_positions_, theta_, scaling_, true, rounding_, rotary_dim_);
  });
  return *twin_->table;
}

void RopeTable::fill(int block) const {
  const int half = head_dim_ / 2, rh = rotary_dim_ / 2;
  for (int r = block * kBlock; r < std::min(rows(), (block + 1) * kBlock); ++r) {
    const bool long_row = r >= max_positions_;
    const int p = long_row ? r - max_positions_ : r;
    const std::vector<float>& inv_freq = long_row ? inv_freq_long_ : inv_freq_;
    for (int i = 0; i < half; ++i) {
      float c = 1.0f, s = 0.0f;  // the dimensions a partial rotary factor passes through
      if (i < rh) {
        const double angle = double(float(p) * inv_freq[size_t(i)]);
        c = float(portable_math_ ? pmath::cos(angle) : std::cos(angle));
        s = float(portable_math_ ? pmath::sin(angle) : std::sin(angle));
        if (attention_factor_ != 1.0f) {  // YaRN, longrope: emb.cos() * attention_scaling, in fp32
          c *= attention_factor_;
          s *= attention_factor_;
        }
      }
      cos_[size_t(r) * half + i] = c;
      sin_[size_t(r) * half + i] = s;
    }
  }
}

std::vector<float> llama3_rope_freq_factors(int head_dim, float theta, const RopeScalingSpec& llama3) {
  const std::vector<float> plain = rope_inv_freq(head_dim, theta, {});
  const std::vector<float> scaled = rope_inv_freq(head_dim, theta, llama3);
  std::vector<float> factors(plain.size());
  for (size_t i = 0; i < plain.size(); ++i) factors[i] = plain[i] / scaled[i];
  return factors;
}

// The element-wise ops below compute each step in fp32 over a block and then round the block with
// simd::round_inplace, which rounds exactly as round_to() does per value but in vector registers:
// a decode step runs them serially between parallel matmuls, where scalar rounding cost ~6% of
// the main thread's time.
namespace {
constexpr size_t kBlock = 512;
}  // namespace

void apply_rope(float* x, int M, int n_heads, int start_row, const RopeTable& table, DType act, RopePairs input) {
  const int hd = table.head_dim(), half = hd / 2, rh = table.rotary_dim() / 2;
  // Where pair i's two members are read from and go; all terms are computed before v is
  // overwritten, so the rotation can move the pairs to the halves layout in place.
  const bool adjacent = input == RopePairs::AdjacentPairs;
  if (adjacent && rh != half) throw std::invalid_argument("apply_rope: adjacent pairs under a partial rotary factor");
  std::vector<RopePairPlace> place(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) place[size_t(i)] = rope_pair(i, hd, table.rotary_dim(), adjacent);
  std::vector<float> cs(size_t(2 * half)), terms(size_t(2 * hd)), passed(size_t(hd - 2 * rh));
  // Once: cos/sin stay fp32 and only the sum rounds (rounding a term to fp32 is the identity).
  const bool once = table.rounding() == RopeRounding::Once;
  const DType term = once ? DType::F32 : act;
  for (int m = 0; m < M; ++m) {
    std::copy_n(table.cos_row(start_row + m), half, cs.begin());
    std::copy_n(table.sin_row(start_row + m), half, cs.begin() + half);
    simd::round_inplace(term, cs.data(), cs.size());
    const float* c = cs.data();
    const float* sn = cs.data() + half;
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + (size_t(m) * n_heads + h) * hd;
      float* t = terms.data();
      for (int i = 0; i < rh; ++i) {
        const float a = v[place[size_t(i)].in_a], b = v[place[size_t(i)].in_b];
        t[i] = a * c[i];
        t[half + i] = -b * sn[i];
        t[hd + i] = b * c[i];
        t[hd + half + i] = a * sn[i];
      }
      // The passed-through values, as they are (read before the rotated ones are stored).
      for (int i = rh; i < half; ++i) {
        passed[size_t(2 * (i - rh))] = v[place[size_t(i)].in_a];
        passed[size_t(2 * (i - rh) + 1)] = v[place[size_t(i)].in_b];
      }
      simd::round_inplace(term, t, size_t(2 * hd));
      for (int i = 0; i < rh; ++i) {
        v[place[size_t(i)].out_a] = t[i] + t[half + i];
        v[place[size_t(i)].out_b] = t[hd + i] + t[hd + half + i];
      }
      for (int i = rh; i < half; ++i) {
        v[place[size_t(i)].out_a] = passed[size_t(2 * (i - rh))];
        v[place[size_t(i)].out_b] = passed[size_t(2 * (i - rh) + 1)];
      }
      simd::round_inplace(act, v, size_t(hd));
    }
  }
}

namespace {

// gate <- round(round(activation(gate)) * up), a block at a time.
template <class Activation>
void gated_mul(float* gate, const float* up, size_t n, DType act, Activation activation) {
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t e = std::min(n, b + kBlock);
    for (size_t i = b; i < e; ++i) gate[i] = activation(gate[i]);
    simd::round_inplace(act, gate + b, e - b);
    for (size_t i = b; i < e; ++i) gate[i] *= up[i];
    simd::round_inplace(act, gate + b, e - b);
  }
}

}  // namespace

void silu_mul(float* gate, const float* up, size_t n, DType act) {
  gated_mul(gate, up, n, act, [](float g) { return g / (1.0f + std::exp(-g)); });
}

void gelu_tanh_mul(float* gate, const float* up, size_t n, DType act) {
  // PyTorch's GeluKernel (approximate="tanh"): kBeta = sqrt(2) * (2/sqrt(pi)) * 0.5, kKappa = 0.044715.
  const float kBeta = float(M_SQRT2 * M_2_SQRTPI * 0.5);
  const float kKappa = 0.044715f;
  gated_mul(gate, up, n, act, [&](float x) {
    const float inner = kBeta * (x + kKappa * (x * x * x));
    return 0.5f * x * (1.0f + std::tanh(inner));
  });
}

void clamped_swiglu(float* gate, const float* up, size_t n, float alpha, float limit, DType act) {
  for (size_t i = 0; i < n; ++i) {
    // Comparisons rather than std::clamp so that a NaN stays NaN, as torch.clamp keeps it.
    const float g = gate[i] > limit ? limit : gate[i];
    const float u = up[i] > limit ? limit : up[i] < -limit ? -limit : up[i];
    const float s = round_to(act, 1.0f / (1.0f + std::exp(-round_to(act, g * alpha))));
    gate[i] = round_to(act, round_to(act, u + 1.0f) * round_to(act, g * s));
  }
}

void softcap_inplace(float* x, size_t n, float cap, DType act) {
  for (size_t i = 0; i < n; ++i) x[i] = round_to(act, round_to(act, std::tanh(round_to(act, x[i] / cap))) * cap);
}

void scale_inplace(float* x, size_t n, float scale, DType act, ScaleBy by) {
  const float s = by == ScaleBy::Act ? round_to(act, scale) : scale;
  for (size_t i = 0; i < n; ++i) x[i] *= s;
  simd::round_inplace(act, x, n);
}

void add_inplace(float* x, const float* y, size_t n, DType act) {
  for (size_t i = 0; i < n; ++i) x[i] += y[i];
  simd::round_inplace(act, x, n);
}

}  // namespace kvp
