#include "runtime/hooks.h"

namespace kvp {

std::string_view hook_point_name(HookPoint p) {
  switch (p) {
    case HookPoint::Embed: return "embed";
    case HookPoint::ResidPre: return "resid_pre";
    case HookPoint::AttnOut: return "attn_out";
    case HookPoint::ResidMid: return "resid_mid";
    case HookPoint::MlpOut: return "mlp_out";
    case HookPoint::ResidPost: return "resid_post";
    case HookPoint::QPre: return "q_pre_rope";
    case HookPoint::KPre: return "k_pre_rope";
    case HookPoint::Q: return "q";
    case HookPoint::K: return "k";
    case HookPoint::V: return "v";
    case HookPoint::FinalNorm: return "final_norm";
    case HookPoint::Logits: return "logits";
    case HookPoint::RouterLogits: return "router_logits";
  }
  return "?";
}

}  // namespace kvp
