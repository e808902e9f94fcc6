#pragma once
// Architecture-neutral hyper-parameters. Loaders fill it from config.json, GGUF keys or a
// llama2.c header; the forward pass reads only this.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvp {

// Olmoe: OLMoE's attention (Llama's, with q/k normalised over the whole projection), a mixture of
// experts only. Olmo3: OLMo-2's decoder with windowed layers, as transformers v4.57 rounds it
// (norms' gains and RoPE in fp32, rounded once; kvparity's OLMo-2 keeps v4.51's rounding points).
// Exaone4: OLMo-2's block placement with Llama's rounding and Qwen3's per-head q/k norms; its
// windowed hybrid's global layers are NoPE layers (nope_layers).
// GptOss: GPT-OSS (GptOssForCausalLM), a mixture of experts only: Llama's block placement with
// biases on every attention projection, a learned attention sink per head, norm gains applied in
// fp32, and experts with biases and a clamped SwiGLU, routed by a softmax over their top-k logits.
enum class Arch { Llama, Mistral, Gemma2, Qwen2, Qwen3, Gemma3, Olmo2, Olmoe, Olmo3, Exaone4, GptOss };

// "llama" | "mistral" | "gemma2" | "qwen2" | "qwen3" | "gemma3" | "olmo2" | "olmoe" | "olmo3" | "exaone4" | "gpt_oss"
std::string arch_name(Arch a);
Arch parse_arch(const std::string& s);  // accepts the names above; errors name the value
struct ModelConfig;
// The model's family as transformers names it: arch_name, or for a mixture of experts "mixtral",
// "qwen2_moe", "qwen3_moe", "olmoe", "gpt_oss".
std::string family_name(const ModelConfig& c);

// Mixture-of-experts MLPs (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE): the attention is the family's (Arch),
// the MLP of a sparse layer is a router and n_experts SwiGLU experts of which each token runs the
// n_used with the largest router logits.
struct MoeConfig {
  int n_experts = 0;            // 0: a dense model
  int n_used = 0;               // num_experts_per_tok
  int expert_hidden_dim = 0;    // each expert's intermediate size (moe_intermediate_size)
  // Whether the n_used routing probabilities are renormalised to sum to 1 (Mixtral always;
  // Qwen-MoE's norm_topk_prob).
  bool norm_topk_prob = true;
  // Qwen2-MoE: a shared expert of this intermediate size beside the routed ones, its output
  // scaled by sigmoid(shared_expert_gate . x); 0 = none.
  int shared_hidden_dim = 0;
  // Which layers are sparse (Qwen-MoE): layer l where l is not in dense_layers (mlp_only_layers)
  // and (l + 1) % sparse_step == 0 (decoder_sparse_step); the others have the dense MLP
  // (hidden_dim).
  int sparse_step = 1;
  std::vector<int> dense_layers;
  // How the router's logits become the n_used weights: a softmax over all experts, then the top k
  // (renormalised when norm_topk_prob: Mixtral, Qwen-MoE, OLMoE); or the top k logits, then a
  // softmax over those k alone (GPT-OSS's GptOssTopKRouter).
  enum class Routing { SoftmaxThenTopK, TopKThenSoftmax };
  Routing routing = Routing::SoftmaxThenTopK;
  // GPT-OSS's experts: gate, up and down carry biases, and the activation is the clamped SwiGLU
  // (up + 1) * g * sigmoid(alpha g) with g = min(gate, limit), up clamped to [-limit, limit]
  // (swiglu_limit; alpha is GptOssExperts' 1.702). 0 = the plain SwiGLU of the other families.
  float swiglu_limit = 0.0f;
  float swiglu_alpha = 1.702f;
};

