#pragma once
// Replays a forward pass as a CUDA graph when the pass launches exactly what an earlier one did.
//
// A decode step issues hundreds of small launches; launched one by one from the host they cost
// more than the GPU's work (1.1B: ~6 ms a token, launch-bound). Between two decode steps of one
// batch only the contents of the uploaded per-pass data change (token ids, positions, cache-write
// and attention descriptors, all copied from a pinned ring that restarts at every pass), so the
// launches themselves, with every argument, repeat. The kernels therefore hand each launch to
// this queue with a signature of its arguments; during a pass the queue only collects them. At
// the pass's end (its one wait) the signatures' hash picks a graph captured from an identical
// pass and replays it, or the collected launches run one by one, and a hash met a second time is
// captured into a graph for the next time. Because a graph holds exactly the launches collected,
// with the same arguments, replaying changes no bit: it removes the launch gaps, not the order.
// A pass that must wait in its middle (a hook reading activations, a buffer that must grow)
// flushes what it collected and runs the rest eagerly.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <list>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "cuda/cuda_runtime_api.h"
#include "cuda/cuda_signature_mix.h"

namespace kvp::cuda {

bool pass_graphs_on();  // set_pass_graphs (cuda_runtime_api.h)

// Launch kinds, the first word of a launch's signature.
enum LaunchKind : uint64_t {
  kGemm = 1, kConvert, kMemset, kCopy, kPrefill, kDecode, kNorm, kEmbed, kBias, kRope, kGated, kSoftcap,
  kScale, kAdd, kKvWrite, kRound
};

class PassGraphs {
 public:
  explicit PassGraphs(cudaStream_t stream) : stream_(stream) {}
  ~PassGraphs();
  PassGraphs(const PassGraphs&) = delete;
  PassGraphs& operator=(const PassGraphs&) = delete;

  // Graphs off: every launch runs at once (op timing needs that).
  void set_enabled(bool on) { enabled_ = on; }
  // The launches until end_pass() form one pass.
  void begin_pass();
  bool collecting() const { return collecting_; }
  // Runs `launch` now, or collects it (with `signature`, a hash of all its arguments).
  template <typename F>
  void submit(uint64_t signature, F&& launch) {
    if (!collecting_) {
      launch();
      return;
    }
    hash_ = mix(hash_, signature);
    pending_.emplace_back(std::forward<F>(launch));
  }
  // Collects `launch` ahead of everything collected so far (the pass's uploads).
  template <typename F>
  void prepend(uint64_t signature, F&& launch) {
    if (!collecting_) return;
    hash_ = mix(hash_, signature);
    pending_.insert(pending_.begin(), std::function<void()>(std::forward<F>(launch)));
  }
  // Mid-pass wait: runs what was collected, and the rest of the pass eagerly.
  void flush();
  // Runs the pass: a graph replay, a capture, or the collected launches one by one.
  void end_pass();

  size_t replays() const { return replays_; }
  size_t captures() const { return captures_; }

  static uint64_t mix(uint64_t h, uint64_t v) { return signature_mix(h, v); }

 private:
  void run_pending();

  struct Entry {
    cudaGraphExec_t exec = nullptr;
    int seen = 0;
    size_t replays = 0;
    GraphNodes nodes;  // what a replay launches
  };
  cudaStream_t stream_;
  bool enabled_ = true, collecting_ = false;
  uint64_t hash_ = 0;
  std::vector<std::function<void()>> pending_;
  std::unordered_map<uint64_t, Entry> graphs_;
  std::list<uint64_t> order_;  // captured hashes, oldest first (a few are kept)
  size_t replays_ = 0, captures_ = 0;
};

// A launch's signature: its kind and the bytes of every argument (scalars, pointers, and structs
// of such without padding).
inline void sig_add(uint64_t& h, const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, b, 8);
    h = PassGraphs::mix(h, v);
    b += 8;
    n -= 8;
  }
  uint64_t v = 0;
  std::memcpy(&v, b, n);
  h = PassGraphs::mix(h, v ^ (uint64_t(n) << 56));
}
template <typename... A>
uint64_t signature(uint64_t kind, const A&... args) {
  static_assert((std::is_trivially_copyable_v<A> && ...));
  uint64_t h = kind;
  (sig_add(h, &args, sizeof(A)), ...);
  return h;
}

}  // namespace kvp::cuda
