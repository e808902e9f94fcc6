#pragma once
// Shared fixtures: thread pools and weight buffers are kept across benchmark runs because
// Google Benchmark calls each function several times while it sizes the iteration count, and
// refilling a 250 MB lm_head each time would dominate the run.
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"

namespace kvp::bench {

// A weight matrix's shape: W[N, K] (y = x . W^T), named for benchmark rows.
struct Shape {
  const char* name;
  int64_t N, K;
};

inline ThreadPool* pool_for(int threads) {
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  auto& p = pools[threads];
  if (!p) p = std::make_unique<ThreadPool>(threads);
  return p.get();
}

inline Kernels& kernels_for(KernelPolicy policy, int threads) {
  static std::map<std::pair<int, int>, std::unique_ptr<Kernels>> cache;
  auto& k = cache[{int(policy), threads}];
  if (!k) k = make_kernels(policy, policy == KernelPolicy::Reference ? nullptr : pool_for(threads));
  return *k;
}

// Deterministic values in [-1, 1) stored as `t`; cheap enough to fill hundreds of MB.
inline void fill_pattern(DType t, void* data, size_t n, uint32_t seed) {
  uint32_t s = seed * 2654435761u + 1u;
  std::vector<float> chunk(4096);
  for (size_t i = 0; i < n; i += chunk.size()) {
    const size_t m = std::min(chunk.size(), n - i);
    for (size_t j = 0; j < m; ++j) {
      s = s * 1664525u + 1013904223u;
      chunk[j] = float(int32_t(s >> 8) - (1 << 23)) / float(1 << 23);
    }
    from_f32(t, chunk.data(), static_cast<char*>(data) + i * dtype_size(t), m);
  }
}

// Keeps only the most recent weight matrix alive, so memory stays bounded by the largest shape.
inline TensorView weights(DType t, int64_t N, int64_t K) {
  static AlignedBuffer buf;
  static DType cur_t = DType::F32;
  static int64_t cur_n = -1, cur_k = -1;
  if (cur_t != t || cur_n != N || cur_k != K) {
    buf = AlignedBuffer();
    buf = AlignedBuffer(size_t(N * K) * dtype_size(t));
    fill_pattern(t, buf.data(), size_t(N * K), 17);
    cur_t = t;
    cur_n = N;
    cur_k = K;
  }
  TensorView v;
  v.name = "bench.weight";
  v.dtype = t;
  v.shape = {N, K};
  v.data = buf.data();
  return v;
}

}  // namespace kvp::bench
