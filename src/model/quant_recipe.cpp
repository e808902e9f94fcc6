#include "model/quant_recipe.h"

#include <cstdio>

namespace kvp {
namespace {

struct Mix {
  const char* name;
  QuantType base;
  unsigned file_type;
  QuantType output;     // lm_head / tied embedding when written as output
  QuantType more_bits;  // attn_v and ffn_down in the layers use_more_bits picks (None: base)
  QuantType attn_out;   // attn_output (None: base)
};

constexpr Mix kMixes[] = {
    {"Q3_K_S", QuantType::Q3_K, 11, QuantType::Q6_K, QuantType::None, QuantType::None},
    {"Q3_K_M", QuantType::Q3_K, 12, QuantType::Q6_K, QuantType::Q4_K, QuantType::Q4_K},
    {"Q3_K_L", QuantType::Q3_K, 13, QuantType::Q6_K, QuantType::Q5_K, QuantType::Q5_K},
    {"Q4_K_S", QuantType::Q4_K, 14, QuantType::Q6_K, QuantType::None, QuantType::None},
    {"Q4_K_M", QuantType::Q4_K, 15, QuantType::Q6_K, QuantType::Q6_K, QuantType::None},
    {"Q5_K_S", QuantType::Q5_K, 16, QuantType::Q6_K, QuantType::None, QuantType::None},
    {"Q5_K_M", QuantType::Q5_K, 17, QuantType::Q6_K, QuantType::Q6_K, QuantType::None},
};

// llama_ftype of an all-one-format file.
unsigned single_file_type(QuantType q) {
  switch (q) {
    case QuantType::Q4_0: return 2;
    case QuantType::Q4_1: return 3;
    case QuantType::Q8_0: return 7;
    case QuantType::Q5_0: return 8;
    case QuantType::Q5_1: return 9;
    case QuantType::Q2_K: return 10;
    case QuantType::Q3_K: return 12;
    case QuantType::Q4_K: return 15;
    case QuantType::Q5_K: return 17;
    case QuantType::Q6_K: return 18;
    case QuantType::IQ4_NL:
      return 25;
    case QuantType::IQ4_XS:
      return 30;
    case QuantType::None: return 0;
  }
  return 0;
}

const Mix* find_mix(const std::string& name) {
  for (const auto& m : kMixes)
    if (name == m.name) return &m;
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

}  // namespace

std::optional<QuantRecipe> parse_quant_recipe(const std::string& name) {
  std::string up;
  for (char ch : name) up += char(ch >= 'a' && ch <= 'z' ? ch - 'a' + 'A' : ch);
  if (const Mix* m = find_mix(up)) return QuantRecipe{up, m->base, m->file_type};
  if (auto q = parse_quant(up)) return QuantRecipe{up, *q, single_file_type(*q)};
  return std::nullopt;
}

std::vector<std::string> quant_recipe_names() {
  std::vector<std::string> v;
  for (int i = 1; i <= int(kLastQuantType); ++i) v.emplace_back(quant_name(QuantType(i)));
  for (const auto& m : kMixes) v.emplace_back(m.name);
  return v;
}

QuantType quant_for_tensor(const QuantRecipe& r, const std::string& tensor, int n_layers, long cols) {
  QuantType q = r.base;
  if (const Mix* m = find_mix(r.name)) {
    const int layer = layer_of(tensor);
    if (tensor == "lm_head.weight") {
      q = m->output;
    } else if (layer >= 0 && m->more_bits != QuantType::None && (has(tensor, "v_proj") || has(tensor, "down_proj")) &&
               use_more_bits(layer, n_layers)) {
      q = m->more_bits;
    } else if (layer >= 0 && m->attn_out != QuantType::None && has(tensor, "o_proj")) {
      q = m->attn_out;
    }
  }
  if (cols % long(block_elems(q)) == 0) return q;
  // Rows too short for 256-weight blocks: IQ4_XS's 32-weight sibling, as llama.cpp falls back.
  if (q == QuantType::IQ4_XS && cols % 32 == 0) return QuantType::IQ4_NL;
  return cols % 32 == 0 ? QuantType::Q8_0 : QuantType::None;
}

}  // namespace kvp
