#include "model/quant_recipe.h"

#include <cstdio>

namespace kvp {
namespace {

// llama.cpp's file types (llama_ftype) that kvparity writes, with their base format.
struct FileType {
  const char* name;
  QuantType base;
  unsigned file_type;
};

constexpr FileType kFileTypes[] = {
    {"Q4_0", QuantType::Q4_0, 2},      {"Q4_1", QuantType::Q4_1, 3},      {"Q8_0", QuantType::Q8_0, 7},
    {"Q5_0", QuantType::Q5_0, 8},      {"Q5_1", QuantType::Q5_1, 9},      {"Q2_K", QuantType::Q2_K, 10},
    {"Q3_K_S", QuantType::Q3_K, 11},   {"Q3_K_M", QuantType::Q3_K, 12},   {"Q3_K_L", QuantType::Q3_K, 13},
    {"Q4_K_S", QuantType::Q4_K, 14},   {"Q4_K_M", QuantType::Q4_K, 15},   {"Q5_K_S", QuantType::Q5_K, 16},
    {"Q5_K_M", QuantType::Q5_K, 17},   {"Q6_K", QuantType::Q6_K, 18},     {"Q2_K_S", QuantType::Q2_K, 21},
    {"IQ4_NL", QuantType::IQ4_NL, 25}, {"IQ4_XS", QuantType::IQ4_XS, 30},
    // LLAMA_FTYPE_MOSTLY_MXFP4_MOE: the experts in MXFP4, every other matrix Q8_0 (mixed_type).
    {"MXFP4_MOE", QuantType::MXFP4, 38},
};

// The formats without a file type of their own: written pure, recorded as the file type of the
// mix they are the base of.
unsigned pure_file_type(QuantType q) {
  switch (q) {
    case QuantType::Q3_K: return 12;
    case QuantType::Q4_K: return 15;
    case QuantType::Q5_K: return 17;
    case QuantType::MXFP4: return 38;
    default:
      return 0;
  }
}

const FileType* find_file_type(const std::string& name) {
  for (const auto& f : kFileTypes)
    if (name == f.name) return &f;
  return nullptr;
}

// llama.cpp's choice of layers that get more bits: the first and last eighth, and every third
// layer in between.
bool use_more_bits(int layer, int n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

int layer_of(const std::string& tensor) {
  int layer = -1;
  return std::sscanf(tensor.c_str(), "model.layers.%d.", &layer) == 1 ? layer : -1;
}

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

bool fits(QuantType q, long cols) { return cols % long(block_elems(q)) == 0; }

// A routed expert's matrix: Mixtral's block_sparse_moe.experts.{e}.w1 and Qwen-MoE's / OLMoE's
// mlp.experts.{e}.gate_proj (model/moe_names.h), and the stacked GGUF name without the index.
// Qwen2-MoE's shared expert (mlp.shared_expert.*) is not one: llama.cpp's ffn_*_shexp are 2-D.
bool is_expert(const std::string& tensor) { return has(tensor, ".experts."); }

// llama_tensor_get_type's rules for the file type `ft` (llama.cpp's names: output = lm_head, or
// the token embedding when tied; attn_v = v_proj, ffn_down = down_proj, attn_output = o_proj,
// attn_qkv = Phi-3's qkv_proj).
QuantType mixed_type(const std::string& ft, QuantType base, const std::string& tensor, const QuantShape& s, long cols) {
  // llama.cpp gives MXFP4 to the 3-D expert tensors (ffn_{gate,up,down}_exps) and its default
  // Q8_0 to everything else, the output matrix and a dense model's every matrix included.
  if (ft == "MXFP4_MOE") return is_expert(tensor) ? base : QuantType::Q8_0;
  const bool output = tensor == "lm_head.weight" || (s.tied_output && tensor == "model.embed_tokens.weight");
  if (output) {
    if (!fits(base, cols)) return QuantType::Q8_0;
    return base == QuantType::Q8_0 ? QuantType::Q8_0 : QuantType::Q6_K;
  }
  const int layer = layer_of(tensor), n = s.n_layers;
  if (layer < 0) return base;  // the token embedding, untied
  const bool wide_gqa = s.n_gqa >= 4;
  if (has(tensor, "qkv_proj")) {  // Phi-3's fused attn_qkv (before v_proj, which its name holds)
    if (ft == "Q3_K_M" || ft == "Q3_K_L") return QuantType::Q4_K;
    if (ft == "Q4_K_M") return QuantType::Q5_K;
    if (ft == "Q5_K_M") return QuantType::Q6_K;
    return base;
  }
  if (has(tensor, "v_proj")) {
    if (ft == "Q2_K") return wide_gqa ? QuantType::Q4_K : QuantType::Q3_K;
    if (ft == "Q2_K_S") return wide_gqa ? QuantType::Q4_K : base;
    if (ft == "Q3_K_M") return layer < 2 ? QuantType::Q5_K : QuantType::Q4_K;
    if (ft == "Q3_K_L") return QuantType::Q5_K;
    if (ft == "IQ4_NL" || ft == "IQ4_XS") return wide_gqa ? QuantType::Q5_K : base;
    if (ft == "Q4_K_M" || ft == "Q5_K_M") return use_more_bits(layer, n) ? QuantType::Q6_K : base;
    if (ft == "Q4_K_S") return layer < 4 ? QuantType::Q5_K : base;
    return base;
  }
  if (has(tensor, "down_proj") || has(tensor, ".w2.")) {  // Mixtral's experts name down_proj w2
    if (ft == "Q2_K") return QuantType::Q3_K;
    if (ft == "Q2_K_S") return layer < n / 8 ? QuantType::Q4_K : base;
    if (ft == "Q3_K_M") return layer < n / 16 ? QuantType::Q5_K : QuantType::Q4_K;
    if (ft == "Q3_K_L") return QuantType::Q5_K;
    if (ft == "Q4_K_M" || ft == "Q5_K_M") return use_more_bits(layer, n) ? QuantType::Q6_K : base;
    if (ft == "IQ4_NL" || ft == "IQ4_XS" || ft == "Q4_K_S") return layer < n / 8 ? QuantType::Q5_K : base;
    return base;
  }
  if (has(tensor, "o_proj")) {
    if (ft == "Q2_K") return QuantType::Q3_K;
    if (ft == "Q3_K_M") return QuantType::Q4_K;
    if (ft == "Q3_K_L") return QuantType::Q5_K;
  }
  return base;
}

// llama.cpp's replacement for a type whose blocks do not divide the rows.
QuantType fallback(QuantType q) {
  switch (q) {
    case QuantType::Q2_K:
    case QuantType::Q3_K:
    case QuantType::IQ4_XS:
      return QuantType::IQ4_NL;
    case QuantType::Q4_K:
      return QuantType::Q5_0;
    case QuantType::Q5_K:
      return QuantType::Q5_1;
    case QuantType::Q6_K:
      return QuantType::Q8_0;
    default:
      return QuantType::None;
  }
}

}  // namespace

std::optional<QuantRecipe> parse_quant_recipe(const std::string& name, bool pure) {
  std::string up;
  for (char ch : name) up += char(ch >= 'a' && ch <= 'z' ? ch - 'a' + 'A' : ch);
  if (const FileType* f = find_file_type(up)) return QuantRecipe{up, f->base, f->file_type, pure};
  if (auto q = parse_quant(up)) return QuantRecipe{up, *q, pure_file_type(*q), true};
  return std::nullopt;
}

std::vector<std::string> quant_recipe_names() {
  std::vector<std::string> v;
  for (int i = 1; i <= int(kLastQuantType); ++i) v.emplace_back(quant_name(QuantType(i)));
  for (const auto& f : kFileTypes)
    if (!parse_quant(f.name)) v.emplace_back(f.name);
  return v;
}

QuantType quant_for_tensor(const QuantRecipe& r, const std::string& tensor, const QuantShape& shape, long cols) {
  const QuantType q = r.pure ? r.base : mixed_type(r.name, r.base, tensor, shape, cols);
  if (fits(q, cols)) return q;
  const QuantType f = fallback(q);
  return f != QuantType::None && fits(f, cols) ? f : QuantType::None;
}

}  // namespace kvp
