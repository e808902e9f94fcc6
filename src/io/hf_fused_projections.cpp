#include "io/hf_fused_projections.h"

#include <fmt/ranges.h>

#include <utility>
#include <vector>

#include "core/error.h"

namespace kvp {

namespace {

// Replaces ck.tensors[fused] by views of its row ranges, named `parts` (name, rows), in order.
void split_rows(Checkpoint& ck, const std::string& fused, const std::vector<std::pair<std::string, int64_t>>& parts,
                int64_t cols) {
  const auto it = ck.tensors.find(fused);
  if (it == ck.tensors.end()) return;
  const TensorView t = it->second;
  int64_t rows = 0;
  for (const auto& [name, n] : parts) rows += n;
  const std::vector<int64_t> want{rows, cols};
  if (t.shape != want)
    fail("{}: tensor '{}' has shape [{}]; the config makes it [{}]", ck.path, fused, fmt::join(t.shape, ", "),
         fmt::join(want, ", "));
  int64_t row0 = 0;
  for (const auto& [name, n] : parts) {
    if (ck.tensors.count(name)) fail("{}: '{}' and '{}' are both there; a layer has one or the other", ck.path, fused, name);
    ck.tensors[name] = row_slice(t, row0, n, name);
    row0 += n;
  }
  ck.tensors.erase(fused);
}

}  // namespace

void split_fused_projections(Checkpoint& ck) {
  const ModelConfig& c = ck.config;
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* bias : {"self_attn.qkv_proj.bias", "mlp.gate_up_proj.bias"})
      if (ck.tensors.count(p + bias)) fail("{}: tensor '{}{}': biases on fused projections are not supported", ck.path, p, bias);
    split_rows(ck, p + "self_attn.qkv_proj.weight",
               {{p + "self_attn.q_proj.weight", c.q_dim()},
                {p + "self_attn.k_proj.weight", c.kv_dim()},
                {p + "self_attn.v_proj.weight", c.kv_dim()}},
               c.dim);
    split_rows(ck, p + "mlp.gate_up_proj.weight",
               {{p + "mlp.gate_proj.weight", c.hidden_dim}, {p + "mlp.up_proj.weight", c.hidden_dim}}, c.dim);
  }
}

}  // namespace kvp
