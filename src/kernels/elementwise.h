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
// LongRoPE (_compute_longrope_parameters; Phi-3's 128k models, Phi-4-mini): inv_freq[i] =
// 1 / (ext[i] * theta^(2i/dim)) with the short factors for ext, or the long ones, which transformers
// switches to in any forward call whose highest position reaches original_max_pos (its
// dynamic_rope_update): a table of this type holds both (RopeTable::long_rows), and cos and sin
// are multiplied by attention_factor.
struct RopeScalingSpec {
  enum class Type { None, Linear, Llama3, FreqFactors, Yarn, LongRope } type = Type::None;
  float factor = 1.0f;           // linear: inv_freq / factor; llama3: low-frequency divisor; yarn: interpolation
  float low_freq_factor = 1.0f;  // llama3
  float high_freq_factor = 4.0f; // llama3
  int original_max_pos = 8192;   // llama3, yarn: original_max_position_embeddings
  std::vector<float> freq_factors;  // FreqFactors (llama.cpp's rope_freqs): inv_freq[i] / freq_factors[i]
  double beta_fast = 32.0, beta_slow = 1.0;  // yarn: rotations (config.json's numbers, as Python reads them)
  bool truncate = true;          // yarn: the correction range rounded out to whole dimensions
  double attention_factor = 1.0; // yarn, longrope: cos/sin x float(attention_factor); 1 for the other types
  std::vector<float> short_factors, long_factors;  // longrope: dim/2 each
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

// inv_freq[i] = 1 / theta^(2i/dim) in fp32, then the scaling; dim: the rotated dimensions of a
// head (head_dim, or fewer under a partial rotary factor). portable_math: the power from
// portable_math.h (the same bits on every machine) instead of libm's powf. long_factors: a
// longrope spec's long set rather than its short one.
std::vector<float> rope_inv_freq(int dim, float theta, const RopeScalingSpec& scaling, bool portable_math = false,
                                 bool long_factors = false);

// How a rotation rounds. Terms: cos/sin rounded to the compute dtype, each product rounded, their
// sum rounded (Llama's apply_rotary_pos_emb with cos/sin cast to x's dtype). Once: cos/sin kept in
// fp32, q and k promoted to fp32, one rounding of the sum (OLMo's rotary embedding since
// transformers v4.52, which returns fp32 cos/sin, and its `.to(q_type)`).
enum class RopeRounding { Terms, Once };

// Rows are computed on first use, a block of positions at a time: a model's context may be 10^5
// positions (Llama-3.1: 131072 x 64 angles, ~170 ms and 64 MB when computed at load) while a run
// uses a few thousand. Safe to share between threads.
//
// A row holds head_dim/2 angles whatever the rotary dimension: under a partial rotary factor
// (Phi-4-mini rotates 96 of 128) the angles past rotary_dim/2 are cos 1, sin 0, and apply_rope
// passes those dimensions through (RopePairs has where they sit).
class RopeTable {
 public:
  RopeTable() = default;
  // portable_math: pow, cos and sin from portable_math.h rather than libm, whose last bits differ
  // between C libraries and versions. rotary_dim: the dimensions of a head that rotate (even; 0 =
  // head_dim).
  RopeTable(int head_dim, int max_positions, float theta, const RopeScalingSpec& scaling = {},
            bool portable_math = false, RopeRounding rounding = RopeRounding::Terms, int rotary_dim = 0);
  // This table's twin computed with portable_math (itself when it is one), for the `portable`
  // policy; built on first use, so runs that never ask pay nothing.
  const RopeTable& portable() const;
  // The rotation by angle 0 at every position (cos 1, sin 0): what a layer without positional
  // encoding (SmolLM3's NoPE layers) goes through, so it takes the same ops and rounding points as
  // a rotating layer on every device; x * 1 + y * 0 gives x back (a zero's sign aside). Its own
  // portable twin: cos 0 and sin 0 are exact in every library.
  static RopeTable identity(int head_dim, int max_positions);
  int head_dim() const { return head_dim_; }
  int rotary_dim() const { return rotary_dim_; }
  RopeRounding rounding() const { return rounding_; }
  int max_positions() const { return max_positions_; }
  // The table's rows: one a position, and for longrope a second set of max_positions() rows
  // (position p's long-factor angles at row long_rows() + p). A rotation reads rows, which the
  // forward pass derives from the positions (long_from()).
  int rows() const { return long_rows() + max_positions_; }
  int long_rows() const { return long_ ? max_positions_ : 0; }
  // longrope: a forward call takes the long rows for a sequence whose highest position in it is
  // at least this (transformers: max(position_ids) + 1 > original_max_position_embeddings); 0 = never.
  int long_from() const { return long_ ? scaling_.original_max_pos : 0; }
  const float* cos_row(int row) const { return at(cos_.get(), row); }
  const float* sin_row(int row) const { return at(sin_.get(), row); }