struct ModelConfig {
  Arch arch = Arch::Llama;
  int dim = 0;              // hidden_size
  int hidden_dim = 0;       // intermediate_size (MLP)
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;         // usually dim / n_heads (Gemma-2 sets it independently)
  // The dimensions of a head that RoPE rotates: head_dim x partial_rotary_factor (Phi-4-mini: 96 of
  // 128; transformers' Phi-3 rotates q[..., :r] and passes the rest through); 0 = head_dim.
  int rotary_dim = 0;
  int vocab_size = 0;
  int max_seq_len = 0;      // max_position_embeddings / context length
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;
  bool tied_embeddings = false;
  int bos_id = 1;
  int eos_id = 2;           // -1 when the model has none
  // Whether sampling BOS ends a generation, as llama2.c's run.c does: llama2.c's training data
  // delimits stories with BOS only (no EOS), so its checkpoints end a story by emitting BOS.
  // Set for llama2.c .bin files; other formats end at eos_id only.
  bool bos_ends_generation = false;
  // Further ids that end a generation as eos_id does (stop_reason "eos"): the rest of config.json's
  // eos_token_id list and generation_config.json's ids (transformers' generate stops at any of
  // them: Llama-3.1's <|eom_id|> and <|eot_id|>, Gemma-2-it's <end_of_turn>), a GGUF's EOT token.
  std::vector<int> more_eos_ids;
  bool ends_generation(int id) const;  // eos_id or one of more_eos_ids
  // Family features (issue 4); for plain Llama these stay at their defaults.
  bool qkv_bias = false;
  bool o_bias = false;      // GPT-OSS: o_proj has a bias too (attention_bias)
  // GPT-OSS: every attention head has a learned sink logit (self_attn.sinks), one more column of
  // the softmax with no value.
  bool attention_sinks = false;
  int sliding_window = 0;   // 0 = none
  // Which layers the window applies to: 1 = every layer (Mistral, Qwen2 with max_window_layers 0);
  // P > 1 = all but every P-th, layer l windowed where (l + 1) % P != 0 (Gemma-2: P = 2, the even
  // layers local, the odd ones global; Gemma-3: sliding_window_pattern, 6 in its checkpoints).
  int sliding_window_period = 1;
  // Gemma-3: the RoPE base of the windowed (local) layers, unscaled (rope_local_base_freq); the
  // global layers take rope_theta and rope_scaling. 0 = one RoPE for every layer.
  float rope_local_theta = 0.0f;
  // SmolLM3: the layers that add no positional encoding (no_rope_layers' zeros; every 4th layer in
  // its checkpoints), ascending; empty = every layer rotates.
  std::vector<int> nope_layers;
  // Granite (GraniteForCausalLM): Llama's decoder with four multipliers, each a Python float that
  // PyTorch applies in fp32 opmath, rounding the product to the compute dtype: the embedding rows
  // x embedding_multiplier; scores x attention_multiplier (instead of / sqrt(head_dim); 0 = the
  // family's scaling); each block's output x residual_multiplier before its residual add; logits /
  // logits_scaling (a power of two: division by it is multiplication by its exact reciprocal).
  float embedding_multiplier = 1.0f;
  float attention_multiplier = 0.0f;
  float residual_multiplier = 1.0f;
  float logits_scaling = 1.0f;
  // Ministral 3 (Llama-4's attention temperature): each rotated query row at position pos is
  // multiplied by query_temperature(pos) = 1 + beta ln(1 + floor(pos / query_temperature_context)),
  // rounded to the compute dtype, as its product; 1 (nothing done) below that context. 0 = none.
  float query_temperature_beta = 0.0f;
  int query_temperature_context = 0;
  float query_temperature(int pos) const;
  // Gemma-2 (0 = absent): attention scores are multiplied by query_pre_attn_scalar^-0.5 (instead of
  // divided by sqrt(head_dim)); scores and final logits are soft-capped as cap * tanh(x / cap).
  float query_pre_attn_scalar = 0.0f;
  float attn_logit_softcapping = 0.0f;
  float final_logit_softcapping = 0.0f;
  // rope_scaling (HF ROPE_INIT_FUNCTIONS on inv_freq): none, "linear", "llama3", "yarn" or
  // "longrope"; or llama.cpp's per-frequency divisors (GGUF tensor rope_freqs.weight), which is how
  // GGUF files carry llama3 scaling.
  enum class RopeScaling { None, Linear, Llama3, FreqFactors, Yarn, LongRope };
  RopeScaling rope_scaling = RopeScaling::None;
  float rope_factor = 1.0f;
  float rope_low_freq_factor = 1.0f;     // llama3 only
  float rope_high_freq_factor = 4.0f;    // llama3 only
  int rope_original_max_pos = 8192;      // llama3, yarn, longrope: original_max_position_embeddings
  std::vector<float> rope_freq_factors;  // FreqFactors only: inv_freq[i] / factor[i], head_dim/2 entries
  // yarn only (_compute_yarn_parameters): the ramp's rotations, whether its range is truncated to
  // whole dimensions, and the factor cos/sin are multiplied by (attention_factor, or the one
  // transformers derives from factor, mscale and mscale_all_dim: resolved when the config is read).
  double rope_yarn_beta_fast = 32.0, rope_yarn_beta_slow = 1.0;
  bool rope_yarn_truncate = true;
  double rope_attention_factor = 1.0;  // yarn and longrope
  // longrope only: inv_freq[i] = 1 / (factor[i] * theta^(2i/rotary_dim)), rotary_dim/2 entries each;
  // the long set for the forward calls that reach rope_original_max_pos (RopeTable::long_from).
  std::vector<float> rope_short_factors, rope_long_factors;
  MoeConfig moe;            // n_experts 0 for the dense families
  std::string source;       // file or directory the config came from, for error messages

