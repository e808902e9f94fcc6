#pragma once
// Element-wise operations. They involve no reductions, so every kernel policy shares them; each
// applies the rounding points of HF's eager implementation in the compute dtype `act`.
#include <cstddef>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "core/dtype.h"

namespace kvp {

// cos/sin of pos * inv_freq[i] for every position and i < head_dim/2, computed in fp32 as HF's
// LlamaRotaryEmbedding does (inv_freq = 1 / theta^(2i/head_dim)); rounded to `act` at use.
// Llama rope_scaling applied to inv_freq, as transformers v4.44's ROPE_INIT_FUNCTIONS (in fp32).
// YaRN (_compute_yarn_parameters): each frequency a blend of itself and itself / factor, by a
// ramp over the dimensions between the correction range of beta_fast and beta_slow rotations in
// original_max_pos positions; cos and sin are then multiplied by attention_factor (in fp32).
struct RopeScalingSpec {
  enum class Type { None, Linear, Llama3, FreqFactors, Yarn } type = Type::None;
  float factor = 1.0f;           // linear: inv_freq / factor; llama3: low-frequency divisor; yarn: interpolation
  float low_freq_factor = 1.0f;  // llama3
  float high_freq_factor = 4.0f; // llama3
  int original_max_pos = 8192;   // llama3, yarn: original_max_position_embeddings
  std::vector<float> freq_factors;  // FreqFactors (llama.cpp's rope_freqs): inv_freq[i] / freq_factors[i]
  double beta_fast = 32.0, beta_slow = 1.0;  // yarn: rotations (config.json's numbers, as Python reads them)
  bool truncate = true;          // yarn: the correction range rounded out to whole dimensions
  double attention_factor = 1.0; // yarn: cos/sin x float(attention_factor); 1 for the other types
};

// YaRN's correction range [low, high] in dimensions (find_correction_range, in double), before the
// ramp reads it in fp32. portable_math: the logarithm from portable_math.h.
struct YarnRange {
  double low, high;
};
YarnRange yarn_correction_range(int head_dim, float theta, const RopeScalingSpec& yarn, bool portable_math = false);

// llama3 scaling expressed as llama.cpp's per-frequency divisors (what its converter stores in the
// GGUF tensor rope_freqs.weight): 1 for high frequencies, `factor` for low ones, interpolated between.
std::vector<float> llama3_rope_freq_factors(int head_dim, float theta, const RopeScalingSpec& llama3);

// inv_freq[i] = 1 / theta^(2i/head_dim) in fp32, then the scaling. portable_math: the power from
// portable_math.h (the same bits on every machine) instead of libm's powf.
std::vector<float> rope_inv_freq(int head_dim, float theta, const RopeScalingSpec& scaling,
                                 bool portable_math = false);

// How a rotation rounds. Terms: cos/sin rounded to the compute dtype, each product rounded, their
// sum rounded (Llama's apply_rotary_pos_emb with cos/sin cast to x's dtype). Once: cos/sin kept in
// fp32, q and k promoted to fp32, one rounding of the sum (OLMo's rotary embedding since
// transformers v4.52, which returns fp32 cos/sin, and its `.to(q_type)`).
enum class RopeRounding { Terms, Once };

// Rows are computed on first use, a block of positions at a time: a model's context may be 10^5
// positions (Llama-3.1: 131072 x 64 angles, ~170 ms and 64 MB when computed at load) while a run
// uses a few thousand. Safe to share between threads.
class RopeTable {
 public:
  RopeTable() = default;
  // portable_math: pow, cos and sin from portable_math.h rather than libm, whose last bits differ
  // between C libraries and versions.
  RopeTable(int head_dim, int max_positions, float theta, const RopeScalingSpec& scaling = {},
            bool portable_math = false, RopeRounding rounding = RopeRounding::Terms);
  // This table's twin computed with portable_math (itself when it is one), for the `portable`
  // policy; built on first use, so runs that never ask pay nothing.
  const RopeTable& portable() const;
  // The rotation by angle 0 at every position (cos 1, sin 0): what a layer without positional
  // encoding (SmolLM3's NoPE layers) goes through, so it takes the same ops and rounding points as
  // a rotating layer on every device; x * 1 + y * 0 gives x back (a zero's sign aside). Its own
  // portable twin: cos 0 and sin 0 are exact in every library.
  static RopeTable identity(int head_dim, int max_positions);
  int head_dim() const { return head_dim_; }
  RopeRounding rounding() const { return rounding_; }
  int max_positions() const { return max_positions_; }
  const float* cos_row(int pos) const { return row(cos_.get(), pos); }
  const float* sin_row(int pos) const { return row(sin_.get(), pos); }

