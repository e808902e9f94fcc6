#pragma once
// config.json's rope_scaling: which types each family takes, how they are read into ModelConfig,
// and the entry written back. After read_rope_parameters (hf_rope_parameters.h), a v5
// `rope_parameters` dict is in this form too.
//
// YaRN is read as transformers v5's _compute_yarn_parameters takes it: `factor` as given (or, when
// absent, max_position_embeddings / original_max_position_embeddings), original_max_position_
// embeddings defaulting to max_position_embeddings, attention_factor as given or derived from
// factor (0.1 ln(factor) + 1, or DeepSeek's mscale / mscale_all_dim ratio), beta_fast 32 and
// beta_slow 1 unless given (a 0 or null means the default, as `or` reads them), truncate true.
// transformers v4.45-v4.57 replaced a given factor by that ratio whenever
// original_max_position_embeddings was present; the two agree for the published checkpoints
// (OLMo-3: 65536 / 8192 = 8).
#include <string>
#include <nlohmann/json.hpp>

#include "model/config.h"

namespace kvp {

// Whether family `arch` (the attention's, for a mixture of experts) takes rope_scaling type `type`
// ("default" counts as none).
bool hf_rope_scaling_supported(Arch arch, const std::string& type);

// Reads rope_scaling `rs` of type `type` (one hf_rope_scaling_supported accepts) into c, whose
// max_seq_len is already read. `field`: where the file gave it, for errors ("rope_scaling" or
// "rope_parameters[...]").
void read_hf_rope_scaling(const nlohmann::json& rs, const std::string& type, ModelConfig& c,
                          const std::string& source, const std::string& field);

// config.json's rope_scaling for c: null when unscaled; fails, naming `path`, for a scaling with no
// config.json form (llama.cpp's per-frequency divisors).
nlohmann::json hf_rope_scaling_entry(const ModelConfig& c, const std::string& path);

}  // namespace kvp
