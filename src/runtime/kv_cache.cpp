#include "runtime/kv_cache.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace kvp {

KVCache::KVCache(const ModelConfig& config, int capacity, DType kv_dtype)
    : capacity_(capacity), n_kv_heads_(config.n_kv_heads), head_dim_(config.head_dim), dtype_(kv_dtype) {
  if (capacity <= 0) fail("KV cache capacity must be positive (got {})", capacity);
  const size_t bytes = size_t(n_kv_heads_) * capacity_ * head_dim_ * dtype_size(kv_dtype);
  for (int l = 0; l < config.n_layers; ++l) {
    k_.emplace_back(bytes);
    v_.emplace_back(bytes);
  }
}

void KVCache::set_length(int n) {
  if (n < 0 || n > capacity_) fail("KV cache length {} outside [0, {}]", n, capacity_);
  length_ = n;
}

void KVCache::write(int layer, bool is_v, const float* rows, int M, int start_pos) {
  if (start_pos < 0 || start_pos + M > capacity_)
    fail("KV cache overflow: positions {}..{} exceed the cache capacity {}", start_pos, start_pos + M - 1, capacity_);
  auto* base = static_cast<uint8_t*>(is_v ? v(layer) : k(layer));
  const size_t es = dtype_size(dtype_);
  for (int m = 0; m < M; ++m)
    for (int h = 0; h < n_kv_heads_; ++h)
      from_f32(dtype_, rows + (size_t(m) * n_kv_heads_ + h) * head_dim_, base + offset(h, start_pos + m) * es,
               size_t(head_dim_));
}

void KVCache::read(int layer, bool is_v, int kv_head, int pos, float* out) const {
  const auto* base = static_cast<const uint8_t*>(is_v ? v(layer) : k(layer));
  to_f32(dtype_, base + offset(kv_head, pos) * dtype_size(dtype_), out, size_t(head_dim_));
}

void KVCache::poison() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> row(size_t(head_dim_), nan);
  for (int l = 0; l < n_layers(); ++l)
    for (int h = 0; h < n_kv_heads_; ++h)
      for (int p = 0; p < capacity_; ++p)
        for (bool is_v : {false, true}) {
          auto* base = static_cast<uint8_t*>(is_v ? v(l) : k(l));
          from_f32(dtype_, row.data(), base + offset(h, p) * dtype_size(dtype_), size_t(head_dim_));
        }
}

}  // namespace kvp