  int q_dim() const { return n_heads * head_dim; }
  int rotated_dims() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  // Phi-3's own rotary embedding (a partial rotary factor or longrope): only Phi3ForCausalLM's
  // config.json and llama.cpp's GGUF "phi3" can say it, so a model with it is written in that form.
  bool phi3_rope() const { return rotary_dim > 0 || rope_scaling == RopeScaling::LongRope; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  // The window (0 = none) that attention in layer `layer` uses.
  int window_for_layer(int layer) const { return sliding_window > 0 && local_layer(layer) ? sliding_window : 0; }
  // Whether layer `layer` is of the kind the window applies to (whatever its size), by the period.
  bool local_layer(int layer) const { return local_in_period(layer, sliding_window_period); }
  static bool local_in_period(int layer, int period) { return period <= 1 || (layer + 1) % period != 0; }
  // Whether layer `layer` rotates with the local RoPE (rope_local_theta) rather than the global one:
  // Gemma-3's local layers, by their kind, as transformers picks position_embeddings_local.
  bool local_rope(int layer) const { return rope_local_theta > 0.0f && local_layer(layer); }
  // Whether layer `layer` rotates q and k at all (not one of SmolLM3's NoPE layers).
  bool rotates(int layer) const {
    return !std::binary_search(nope_layers.begin(), nope_layers.end(), layer);
  }
  // The local layers as Gemma-3's sliding_window_pattern says them (transformers and llama.cpp
  // alike: layer l local where (l + 1) % P != 0): 1 when none is (no window, no local RoPE), a
  // period longer than the model when every layer is, else the period.
  int local_layer_pattern() const {
    if (sliding_window <= 0 && rope_local_theta <= 0.0f) return 1;
    return sliding_window_period <= 1 ? n_layers + 1 : sliding_window_period;
  }
  // Gemma-2 and Gemma-3 (embedding normaliser, (1 + w) norms, four per layer, GeGLU, scaled scores).
  bool gemma_family() const { return arch == Arch::Gemma2 || arch == Arch::Gemma3; }
  // OLMo-2 and OLMo-3's dense decoder (post-norms only, q/k normalised over the whole projection).
  bool olmo_dense() const { return arch == Arch::Olmo2 || arch == Arch::Olmo3; }
  // Whether the rotation keeps cos/sin in fp32 and rounds once (OLMo-3: transformers' OLMo rotary
  // embedding since v4.52 returns fp32 cos/sin) rather than rounding them and each term to the
  // compute dtype (every other family, and kvparity's OLMo-2 as v4.51 has it).
  bool rope_rounds_once() const { return arch == Arch::Olmo3; }
  // Qwen3 and Gemma-3: q and k are RMS-normalised per head (over head_dim, a gain of head_dim
  // values each; Gemma-3's as its other norms, (1 + w) in fp32) between their projections and RoPE.
  // Hard-wired in both families' modeling code: no config field says it.
  // OLMo-2 and OLMoE: q and k are RMS-normalised over the whole projection (a gain of q_dim / kv_dim
  // values).
  bool qk_norm() const { return qk_norm_per_head() || olmo_dense() || arch == Arch::Olmoe; }
  // Whether only the blocks' outputs are normalised (OLMo-2, OLMo-3, EXAONE 4.0), nothing before them.
  bool post_norms_only() const { return olmo_dense() || arch == Arch::Exaone4; }
  bool qk_norm_per_head() const { return arch == Arch::Qwen3 || arch == Arch::Gemma3 || arch == Arch::Exaone4; }
  // Whether every RMSNorm multiplies its gain in fp32 and rounds once (Gemma's (1 + w); OLMo-3's w,
  // Olmo2RMSNorm as v4.52 on has it), rather than rounding the normalised row before the gain
  // (Llama's; OLMo-2's too, as transformers v4.51 rounds it, which kvparity's OLMo-2 follows).
  bool norm_gain_in_fp32() const { return gemma_family() || arch == Arch::Olmo3 || arch == Arch::GptOss; }
  // Whether the norms' gains stay the fp32 values the file holds instead of being rounded to the
  // compute dtype (GPT-OSS: _keep_in_fp32_modules keeps every RMSNorm in fp32; the published
  // checkpoints store them in bf16, so the difference shows only for an fp32 file run in fp16/bf16).
  bool norm_gains_kept_in_fp32() const { return arch == Arch::GptOss; }
  // Whether the attention and MLP blocks start with a norm of the residual stream (not OLMo-2's,
  // which normalises their outputs only), and whether their outputs are normalised (Gemma, OLMo-2).
  bool pre_norms() const { return !post_norms_only(); }
  bool post_norms() const { return gemma_family() || post_norms_only(); }
  bool is_moe() const { return moe.n_experts > 0; }
  // Whether any of Granite's multipliers is set.
  bool granite_multipliers() const {
    return embedding_multiplier != 1.0f || attention_multiplier != 0.0f || residual_multiplier != 1.0f ||
           logits_scaling != 1.0f;
  }
  // Whether layer `layer`'s MLP is the experts' (else the dense MLP of hidden_dim).
  bool moe_layer(int layer) const {
    return is_moe() && (layer + 1) % moe.sparse_step == 0 &&
           std::find(moe.dense_layers.begin(), moe.dense_layers.end(), layer) == moe.dense_layers.end();
  }
  // Whether the checkpoint names its experts as Mixtral does (block_sparse_moe.experts.{e}.w1/w2/w3)
  // rather than as Qwen-MoE (mlp.experts.{e}.gate_proj/up_proj/down_proj): Mixtral's attention is
  // Mistral's, Qwen-MoE's Qwen's.
  bool mixtral_names() const { return arch == Arch::Llama || arch == Arch::Mistral; }
  // Throws a clear error naming `source` when the numbers are inconsistent or unsupported.
  void validate() const;
};

// The sliding_window_period whose local layers are exactly those `windowed` marks (P read off the
// first unwindowed layer; 1 when every layer is windowed), 0 when none is, or -1 when no period
// gives them, with *mismatch the first layer that breaks the first unwindowed layer's period.
// Readers of per-layer kinds (config.json's layer_types, a GGUF's bool per layer) call it.
int window_period_of(const std::vector<bool>& windowed, int* mismatch);

}  // namespace kvp
