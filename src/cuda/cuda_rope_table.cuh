#pragma once
// The model's whole RoPE cos/sin tables (computed on the host, where the CPU reads them) in device
// memory, each uploaded once: no pass ever waits to extend one. A pass may rotate with two tables
// (Gemma-3's local and global layers; each `portable` twin is a table of its own), so a few stay
// resident at once: switching between them layer by layer must not upload (and wait) every time,
// which a captured decode graph could not do at all.
#include <array>
#include <cstring>
#include <vector>

#include "cuda/cuda_device_weights.cuh"
#include "kernels/elementwise.h"

namespace kvp::cuda {

class DeviceRopeTable {
 public:
  bool holds(const RopeTable& t) const { return find(t) != nullptr; }
  // cos rows [rows][head_dim / 2], then the sin rows (RopeTable::rows: longrope's long set too). Uploading waits for the stream to be
  // idle (an earlier launch may still read the slot it overwrites); idle(): what must run first.
  template <class Idle>
  const float* ensure(const RopeTable& t, Idle&& idle) {
    if (const Slot* s = find(t)) return static_cast<const float*>(s->mem.p);
    const int n = t.rows();
    const size_t half = size_t(t.head_dim() / 2);
    std::vector<float> cs(2 * size_t(n) * half);
    for (int pos = 0; pos < n; ++pos) {
      std::memcpy(cs.data() + size_t(pos) * half, t.cos_row(pos), half * sizeof(float));
      std::memcpy(cs.data() + (size_t(n) + pos) * half, t.sin_row(pos), half * sizeof(float));
    }
    idle();
    KVP_CUDA_CHECK(cudaStreamSynchronize(stream()));
    Slot& s = slots_[next_];
    next_ = (next_ + 1) % slots_.size();
    s.mem.ensure(cs.size() * sizeof(float));
    kvp::cuda::to_device(s.mem.p, cs.data(), cs.size() * sizeof(float));
    s.table = &t;
    return static_cast<const float*>(s.mem.p);
  }

 private:
  struct Slot {
    Block mem;
    const RopeTable* table = nullptr;
  };
  const Slot* find(const RopeTable& t) const {
    for (const Slot& s : slots_)
      if (s.table == &t) return &s;
    return nullptr;
  }
  std::array<Slot, 4> slots_;  // local, global and their portable twins; the oldest is replaced
  size_t next_ = 0;
};

}  // namespace kvp::cuda