 private:
  static constexpr int kBlock = 64;  // positions computed together
  const float* row(const float* base, int pos) const {
    if (pos < 0 || pos >= max_positions_) throw std::out_of_range("RoPE position beyond the model's context");
    const int b = pos / kBlock;
    std::call_once(filled_[size_t(b)], [this, b] { fill(b); });
    return base + size_t(pos) * size_t(head_dim_ / 2);
  }
  void fill(int block) const;

  int head_dim_ = 0, max_positions_ = 0;
  float theta_ = 0.0f;
  RopeScalingSpec scaling_;
  bool portable_math_ = false;
  RopeRounding rounding_ = RopeRounding::Terms;
  float attention_factor_ = 1.0f;  // float(scaling.attention_factor), applied to each cos/sin in fp32
  std::vector<float> inv_freq_;
  struct Twin {
    std::once_flag once;
    std::unique_ptr<RopeTable> table;
  };
  std::unique_ptr<Twin> twin_ = std::make_unique<Twin>();
  // Left uninitialised until filled, so untouched blocks cost no memory.
  std::unique_ptr<float[]> cos_, sin_;
  std::unique_ptr<std::once_flag[]> filled_;
};

// How the rotated pairs (x_i, y_i), i < head_dim/2, sit within a head of the input rows.
//  Halves:        x_i at i, y_i at i + head_dim/2 (rotate_half; HF checkpoints).
//  AdjacentPairs: x_i at 2i, y_i at 2i + 1 (llama2.c and GGUF "llama" files keep their q/k rows
//                 so, and the matmul's outputs follow the rows, so RoPE reads them where they are).
enum class RopePairs { Halves, AdjacentPairs };

// Rotates rows x[M, n_heads*head_dim] at positions start_pos + m:
// out = round(round(x*cos) + round(rotate_half(x)*sin)), with cos/sin rounded to act first; or,
// for a table of RopeRounding::Once, out = round(x*cos + rotate_half(x)*sin) over fp32 cos/sin.
// The output is always in the halves layout (what the cache and attention expect), and each value
// is computed from the same operands by the same operations whatever the input layout: an
// AdjacentPairs model gives bitwise the results of the same model with its rows moved to Halves.
void apply_rope(float* x, int M, int n_heads, int start_pos, const RopeTable& table, DType act,
                RopePairs input = RopePairs::Halves);

// gate <- round(round(silu(gate)) * up): SwiGLU's element-wise part.
void silu_mul(float* gate, const float* up, size_t n, DType act);

// gate <- round(round(gelu_tanh(gate)) * up): GeGLU's element-wise part (Gemma-2,
// gelu_pytorch_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in fp32, rounded once).
void gelu_tanh_mul(float* gate, const float* up, size_t n, DType act);

// gate <- GPT-OSS's clamped SwiGLU of (gate, up), each eager op of GptOssExperts rounded:
//   g = min(gate, limit), u = clamp(up, -limit, limit)      (exact; NaN stays NaN)
//   glu = round(g * round(sigmoid(round(g * alpha))))       (alpha, a Python float, in fp32 opmath)
//   gate <- round(round(u + 1) * glu)
void clamped_swiglu(float* gate, const float* up, size_t n, float alpha, float limit, DType act);

// x <- round(round(tanh(round(x / cap))) * cap): Gemma-2's soft-capping as three eager ops.
void softcap_inplace(float* x, size_t n, float cap, DType act);

// What a scale's factor is when it multiplies: a tensor in the compute dtype (Gemma-2's embedding
// normaliser, the MoE routing weights), so rounded to it first; or a Python float, which PyTorch
// applies in fp32 opmath (Granite's multipliers).
enum class ScaleBy { Act, Fp32 };

// x <- round(x * s), s = round(scale) (ScaleBy::Act) or scale itself (ScaleBy::Fp32).
void scale_inplace(float* x, size_t n, float scale, DType act, ScaleBy by = ScaleBy::Act);

// x <- round(x + y): residual connection.
void add_inplace(float* x, const float* y, size_t n, DType act);

}  // namespace kvp
