#pragma once
// Named points in the forward pass where the lab can read or overwrite activations (capture,
// activation patching). The forward pass calls a hook only when one is installed, so an unused
// hook costs one pointer test per point.
#include <string_view>

namespace kvp {

enum class HookPoint {
  Embed,       // [M, dim] token embeddings (layer = -1)
  ResidPre,    // [M, dim] residual stream entering layer L
  AttnOut,     // [M, dim] attention block output (after o_proj)
  ResidMid,    // [M, dim] residual after the attention block
  MlpOut,      // [M, dim] MLP block output
  ResidPost,   // [M, dim] residual leaving layer L
  QPre,        // [M, n_heads*head_dim] queries of the new rows before RoPE (as q_proj gives them;
               // Qwen3/Gemma-3: after their per-head norms, what RoPE rotates)
  KPre,        // [M, kv_dim] keys of the new rows before RoPE (likewise)
  Q,           // [M, n_heads*head_dim] queries after RoPE, as attention reads them
  K,           // [M, kv_dim] keys of the new rows after RoPE, before they enter the cache
  V,           // [M, kv_dim] values of the new rows, before they enter the cache
  FinalNorm,   // [M, dim] after the final RMSNorm (layer = -1)
  Logits,      // [rows, vocab] (layer = -1)
  RouterLogits,  // [M, n_experts] a sparse layer's router logits, before the routing reads them
};

std::string_view hook_point_name(HookPoint p);

struct HookSite {
  HookPoint point;
  int layer;      // -1 for model-level points
  int start_pos;  // position of row 0
  int rows;
  int width;
};

class ForwardHooks {
 public:
  virtual ~ForwardHooks() = default;
  // `data` (host memory) may be modified in place (patching); values must stay representable in
  // the compute dtype.
  virtual void on(const HookSite& site, float* data) = 0;
  // Whether on() needs this point at all, and whether it may change the data there. On a device
  // other than the CPU, the pass copies to the host only the points wanted, and back only those
  // that may be written.
  virtual bool wants(HookPoint point, int layer) const { return true; }
  virtual bool writes(HookPoint point, int layer) const { return true; }
};

}  // namespace kvp