 private:
  static constexpr int kBlock = 64;  // rows computed together
  const float* at(const float* base, int r) const {
    if (r < 0 || r >= rows()) throw std::out_of_range("RoPE position beyond the model's context");
    const int b = r / kBlock;
    std::call_once(filled_[size_t(b)], [this, b] { fill(b); });
    return base + size_t(r) * size_t(head_dim_ / 2);
  }
  void fill(int block) const;

  int head_dim_ = 0, rotary_dim_ = 0, max_positions_ = 0;
  bool long_ = false;  // longrope: rows() holds the long set too
  float theta_ = 0.0f;
  RopeScalingSpec scaling_;
  bool portable_math_ = false;
  RopeRounding rounding_ = RopeRounding::Terms;
  float attention_factor_ = 1.0f;  // float(scaling.attention_factor), applied to each cos/sin in fp32
  std::vector<float> inv_freq_, inv_freq_long_;  // rotary_dim/2 each; the long set for longrope only
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
// Under a partial rotary dimension r < head_dim (Halves only: transformers' Phi-3 rotates
// rotate_half(x[..., :r]) and concatenates x[..., r:] unchanged), pair i < r/2 is (i, i + r/2), and
// the rest pass through; rope_pair() has every pair's place.
enum class RopePairs { Halves, AdjacentPairs };

// Where pair i of a head sits in the rotation's input (in_a, in_b) and output (out_a, out_b), and
// whether it rotates: i < r/2 rotates, the pairs past it hold the passed-through dimensions
// [r, head_dim) as two halves of their own. Shared by the CPU and CUDA kernels.
struct RopePairPlace {
  int in_a, in_b, out_a, out_b;
  bool rotates;
};
// (AdjacentPairs input with a partial rotary dimension is refused where a model is built.)
#ifdef __CUDACC__
__host__ __device__
#endif
inline RopePairPlace rope_pair(int i, int head_dim, int rotary_dim, bool adjacent) {
  const int rh = rotary_dim / 2, pass_half = (head_dim - rotary_dim) / 2;
  const bool rot = i < rh;
  const int a = rot ? i : rotary_dim + (i - rh), b = rot ? i + rh : a + pass_half;
  return adjacent ? RopePairPlace{2 * i, 2 * i + 1, a, b, rot} : RopePairPlace{a, b, a, b, rot};
}

// Rotates rows x[M, n_heads*head_dim] by table rows start_row + m (the positions, or for longrope's
// long set long_rows() past them):
// out = round(round(x*cos) + round(rotate_half(x)*sin)), with cos/sin rounded to act first; or,
// for a table of RopeRounding::Once, out = round(x*cos + rotate_half(x)*sin) over fp32 cos/sin.
// Dimensions past the table's rotary_dim are left as they are.
// The output is always in the halves layout (what the cache and attention expect), and each value
// is computed from the same operands by the same operations whatever the input layout: an
// AdjacentPairs model gives bitwise the results of the same model with its rows moved to Halves.
void apply_rope(float* x, int M, int n_heads, int start_row, const RopeTable& table, DType act,
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
