#pragma once
// Which quantised format each tensor gets when `convert`/`synth` write a quantised GGUF. A name
// that llama.cpp's `llama-quantize` takes as a file type (Q4_0, Q8_0, Q2_K, Q3_K_M, Q4_K_M,
// IQ4_XS, ...) follows llama.cpp's own choice per tensor (llama_tensor_get_type for Llama-family
// models without an importance matrix): more bits for the output matrix and, depending on the
// type, for attn_v / ffn_down / attn_output in some layers; rows that a type's blocks do not
// divide take llama.cpp's fallback type. Q3_K, Q4_K and Q5_K (no llama.cpp file type of their
// own), and any name with `pure`, put every matrix in the one format, as `llama-quantize --pure`.
// MXFP4_MOE puts a mixture's experts in MXFP4 and every other matrix in Q8_0 (a dense model's all
// Q8_0); MXFP4 alone is every matrix in MXFP4.
// Vectors (norm gains, biases) stay F32, as llama.cpp keeps them.
#include <optional>
#include <string>
#include <vector>

#include "core/quant.h"

namespace kvp {

struct QuantRecipe {
  std::string name;  // upper-cased: "Q8_0", "Q4_K_M", ...
  QuantType base = QuantType::None;
  // llama_ftype value recorded as general.file_type (informational for llama.cpp).
  unsigned file_type = 0;
  bool pure = false;  // every matrix in `base` (rows it cannot hold excepted)
};

// Recognised names: every QuantType name, plus Q2_K_S, Q3_K_S/M/L, Q4_K_S/M, Q5_K_S/M and
// MXFP4_MOE. nullopt otherwise. `pure` asks for every matrix in the one format.
std::optional<QuantRecipe> parse_quant_recipe(const std::string& name, bool pure = false);
std::vector<std::string> quant_recipe_names();

// What the recipe needs of the model: its depth, how many query heads share a KV head, and
// whether the output matrix is the token embedding (no lm_head.weight).
struct QuantShape {
  int n_layers = 0;
  int n_gqa = 1;
  bool tied_output = false;
};

// The format of the matrix with HF name `tensor` ([rows, cols]). Rows whose length is not a whole
// number of the format's blocks take llama.cpp's fallback (Q2_K, Q3_K, IQ4_XS -> IQ4_NL; Q4_K ->
// Q5_0; Q5_K -> Q5_1; Q6_K -> Q8_0), or None (keep the float dtype) when even that does not fit.
QuantType quant_for_tensor(const QuantRecipe& r, const std::string& tensor, const QuantShape& shape, long cols);

}  // namespace kvp
