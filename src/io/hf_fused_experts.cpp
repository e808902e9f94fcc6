#include "io/hf_fused_experts.h"

#include <fmt/ranges.h>

#include "core/error.h"
#include "model/moe_names.h"

namespace kvp {

namespace {

// The fused tensor `name` of shape [experts, rows, cols], checked; nullptr when absent.
const TensorView* fused(const Checkpoint& ck, const std::string& name, int64_t experts, int64_t rows, int64_t cols) {
  const auto it = ck.tensors.find(name);
  if (it == ck.tensors.end()) return nullptr;
  const TensorView& t = it->second;
  const std::vector<int64_t> want{experts, rows, cols};
  if (t.shape != want)
    fail("{}: tensor '{}' has shape [{}]; the config's experts make it [{}]", ck.path, name, fmt::join(t.shape, ", "),
         fmt::join(want, ", "));
  if (t.quantized()) fail("{}: tensor '{}' is quantised; fused experts are read from safetensors only", ck.path, name);
  return &t;
}

}  // namespace

void split_fused_experts(Checkpoint& ck) {
  const ModelConfig& c = ck.config;
  if (!c.is_moe() || c.arch == Arch::GptOss) return;  // GPT-OSS's own layout: hf_gpt_oss_experts.h
  const int64_t E = c.moe.n_experts, I = c.moe.expert_hidden_dim, H = c.dim;
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".mlp.";
    const std::string gu_name = p + "experts.gate_up_proj", down_name = p + "experts.down_proj";
    const TensorView* gu = fused(ck, gu_name, E, 2 * I, H);
    const TensorView* down = fused(ck, down_name, E, H, I);
    if (gu == nullptr && down == nullptr) continue;
    if (gu == nullptr || down == nullptr)
      fail("{}: tensor '{}' has no '{}' beside it (a layer's fused experts come as both)", ck.path,
           gu ? gu_name : down_name, gu ? down_name : gu_name);
    if (!c.moe_layer(l)) fail("{}: tensor '{}' is in layer {}, which the config makes dense", ck.path, gu_name, l);
    std::vector<TensorView> views;
    auto slice = [&](const TensorView& t, int e, int64_t row0, int64_t rows, ExpertMatrix m) {
      TensorView v = row_slice(t, e * t.shape[1] + row0, rows, expert_matrix_name(c, l, e, m));
      if (ck.tensors.count(v.name)) fail("{}: layer {} has both '{}' and '{}'", ck.path, l, t.name, v.name);
      views.push_back(std::move(v));
    };
    for (int e = 0; e < E; ++e) {
      slice(*gu, e, 0, I, ExpertMatrix::Gate);
      slice(*gu, e, I, I, ExpertMatrix::Up);
      slice(*down, e, 0, H, ExpertMatrix::Down);
    }
    // v5's router sits at mlp.gate for Mixtral too (block_sparse_moe renamed).
    const std::string router = moe_router_name(c, l), v5_router = p + "gate.weight";
    if (router != v5_router && ck.tensors.count(v5_router)) {
      if (ck.tensors.count(router)) fail("{}: layer {} has both '{}' and '{}'", ck.path, l, v5_router, router);
      TensorView r = ck.tensors.at(v5_router);
      r.name = router;
      ck.tensors.erase(v5_router);
      ck.tensors[router] = std::move(r);
    }
    ck.tensors.erase(gu_name);
    ck.tensors.erase(down_name);
    for (TensorView& v : views) ck.tensors[v.name] = std::move(v);
  }
}

}  // namespace kvp
