#include "io/hf_phi3.h"

#include <cmath>
#include <fmt/format.h>

#include "core/error.h"
#include "model/config.h"

namespace kvp {

using nlohmann::json;

namespace {

bool given(const json& o, const char* k) { return o.is_object() && o.contains(k) && !o[k].is_null(); }

std::string type_of(const json& rs) {
  for (const char* k : {"rope_type", "type"})
    if (given(rs, k) && rs[k].is_string()) return rs[k].get<std::string>();
  return "";
}

int positive_int(const json& v, const std::string& source, const std::string& field) {
  if (!v.is_number() || !(v.get<double>() >= 1.0 && v.get<double>() <= double(1 << 30)) ||
      v.get<double>() != std::floor(v.get<double>()))
    fail("{}: {} must be a positive integer, got {} (config.json field {})", source, field, v.dump(), field);
  return int(v.get<double>());
}

std::vector<float> factors(const json& rs, const char* key, const std::string& source, const std::string& field) {
  if (!given(rs, key) || !rs[key].is_array())
    fail("{}: rope_scaling type 'longrope' needs a list of numbers '{}' (config.json field {}.{})", source, key, field,
         key);
  std::vector<float> out;
  for (const json& v : rs[key]) {
    if (!v.is_number())
      fail("{}: longrope {} holds {}, not a number (config.json field {}.{})", source, key, v.dump(), field, key);
    out.push_back(float(v.get<double>()));  // torch.tensor(..., dtype=torch.float32)
  }
  return out;
}

// _compute_longrope_parameters' attention factor when the config gives none.
double phi3_default_attention_factor(double factor, int original) {
  return factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(double(original)));
}

}  // namespace

Phi3Rotary take_phi3_rotary(json& j, const std::string& source) {
  Phi3Rotary r;
  if (given(j, "partial_rotary_factor")) {
    if (!j["partial_rotary_factor"].is_number())
      fail("{}: field 'partial_rotary_factor' must be a number, got {}", source, j["partial_rotary_factor"].dump());
    r.partial_rotary_factor = j["partial_rotary_factor"].get<double>();
    j.erase("partial_rotary_factor");
  }
  if (given(j, "original_max_position_embeddings")) r.original_max = j["original_max_position_embeddings"];
  if (given(j, "rope_scaling")) {
    json& rs = j["rope_scaling"];
    // Phi3Config's _rope_scaling_adjustment: a "type" of "su" or "yarn" (early Phi-3 configs) is
    // longrope.
    const bool renamed = rs.is_object() && given(rs, "type") && !given(rs, "rope_type") &&
                         (rs["type"] == "su" || rs["type"] == "yarn");
    if (renamed) rs["type"] = "longrope";
    if (type_of(rs) == "longrope") {
      r.longrope = rs;
      j.erase("rope_scaling");
    }
  }
  return r;
}

