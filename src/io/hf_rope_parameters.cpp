#include "io/hf_rope_parameters.h"

#include "core/error.h"

namespace kvp {

using nlohmann::json;

namespace {

const json& object_field(const json& parent, const char* key, const std::string& field, const std::string& source) {
  static const json kEmpty = json::object();
  if (!parent.contains(key) || parent[key].is_null()) return kEmpty;
  if (!parent[key].is_object())
    fail("{}: field '{}' must be a JSON object, got {}", source, field, parent[key].dump());
  return parent[key];
}

std::string rope_type(const json& params) {
  for (const char* k : {"rope_type", "type"})
    if (params.contains(k) && params[k].is_string()) return params[k].get<std::string>();
  return "default";
}

// The dict's base into j["rope_theta"] (a number, or absent: the family's default).
void take_theta(const json& params, const char* into, json& j, const std::string& field, const std::string& source) {
  if (!params.contains("rope_theta") || params["rope_theta"].is_null()) return;
  if (!params["rope_theta"].is_number())
    fail("{}: field '{}.rope_theta' must be a number, got {}", source, field, params["rope_theta"].dump());
  j[into] = params["rope_theta"];
}

}  // namespace

std::string read_rope_parameters(json& j, bool per_layer_kinds, const std::string& source) {
  if (!j.contains("rope_parameters")) return "rope_scaling";
  const json rp = j["rope_parameters"];
  j.erase("rope_parameters");
  if (rp.is_null()) return "rope_scaling";
  if (!rp.is_object()) fail("{}: field 'rope_parameters' must be a JSON object, got {}", source, rp.dump());
  // v5 replaces the dict by a rope_scaling that is given (older tools write both).
  if (j.contains("rope_scaling") && j["rope_scaling"].is_object() && !j["rope_scaling"].empty()) return "rope_scaling";
  json flat = rp;
  std::string field = "rope_parameters";
  if (rp.contains("full_attention") || rp.contains("sliding_attention")) {
    if (!per_layer_kinds)
      fail("{}: RoPE parameters per layer kind are not supported for this family (config.json field rope_parameters)",
           source);
    for (auto it = rp.begin(); it != rp.end(); ++it) {
      if (it.key() == "full_attention" || it.key() == "sliding_attention") continue;
      // Some v5 writers leave the flat keys' defaults beside the per-kind dicts.
      const bool inert = it.value().is_null() || (it.key() == "rope_type" && it.value() == "default");
      if (!inert)
        fail("{}: field 'rope_parameters.{}' beside per-layer-kind entries is not supported", source, it.key());
    }
    const json& local = object_field(rp, "sliding_attention", "rope_parameters.sliding_attention", source);
    if (rope_type(local) != "default")
      fail("{}: a scaled RoPE ('{}') on the sliding-window layers is not supported (config.json field "
           "rope_parameters.sliding_attention)",
           source, rope_type(local));
    take_theta(local, "rope_local_base_freq", j, "rope_parameters.sliding_attention", source);
    field = "rope_parameters.full_attention";
    flat = object_field(rp, "full_attention", field, source);
  }
  take_theta(flat, "rope_theta", j, field, source);
  flat.erase("rope_theta");
  // v5 keeps partial_rotary_factor in the dict; the config's own field is where the families read it.
  if (flat.contains("partial_rotary_factor")) {
    const json prf = flat["partial_rotary_factor"];
    flat.erase("partial_rotary_factor");
    if (j.contains("partial_rotary_factor") && !j["partial_rotary_factor"].is_null() && j["partial_rotary_factor"] != prf)
      fail("{}: partial_rotary_factor {} and {}.partial_rotary_factor {} disagree", source,
           j["partial_rotary_factor"].dump(), field, prf.dump());
    if (!prf.is_null()) j["partial_rotary_factor"] = prf;
  }
  if (rope_type(flat) == "default")
    j.erase("rope_scaling");
  else
    j["rope_scaling"] = flat;
  return field;
}

}  // namespace kvp
