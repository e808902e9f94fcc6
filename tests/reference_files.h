#pragma once
// Reading ../shared/reference's files (what transformers' own code produced) and capturing the
// hidden states they hold, for the CPU and the CUDA suites' reference tests.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/hooks.h"

namespace kvp::test {

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// A raw little-endian float32 file.
inline std::vector<float> read_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const auto size = in.tellg();
  std::vector<float> v(static_cast<size_t>(size) / 4);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), size);
  return v;
}

// The largest |a[i] - b[i]| over n elements.
inline double max_abs_diff(const float* a, const float* b, size_t n) {
  double d = 0;
  for (size_t i = 0; i < n; ++i) d = std::max(d, double(std::fabs(a[i] - b[i])));
  return d;
}

// HF output_hidden_states layout: [0] embeddings, [1..L-1] residual after layers 1..L-1, [L] final
// norm; last_layer is the residual after the last layer (the references' last_layer_out.f32). Only
// those points are wanted, and none is written, so a device pass copies just them to the host.
class HiddenCapture final : public ForwardHooks {
 public:
  HiddenCapture(int n_layers, int rows, int dim)
      : n_layers_(n_layers), rows_(rows), dim_(dim), data(size_t(n_layers + 1) * rows * dim) {}
  void on(const HookSite& s, float* d) override {
    int slot = -1;
    if (s.point == HookPoint::Embed) slot = 0;
    if (s.point == HookPoint::ResidPost && s.layer < n_layers_ - 1) slot = s.layer + 1;
    if (s.point == HookPoint::FinalNorm) slot = n_layers_;
    if (s.point == HookPoint::ResidPost && s.layer == n_layers_ - 1) last_layer.assign(d, d + size_t(s.rows) * dim_);
    if (slot >= 0) std::copy(d, d + size_t(s.rows) * dim_, data.begin() + (size_t(slot) * rows_ + s.start_pos) * dim_);
  }
  bool wants(HookPoint p, int) const override {
    return p == HookPoint::Embed || p == HookPoint::ResidPost || p == HookPoint::FinalNorm;
  }
  bool writes(HookPoint, int) const override { return false; }
  int n_layers_, rows_, dim_;
  std::vector<float> data, last_layer;
};

}  // namespace kvp::test
