#pragma once
// The model's whole RoPE cos/sin table (computed on the host, where the CPU reads it) in device
// memory, uploaded once per table: no pass ever waits to extend it.
#include <cstring>
#include <vector>

#include "cuda/cuda_device_weights.cuh"
#include "kernels/elementwise.h"

namespace kvp::cuda {

class DeviceRopeTable {
 public:
  bool holds(const RopeTable& t) const { return &t == table_; }
  // cos rows [positions][head_dim / 2], then the sin rows. Uploading waits for the stream to be
  // idle (an earlier launch may still read the table it replaces); idle(): what must run first.
  template <class Idle>
  const float* ensure(const RopeTable& t, Idle&& idle) {
    if (!holds(t)) {
      const int n = t.max_positions();
      const size_t half = size_t(t.head_dim() / 2);
      std::vector<float> cs(2 * size_t(n) * half);
      for (int pos = 0; pos < n; ++pos) {
        std::memcpy(cs.data() + size_t(pos) * half, t.cos_row(pos), half * sizeof(float));
        std::memcpy(cs.data() + (size_t(n) + pos) * half, t.sin_row(pos), half * sizeof(float));
      }
      idle();
      KVP_CUDA_CHECK(cudaStreamSynchronize(stream()));
      mem_.ensure(cs.size() * sizeof(float));
      kvp::cuda::to_device(mem_.p, cs.data(), cs.size() * sizeof(float));
      table_ = &t;
    }
    return static_cast<const float*>(mem_.p);
  }

 private:
  Block mem_;
  const RopeTable* table_ = nullptr;
};

}  // namespace kvp::cuda
