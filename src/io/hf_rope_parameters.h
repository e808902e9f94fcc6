#pragma once
// transformers v5's `rope_parameters` in config.json, read as the v4 fields it replaced.
//
// v5 writes no `rope_theta` and no `rope_scaling`: one dict holds the base and the scaling
// ({"rope_theta": 500000.0, "rope_type": "llama3", "factor": 8.0, ...}), and Gemma-3 keeps one per
// layer kind ({"full_attention": {...}, "sliding_attention": {...}}, which replaces
// `rope_local_base_freq`). A reader that knows only the v4 names runs such a file with the default
// base, silently a different model; so the dict is rewritten into those names before the config is
// read, with v5's own precedence (convert_rope_params_to_dict): a non-empty `rope_scaling` replaces
// the dict, a `rope_theta` inside it wins over one beside it.
#include <string>
#include <nlohmann/json.hpp>

namespace kvp {

// Rewrites `j`'s rope_parameters (if any) into rope_theta / rope_scaling / rope_local_base_freq and
// removes it. Returns the config.json field the RoPE scaling was given in, for errors about it:
// "rope_scaling", "rope_parameters" or "rope_parameters.full_attention". `per_layer_kinds`: whether
// the family has local layers with a base of their own (Gemma-3); the per-kind form is refused
// elsewhere, naming `source`.
std::string read_rope_parameters(nlohmann::json& j, bool per_layer_kinds, const std::string& source);

}  // namespace kvp
