#include "io/hf_rope_scaling.h"

#include <cmath>

#include "core/error.h"

namespace kvp {

using nlohmann::json;

namespace {

// A float field as the shortest decimal that reads back to the same float.
double float_json(float f) { return std::stod(fmt::format("{}", f)); }

// transformers' get_mscale: 1 for a factor up to 1, else 0.1 * mscale * ln(factor) + 1 (Python floats).
double yarn_mscale(double factor, double mscale) { return factor <= 1.0 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0; }

}  // namespace

bool hf_rope_scaling_supported(Arch arch, const std::string& type) {
  if (type == "default") return true;
  // Gemma-2's rotary embedding takes no scaling in the transformers kvparity follows; Gemma-3's global
  // layers take linear only (its checkpoints').
  if (arch == Arch::Gemma2) return false;
  if (arch == Arch::Gemma3) return type == "linear";
  return type == "linear" || type == "llama3" || type == "yarn";
}

void read_hf_rope_scaling(const json& rs, const std::string& type, ModelConfig& c, const std::string& source,
                          const std::string& field) {
  auto present = [&](const char* k) { return rs.contains(k) && !rs[k].is_null(); };
  auto num = [&](const char* k) -> double {
    if (!present(k) || !rs[k].is_number())
      fail("{}: rope_scaling type '{}' needs a number '{}' (config.json field {}.{})", source, type, k, field, k);
    return rs[k].get<double>();
  };
  auto num_or = [&](const char* k, double dflt) { return present(k) ? num(k) : dflt; };
  if (type == "linear") {
    c.rope_scaling = ModelConfig::RopeScaling::Linear;
    c.rope_factor = float(num("factor"));
  } else if (type == "llama3") {
    c.rope_scaling = ModelConfig::RopeScaling::Llama3;
    c.rope_factor = float(num("factor"));
    c.rope_low_freq_factor = float(num("low_freq_factor"));
    c.rope_high_freq_factor = float(num("high_freq_factor"));
    c.rope_original_max_pos = int(num("original_max_position_embeddings"));
  } else if (type == "yarn") {
    c.rope_scaling = ModelConfig::RopeScaling::Yarn;
    const double orig = num_or("original_max_position_embeddings", double(c.max_seq_len));
    if (!(orig >= 1.0 && orig <= double(1 << 24)) || orig != std::floor(orig))
      fail("{}: rope_scaling original_max_position_embeddings = {} must be a positive integer (config.json field "
           "{}.original_max_position_embeddings)",
           source, orig, field);
    c.rope_original_max_pos = int(orig);
    const double factor = num_or("factor", double(c.max_seq_len) / orig);
    if (!(factor > 0.0) || !std::isfinite(factor))
      fail("{}: rope_scaling factor = {} must be a positive number (config.json field {}.factor)", source, factor, field);
    c.rope_factor = float(factor);
    if (present("attention_factor")) {
      c.rope_attention_factor = num("attention_factor");
    } else {
      const double mscale = num_or("mscale", 0.0), all = num_or("mscale_all_dim", 0.0);
      c.rope_attention_factor = mscale != 0.0 && all != 0.0 ? yarn_mscale(factor, mscale) / yarn_mscale(factor, all)
                                                            : yarn_mscale(factor, 1.0);
    }
    // `rope_scaling.get("beta_fast") or 32`: a 0 is the default too.
    const double fast = num_or("beta_fast", 0.0), slow = num_or("beta_slow", 0.0);
    c.rope_yarn_beta_fast = fast != 0.0 ? fast : 32.0;
    c.rope_yarn_beta_slow = slow != 0.0 ? slow : 1.0;
    if (present("truncate")) {
      if (!rs["truncate"].is_boolean())
        fail("{}: rope_scaling truncate must be true or false, got {} (config.json field {}.truncate)", source,
             rs["truncate"].dump(), field);
      c.rope_yarn_truncate = rs["truncate"].get<bool>();
    }
  }
}

json hf_rope_scaling_entry(const ModelConfig& c, const std::string& path) {
  switch (c.rope_scaling) {
    case ModelConfig::RopeScaling::None: return nullptr;
    case ModelConfig::RopeScaling::Linear: return {{"rope_type", "linear"}, {"factor", float_json(c.rope_factor)}};
    case ModelConfig::RopeScaling::Llama3:
      return {{"rope_type", "llama3"},
              {"factor", float_json(c.rope_factor)},
              {"low_freq_factor", float_json(c.rope_low_freq_factor)},
              {"high_freq_factor", float_json(c.rope_high_freq_factor)},
              {"original_max_position_embeddings", c.rope_original_max_pos}};
    case ModelConfig::RopeScaling::Yarn: {
      json e = {{"rope_type", "yarn"},
                {"factor", float_json(c.rope_factor)},
                {"original_max_position_embeddings", c.rope_original_max_pos},
                {"attention_factor", c.rope_attention_factor},
                {"beta_fast", c.rope_yarn_beta_fast},
                {"beta_slow", c.rope_yarn_beta_slow}};
      if (!c.rope_yarn_truncate) e["truncate"] = false;
      return e;
    }
    case ModelConfig::RopeScaling::FreqFactors:
      fail("{}: RoPE frequency factors (GGUF rope_freqs.weight) have no config.json form", path);
    case ModelConfig::RopeScaling::LongRope:
      // Only Phi3ForCausalLM's config says longrope, and it needs its fused projections.
      fail("{}: longrope has a config.json form only as Phi3ForCausalLM, which kvparity does not write", path);
  }
  return nullptr;
}

}  // namespace kvp
