#include "model/model.h"

#include "core/error.h"

namespace kvp {

std::shared_ptr<Model> Model::from_checkpoint(const Checkpoint& ckpt, DType dtype) {
  auto m = std::make_shared<Model>();
  m->path = ckpt.path;
  m->format = ckpt.format;
  m->config = ckpt.config;
  m->dtype = dtype;
  m->weights = build_weights(ckpt, dtype);
  const ModelConfig& c = ckpt.config;
  RopeScalingSpec rs;
  rs.type = c.rope_scaling == ModelConfig::RopeScaling::Linear        ? RopeScalingSpec::Type::Linear
            : c.rope_scaling == ModelConfig::RopeScaling::Llama3      ? RopeScalingSpec::Type::Llama3
            : c.rope_scaling == ModelConfig::RopeScaling::FreqFactors ? RopeScalingSpec::Type::FreqFactors
            : c.rope_scaling == ModelConfig::RopeScaling::Yarn        ? RopeScalingSpec::Type::Yarn
            : c.rope_scaling == ModelConfig::RopeScaling::LongRope    ? RopeScalingSpec::Type::LongRope
                                                                      : RopeScalingSpec::Type::None;
  rs.factor = c.rope_factor;
  rs.low_freq_factor = c.rope_low_freq_factor;
  rs.high_freq_factor = c.rope_high_freq_factor;
  rs.original_max_pos = c.rope_original_max_pos;
  rs.freq_factors = c.rope_freq_factors;
  rs.beta_fast = c.rope_yarn_beta_fast;
  rs.beta_slow = c.rope_yarn_beta_slow;
  rs.truncate = c.rope_yarn_truncate;
  rs.attention_factor = c.rope_attention_factor;
  rs.short_factors = c.rope_short_factors;
  rs.long_factors = c.rope_long_factors;
  const RopeRounding rounding = c.rope_rounds_once() ? RopeRounding::Once : RopeRounding::Terms;
  // q and k rotate in the halves layout after a llama2.c/GGUF-llama file's adjacent pairs are
  // read; those files' rotation covers the whole head.
  if (c.rotated_dims() != c.head_dim && m->weights.qk_layout == RopeLayout::Interleaved)
    fail("{}: a partial rotary factor ({} of {} dimensions) on q/k rows in interleaved pairs is not supported",
         c.source, c.rotated_dims(), c.head_dim);
  m->rope = RopeTable(c.head_dim, c.max_seq_len, c.rope_theta, rs, false, rounding, c.rotated_dims());
  if (c.rope_local_theta > 0.0f)
    m->rope_local =
        RopeTable(c.head_dim, c.max_seq_len, c.rope_local_theta, {}, false, rounding, c.rotated_dims());
  if (!c.nope_layers.empty()) m->rope_none = RopeTable::identity(c.head_dim, c.max_seq_len);
  m->vocab = ckpt.vocab;
  m->tokenizer_path = ckpt.tokenizer_path;
  m->chat_template = ckpt.chat_template;
  return m;
}

std::shared_ptr<Model> Model::load(const std::string& path, DType dtype) {
  return from_checkpoint(open_checkpoint(path), dtype);
}

}  // namespace kvp
