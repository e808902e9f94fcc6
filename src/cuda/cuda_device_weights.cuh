#pragma once
// Device memory the CUDA kernels own: growable blocks and the device copies of the model's weights,
// made once, on first use (cuda_kernels.cu).
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_runtime_api.h"

namespace kvp::cuda {

// Device memory owned by the kernels; replacing it frees the old block, which waits for the work
// queued on it (cudaFree synchronises).
struct Block {
  void* p = nullptr;
  size_t bytes = 0;
  Block() = default;
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  ~Block() { release(p); }
  void* ensure(size_t n) {
    if (n > bytes) {
      release(p);
      p = nullptr;
      bytes = 0;
      p = alloc(n);
      bytes = n;
    }
    return p;
  }
};

struct Weight {
  Block mem;
  int store = kF32;
};

// The device copies of weight tensors and gains, keyed by their host address.
class DeviceWeights {
 public:
  // The device copy of a weight tensor, made on first use.
  const Weight& get(const TensorView& W) {
    auto it = weights_.find(W.data);
    if (it != weights_.end()) return it->second;
    Weight& w = weights_[W.data];
    if (W.quantized()) {
      upload_f32(W, w);
    } else {
      w.mem.ensure(W.nbytes());
      kvp::cuda::to_device(w.mem.p, W.data, W.nbytes());
      w.store = store_of(W.dtype);
    }
    return w;
  }

  // The exact fp32 values of a weight tensor, for the fp32 passes: the same copy as get() when
  // the host holds fp32 (or quantised blocks) already, else a widened one.
  const Weight& f32(const TensorView& W) {
    if (W.quantized() || W.dtype == DType::F32) return get(W);
    auto it = widened_.find(W.data);
    if (it != widened_.end()) return it->second;
    Weight& w = widened_[W.data];
    upload_f32(W, w);
    return w;
  }

  // W's exact fp32 values into w (dequantised or widened on the host).
  static void upload_f32(const TensorView& W, Weight& w) {
    std::vector<float> f(size_t(W.numel()));
    view_to_f32(W, 0, f.size(), f.data());
    w.mem.ensure(f.size() * sizeof(float));
    kvp::cuda::to_device(w.mem.p, f.data(), f.size() * sizeof(float));
    w.store = kF32;
  }

  const float* gains(const float* host, int n) {
    auto it = weights_.find(host);
    if (it == weights_.end()) {
      Weight& w = weights_[host];
      w.mem.ensure(size_t(n) * sizeof(float));
      kvp::cuda::to_device(w.mem.p, host, size_t(n) * sizeof(float));
      it = weights_.find(host);
    }
    return static_cast<const float*>(it->second.mem.p);
  }

 private:
  std::unordered_map<const void*, Weight> weights_;
  std::unordered_map<const void*, Weight> widened_;  // fp32 copies of narrow weights (f32)
};

}  // namespace kvp::cuda
