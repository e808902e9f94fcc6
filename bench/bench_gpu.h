#pragma once
// What the GPU benchmarks share: why no GPU can be used (asked once), and one Kernels per policy
// on it for the whole run (the device keeps its weight copies per Kernels).
#include <map>
#include <memory>
#include <string>

#include "core/device.h"
#include "kernels/kernels.h"

namespace kvp::bench {

// The CUDA error that keeps the GPU from opening ("" when it opened).
inline const std::string& gpu_error() {
  static const std::string err = [] {
    try {
      require_device(Device::Cuda);
      return std::string();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  }();
  return err;
}

inline Kernels& gpu_kernels(KernelPolicy policy) {
  static std::map<int, std::unique_ptr<Kernels>> made;
  auto& k = made[int(policy)];
  if (!k) k = make_kernels(policy, nullptr, Device::Cuda);
  return *k;
}

}  // namespace kvp::bench
