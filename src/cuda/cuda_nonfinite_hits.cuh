#pragma once
// Where a pass's rounding points report their first NaN/Inf on the GPU (NonFiniteSlot): one 64-bit
// slot per rounding point, then an "any" flag, so that a pass with none costs one 4-byte read at
// its end. Reports come back in slot order, whatever order the kernels ran in.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cuda/cuda_common.cuh"
#include "cuda/cuda_device_weights.cuh"
#include "cuda/cuda_ops.h"

namespace kvp::cuda {

class NonFiniteHits {
 public:
  NonFiniteHits() { KVP_CUDA_CHECK(cudaMallocHost(&flag_host_, sizeof(int))); }
  ~NonFiniteHits() {
    if (flag_host_ != nullptr) cudaFreeHost(flag_host_);
  }
  NonFiniteHits(const NonFiniteHits&) = delete;
  NonFiniteHits& operator=(const NonFiniteHits&) = delete;

  bool holds(int slot) const { return size_t(slot) < slots_; }
  // Room for `slot` (the reports so far kept). Launches queued or held that name the old buffer
  // must have been launched: this waits for the GPU, then moves the buffer.
  void grow(int slot) {
    const size_t n = std::max(size_t(slot) + 1, size_t(4096));
    KVP_CUDA_CHECK(cudaStreamSynchronize(stream()));
    std::vector<unsigned long long> old(slots_ + (slots_ ? 1 : 0));
    if (!old.empty()) {
      KVP_CUDA_CHECK(cudaMemcpyAsync(old.data(), mem_.p, old.size() * 8, cudaMemcpyDeviceToHost, stream()));
      KVP_CUDA_CHECK(cudaStreamSynchronize(stream()));
    }
    mem_.ensure((n + 1) * 8);
    std::vector<unsigned long long> fresh(n + 1, ~0ull);
    fresh[n] = 0;
    for (size_t i = 0; i < slots_; ++i) fresh[i] = old[i];
    if (!old.empty()) fresh[n] = old[slots_];
    // On the pass's stream, and waited for: a plain cudaMemcpy from pageable memory goes on the
    // legacy stream, which the non-blocking stream() does not wait for, and may return before its
    // DMA has landed, so the first reports of the next kernels could be overwritten by the fill.
    KVP_CUDA_CHECK(cudaMemcpyAsync(mem_.p, fresh.data(), fresh.size() * 8, cudaMemcpyHostToDevice, stream()));
    KVP_CUDA_CHECK(cudaStreamSynchronize(stream()));
    slots_ = n;
  }
  NonFiniteSlot at(int slot) {
    max_slot_ = std::max(max_slot_, slot);
    auto* hits = static_cast<unsigned long long*>(mem_.p);
    return NonFiniteSlot{hits, slot, reinterpret_cast<int*>(hits + slots_)};
  }

  // The reports of every launch queued so far, in slot order (waits for the GPU); then cleared.
  std::vector<NonFiniteHit> read() {
    std::vector<NonFiniteHit> out;
    if (mem_.p == nullptr) return out;
    auto* hits = static_cast<unsigned long long*>(mem_.p);
    KVP_CUDA_CHECK(cudaMemcpyAsync(flag_host_, hits + slots_, sizeof(int), cudaMemcpyDeviceToHost, stream()));
    KVP_CUDA_CHECK(cudaStreamSynchronize(stream()));
    if (*flag_host_ == 0) return out;
    std::vector<unsigned long long> h(size_t(max_slot_) + 1);
    KVP_CUDA_CHECK(
        cudaMemcpyAsync(h.data(), hits, h.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream()));
    KVP_CUDA_CHECK(cudaStreamSynchronize(stream()));
    for (size_t i = 0; i < h.size(); ++i) {
      if (h[i] == ~0ull) continue;
      const unsigned kind = unsigned(h[i] & 3u);
      const float v = kind == 0 ? NAN : (kind == 1 ? INFINITY : -INFINITY);
      out.push_back(NonFiniteHit{int(i), long(h[i] >> 2), v});
    }
    KVP_CUDA_CHECK(cudaMemsetAsync(mem_.p, 0xff, slots_ * 8, stream()));
    KVP_CUDA_CHECK(cudaMemsetAsync(hits + slots_, 0, 8, stream()));
    max_slot_ = 0;
    return out;
  }

 private:
  Block mem_;
  size_t slots_ = 0;
  int max_slot_ = 0;
  int* flag_host_ = nullptr;
};

}  // namespace kvp::cuda
