#pragma once
// Which quantised format each tensor gets when `convert`/`synth` write a quantised GGUF: a single
// format for every matrix (--quant Q8_0), or one of llama.cpp's mixed recipes (--quant Q4_K_M),
// whose rule of thumb is to spend more bits where errors hurt most (the output matrix, and
// attn_v / ffn_down in some layers). Vectors (norm gains, biases) stay F32, as llama.cpp keeps them.
#include <optional>
#include <string>
#include <vector>

#include "core/quant.h"

namespace kvp {

struct QuantRecipe {
  std::string name;  // as given: "Q8_0", "Q4_K_M", ...
  QuantType base = QuantType::None;
  // llama_ftype value recorded as general.file_type (informational for llama.cpp).
  unsigned file_type = 0;
};

// Recognised names: every QuantType name, plus Q3_K_S/M/L, Q4_K_S/M, Q5_K_S/M. nullopt otherwise.
std::optional<QuantRecipe> parse_quant_recipe(const std::string& name);
std::vector<std::string> quant_recipe_names();

// The format of the matrix with HF name `tensor` ([rows, cols]) in a model of n_layers layers.
// Rows whose length is not a whole number of the format's blocks fall back to Q8_0 (32-value
// blocks), or to None (keep the float dtype) when even that does not divide them.
QuantType quant_for_tensor(const QuantRecipe& r, const std::string& tensor, int n_layers, long cols);

}  // namespace kvp
