#pragma once
// A forward hook that records q and k before RoPE and after it, per layer: the tests of the
// families with layers that rotate nothing (SmolLM3's NoPE layers, EXAONE 4.0's global layers).
#include <map>
#include <utility>
#include <vector>

#include "runtime/hooks.h"

namespace kvp::test {

struct RopeCapture final : ForwardHooks {
  std::map<std::pair<int, int>, std::vector<float>> rows;  // (point, layer)
  bool wants(HookPoint p, int) const override {
    return p == HookPoint::QPre || p == HookPoint::Q || p == HookPoint::KPre || p == HookPoint::K;
  }
  bool writes(HookPoint, int) const override { return false; }
  void on(const HookSite& s, float* d) override {
    rows[{int(s.point), s.layer}] = std::vector<float>(d, d + size_t(s.rows) * s.width);
  }
  // Whether `layer`'s q and k left RoPE exactly as they entered it.
  bool unrotated(int layer, HookPoint pre, HookPoint post) const {
    return rows.at({int(pre), layer}) == rows.at({int(post), layer});
  }
};

}  // namespace kvp::test
