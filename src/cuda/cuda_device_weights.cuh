#pragma once
// Device memory the CUDA kernels own: growable blocks and the device copies of the model's weights,
// made once, on first use, and shared by the kernels made for one model (shared_device_weights).
#include <memory>
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
  Block(Block&& o) noexcept : p(o.p), bytes(o.bytes) {
    o.p = nullptr;
    o.bytes = 0;
  }
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
  Block mem;                // the copy (empty for a member of a group: see DeviceWeights::group)
  const void* p = nullptr;  // the device data: mem.p, or the member's place in its group's block
  int store = kF32;
  // What the copy was made from: a host address seen again with another size, type or block
  // layout holds another tensor (the first one was freed and its memory reused), so it is uploaded
  // anew rather than answered with the old copy.
  size_t host_bytes = 0;
  DType dtype = DType::F32;
  QuantType quant = QuantType::None;
};

// The device copies of weight tensors and small vectors (norm gains, attention sinks), keyed by
// their host address. The contract (which the engine keeps: a model outlives the engines that run
// it): the bytes at an address this has seen do not change while it lives (comparing the bytes on
// every lookup would read the whole model on the host each pass), so only the size and type are
// checked; a copy replaced on that check is retired, not freed, since launches held back or
// captured in a graph may still read it.
class DeviceWeights {
 public:
  // The device copy of a weight tensor, made on first use.
  const Weight& get(const TensorView& W) {
    Weight* w = find_or_retire(weights_, W.data, W.nbytes(), W.dtype, W.quant);
    if (w != nullptr) return *w;
    Weight& n = weights_[W.data];
    describe(n, W.nbytes(), W.dtype, W.quant);
    if (W.quantized()) {
      upload_f32(W, n);
    } else {
      n.mem.ensure(W.nbytes());
      kvp::cuda::to_device(n.mem.p, W.data, W.nbytes());
      n.store = store_of(W.dtype);
    }
    n.p = n.mem.p;
    return n;
  }

  // The device copy of n weight matrices of one width and (unquantised) dtype as one block, rows of
  // W[0] then W[1] ...: a matmul_group's weights, one [sum of rows, cols] matrix for one launch.
  // Made on the group's first use; get() then answers each member not copied before with its place
  // in the block (a model's q/k/v and gate/up are used as groups, so there is no second copy). A
  // member copied alone before (by kernels that do not group, sharing these copies) keeps that
  // copy too: whether a group is one launch must not depend on what ran first, since under
  // `standard` cuBLAS may round one wide GEMM otherwise than its members. Null where the group
  // cannot be one block: mixed shapes or types, quantised blocks.
  const void* group(const TensorView* const* W, int n) {
    if (n <= 0) return nullptr;
    std::vector<Member> members;
    size_t bytes = 0;
    for (int i = 0; i < n; ++i) {
      if (W[i]->quantized() || W[i]->dtype != W[0]->dtype || W[i]->cols() != W[0]->cols()) return nullptr;
      members.push_back(Member{W[i]->data, W[i]->nbytes(), W[i]->dtype});
      bytes += W[i]->nbytes();
    }
    auto it = groups_.find(W[0]->data);
    if (it != groups_.end()) {
      if (it->second.members == members) return it->second.mem.p;
      retired_.push_back(std::move(it->second.mem));  // another group at that address now
      groups_.erase(it);
    }
    Group& g = groups_[W[0]->data];
    g.members = std::move(members);
    g.mem.ensure(bytes);
    size_t at = 0;
    for (int i = 0; i < n; ++i) {
      void* place = static_cast<char*>(g.mem.p) + at;
      kvp::cuda::to_device(place, W[i]->data, W[i]->nbytes());
      if (find_or_retire(weights_, W[i]->data, W[i]->nbytes(), W[i]->dtype, W[i]->quant) == nullptr) {
        Weight& m = weights_[W[i]->data];
        describe(m, W[i]->nbytes(), W[i]->dtype, W[i]->quant);
        m.p = place;
        m.store = store_of(W[i]->dtype);
      }
      at += W[i]->nbytes();
    }
    return g.mem.p;
  }

  // The exact fp32 values of a weight tensor, for the fp32 passes: the same copy as get() when
  // the host holds fp32 (or quantised blocks) already, else a widened one.
  const Weight& f32(const TensorView& W) {
    if (W.quantized() || W.dtype == DType::F32) return get(W);
    Weight* w = find_or_retire(widened_, W.data, W.nbytes(), W.dtype, W.quant);
    if (w != nullptr) return *w;
    Weight& n = widened_[W.data];
    describe(n, W.nbytes(), W.dtype, W.quant);
    upload_f32(W, n);
    return n;
  }

  // W's exact fp32 values into w (dequantised or widened on the host).
  static void upload_f32(const TensorView& W, Weight& w) {
    std::vector<float> f(size_t(W.numel()));
    view_to_f32(W, 0, f.size(), f.data());
    w.mem.ensure(f.size() * sizeof(float));
    kvp::cuda::to_device(w.mem.p, f.data(), f.size() * sizeof(float));
    w.p = w.mem.p;
    w.store = kF32;
  }

  // A small fp32 vector the kernels read from device memory (norm gains, attention sinks): copied
  // once, by its host address.
  const float* vector(const float* host, int n) {
    const size_t bytes = size_t(n) * sizeof(float);
    Weight* w = find_or_retire(vectors_, host, bytes, DType::F32, QuantType::None);
    if (w == nullptr) {
      w = &vectors_[host];
      describe(*w, bytes, DType::F32, QuantType::None);
      w->mem.ensure(bytes);
      kvp::cuda::to_device(w->mem.p, host, bytes);
    }
    return static_cast<const float*>(w->mem.p);
  }

 private:
  using Map = std::unordered_map<const void*, Weight>;

  static void describe(Weight& w, size_t bytes, DType dtype, QuantType quant) {
    w.host_bytes = bytes;
    w.dtype = dtype;
    w.quant = quant;
  }

  // The copy made from `host` if it was made from a tensor of this size and type; else none, the
  // stale copy moved to retired_.
  Weight* find_or_retire(Map& map, const void* host, size_t bytes, DType dtype, QuantType quant) {
    auto it = map.find(host);
    if (it == map.end()) return nullptr;
    Weight& w = it->second;
    if (w.host_bytes == bytes && w.dtype == dtype && w.quant == quant) return &w;
    retired_.push_back(std::move(w.mem));
    map.erase(it);
    return nullptr;
  }

  // A group's member as its block was made from.
  struct Member {
    const void* host;
    size_t bytes;
    DType dtype;
    bool operator==(const Member&) const = default;
  };
  struct Group {
    Block mem;  // which members of weights_ may point into
    std::vector<Member> members;
  };

  Map weights_;
  Map widened_;  // fp32 copies of narrow weights (f32)
  Map vectors_;  // vector()'s copies, always fp32
  std::unordered_map<const void*, Group> groups_;  // by the first member's host address
  std::vector<Block> retired_;
};

// The device copies of `owner`'s weights (cuda_kernels.cu): the ones every kernels object made for
// that owner and still alive holds, else new ones; a null owner's are its own. Engines of one model
// (a study's cache-ON, cache-OFF and teacher-forced sides) hold one copy, uploaded once.
std::shared_ptr<DeviceWeights> shared_device_weights(const void* owner);

}  // namespace kvp::cuda
