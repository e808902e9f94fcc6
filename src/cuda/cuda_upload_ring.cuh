#pragma once
// Small per-pass host data for the kernels (token ids, positions, per-sequence descriptors),
// through a pinned staging ring, so that a pass never waits for the GPU until its logits are
// copied back. While PassGraphs collects a pass, the pass's uploads are staged and go to the GPU
// as one copy ahead of every collected launch (a replayed graph copies from the same pinned
// bytes, which then hold that pass's values); otherwise each is copied at once. Ending a pass's
// collection (end_collecting) goes through here for that reason.
#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "cuda/cuda_common.cuh"
#include "cuda/cuda_device_weights.cuh"
#include "cuda/cuda_pass_graphs.cuh"
#include "cuda/cuda_runtime_api.h"

namespace kvp::cuda {

class UploadRing {
 public:
  // What an upload holds: equal bytes are shared only between uploads of one kind, so that which
  // uploads are shared does not depend on the values (a token id equal to a position).
  enum Kind { kTokenIds, kPositions, kKvDescs, kAttnPrefillDescs, kAttnDecodeDescs };

  // before_restart runs before the ring starts over: launches held back that read earlier
  // uploads must be queued first, since the restart rewrites those bytes.
  UploadRing(PassGraphs& graphs, std::function<void()> before_restart)
      : graphs_(graphs), before_restart_(std::move(before_restart)), room_(upload_ring_bytes()) {}
  ~UploadRing() {
    if (host_ != nullptr) cudaFreeHost(host_);
  }
  UploadRing(const UploadRing&) = delete;
  UploadRing& operator=(const UploadRing&) = delete;

  // How many times the ring has started over mid-pass: uploads made before a restart are gone.
  size_t restarts() const { return restarts_; }

  // A new pass: the ring restarts (after the uploads of a pass that never waited have landed).
  void begin_pass() {
    if (off_ != 0) {
      KVP_CUDA_CHECK(cudaStreamSynchronize(stream()));
      off_ = 0;
    }
    uploads_.clear();
    staged_end_ = 0;
  }
  // The GPU has caught up with everything queued: every upload so far has been consumed.
  void consumed() {
    off_ = 0;
    uploads_.clear();
  }

  // Ends collection (flush: mid-pass, the rest runs eagerly), the staged uploads first.
  void end_collecting(bool flush) {
    if (graphs_.collecting() && staged_end_ > 0) {
      void* d = dev_.p;
      const void* h = host_;
      const size_t nb = staged_end_;
      graphs_.prepend(signature(0x75706c6f6164ull, d, h, nb),
                      [=] { KVP_CUDA_CHECK(cudaMemcpyAsync(d, h, nb, cudaMemcpyHostToDevice, stream())); });
    }
    staged_end_ = 0;
    if (flush)
      graphs_.flush();
    else
      graphs_.end_pass();
  }

  // n values for the next kernels: their device address. A full ring waits for the GPU once, then
  // starts over.
  template <typename T>
  const T* upload(Kind kind, const T* host, size_t n) {
    // The same bytes uploaded earlier in this pass (every layer's positions and descriptors), first:
    // a copy that needs no room must not restart the ring.
    if (const char* d = earlier(kind, host, n * sizeof(T))) return reinterpret_cast<const T*>(d);
    const size_t bytes = padded(n * sizeof(T));
    if (off_ + bytes > bytes_) {
      before_restart_();
      end_collecting(true);  // collected launches read the ring as it is now
      KVP_CUDA_CHECK(cudaStreamSynchronize(stream()));
      consumed();
      ++restarts_;
      if (bytes > bytes_) {
        const size_t cap = std::max(bytes, room_);
        if (host_ != nullptr) cudaFreeHost(host_);
        host_ = nullptr;
        KVP_CUDA_CHECK(cudaMallocHost(&host_, cap));
        dev_.ensure(cap);
        bytes_ = cap;
      }
    }
    char* h = static_cast<char*>(host_) + off_;
    char* d = static_cast<char*>(dev_.p) + off_;
    std::memcpy(h, host, n * sizeof(T));
    uploads_.push_back(Staged{kind, off_, n * sizeof(T)});
    const size_t nb = n * sizeof(T);
    if (graphs_.collecting())
      staged_end_ = off_ + nb;
    else
      KVP_CUDA_CHECK(cudaMemcpyAsync(d, h, nb, cudaMemcpyHostToDevice, stream()));
    off_ += bytes;
    return reinterpret_cast<const T*>(d);
  }

 private:
  struct Staged {
    Kind kind;
    size_t off, bytes;  // in the ring
  };
  static size_t padded(size_t bytes) { return (bytes + 255) / 256 * 256; }
  // The device copy of these bytes of this kind uploaded since the ring started over, if any.
  const char* earlier(Kind kind, const void* host, size_t bytes) const {
    for (const Staged& u : uploads_)
      if (u.kind == kind && u.bytes == bytes && std::memcmp(static_cast<const char*>(host_) + u.off, host, bytes) == 0)
        return static_cast<const char*>(dev_.p) + u.off;
    return nullptr;
  }
  PassGraphs& graphs_;
  std::function<void()> before_restart_;
  Block dev_;
  void* host_ = nullptr;
  size_t bytes_ = 0, off_ = 0;
  std::vector<Staged> uploads_;  // since the ring restarted
  size_t staged_end_ = 0;        // ring bytes [0, staged_end_) not yet copied (collecting)
  size_t restarts_ = 0;
  size_t room_;  // the ring's bytes, unless one upload needs more (set_upload_ring_bytes)
};

}  // namespace kvp::cuda