void apply_phi3_rotary(const Phi3Rotary& r, ModelConfig& c, const std::string& source, const std::string& rope_field) {
  const double prf = r.partial_rotary_factor;
  if (!(prf > 0.0 && prf <= 1.0))
    fail("{}: partial_rotary_factor = {} must be in (0, 1] (config.json field partial_rotary_factor)", source, prf);
  const int dim = int(double(c.head_dim) * prf);  // int(head_dim * partial_rotary_factor)
  if (dim < 2 || dim % 2 != 0)
    fail("{}: partial_rotary_factor {} rotates {} of a head's {} dimensions; an even number is needed (config.json "
         "field partial_rotary_factor)",
         source, prf, dim, c.head_dim);
  c.rotary_dim = dim == c.head_dim ? 0 : dim;
  if (r.longrope.is_null()) return;
  const json& rs = r.longrope;
  const std::string& f = rope_field;
  c.rope_scaling = ModelConfig::RopeScaling::LongRope;
  c.rope_short_factors = factors(rs, "short_factor", source, f);
  c.rope_long_factors = factors(rs, "long_factor", source, f);
  int orig = 4096;  // Phi3Config's default
  if (given(rs, "original_max_position_embeddings")) {
    orig = positive_int(rs["original_max_position_embeddings"], source, f + ".original_max_position_embeddings");
    if (!r.original_max.is_null() &&
        positive_int(r.original_max, source, "original_max_position_embeddings") != orig)
      fail("{}: original_max_position_embeddings {} and {}.original_max_position_embeddings {} disagree", source,
           r.original_max.dump(), f, orig);
  } else if (!r.original_max.is_null()) {
    orig = positive_int(r.original_max, source, "original_max_position_embeddings");
  }
  c.rope_original_max_pos = orig;
  const double ratio = double(c.max_seq_len) / double(orig);
  double factor = ratio;
  if (given(rs, "factor")) {
    if (!rs["factor"].is_number())
      fail("{}: rope_scaling factor must be a number, got {} (config.json field {}.factor)", source,
           rs["factor"].dump(), f);
    factor = rs["factor"].get<double>();
    // v5 takes the given factor, v4.45-v4.57 the ratio: a config they read apart is refused.
    if (factor != ratio)
      fail("{}: longrope factor {} is not max_position_embeddings / original_max_position_embeddings = {} / {}; "
           "transformers v4 and v5 read this config differently (config.json field {}.factor)",
           source, factor, c.max_seq_len, orig, f);
  }
  c.rope_factor = float(factor);
  if (given(rs, "attention_factor")) {
    if (!rs["attention_factor"].is_number())
      fail("{}: rope_scaling attention_factor must be a number, got {} (config.json field {}.attention_factor)",
           source, rs["attention_factor"].dump(), f);
    c.rope_attention_factor = rs["attention_factor"].get<double>();
  } else {
    c.rope_attention_factor = phi3_default_attention_factor(factor, orig);
  }
}

void write_phi3_fields(json& j, const ModelConfig& c, const std::string& path) {
  if (c.arch != Arch::Llama && c.arch != Arch::Mistral)
    fail("{}: Phi-3's rotary embedding on a {} decoder has no config.json form", path, arch_name(c.arch));
  const double prf = double(c.rotated_dims()) / double(c.head_dim);
  if (int(double(c.head_dim) * prf) != c.rotated_dims())
    fail("{}: {} rotated dimensions of {} are no partial_rotary_factor transformers reads back", path,
         c.rotated_dims(), c.head_dim);
  j["architectures"] = json::array({"Phi3ForCausalLM"});
  j["model_type"] = "phi3";
  j["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
  for (const char* k : {"mlp_bias", "pretraining_tp"}) j.erase(k);
  j["attention_bias"] = false;
  j["resid_pdrop"] = 0.0;
  j["embd_pdrop"] = 0.0;
  if (c.rotary_dim > 0) j["partial_rotary_factor"] = prf;
  if (c.rope_scaling != ModelConfig::RopeScaling::LongRope) {
    j["original_max_position_embeddings"] = c.max_seq_len;
    return;
  }
  j["original_max_position_embeddings"] = c.rope_original_max_pos;
  if (float(double(c.max_seq_len) / double(c.rope_original_max_pos)) != c.rope_factor)
    fail("{}: longrope factor {} is not max_position_embeddings / original_max_position_embeddings, which is all "
         "Phi3Config says",
         path, c.rope_factor);
  auto list = [](const std::vector<float>& f) {
    json a = json::array();
    for (float v : f) a.push_back(std::stod(fmt::format("{}", v)));  // the shortest decimal of the float
    return a;
  };
  json rs = {{"type", "longrope"}, {"short_factor", list(c.rope_short_factors)}, {"long_factor", list(c.rope_long_factors)}};
  if (c.rope_attention_factor != phi3_default_attention_factor(c.max_seq_len / double(c.rope_original_max_pos),
                                                               c.rope_original_max_pos))
    rs["attention_factor"] = c.rope_attention_factor;
  j["rope_scaling"] = rs;
}

}  // namespace kvp
