#pragma once
// The mixing step of launch signatures, plain C++: PassGraphs hashes a pass's launches with it
// and Fusion (cuda_fusion.cuh, also built for the CPU suite) the launches it assembles.
#include <cstdint>

namespace kvp::cuda {

inline uint64_t signature_mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

}  // namespace kvp::cuda
