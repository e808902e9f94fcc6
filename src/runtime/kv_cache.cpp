#include "runtime/kv_cache.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace kvp {

KVCache::KVCache(const ModelConfig& config, int capacity, const KvType& kv_type)
    : capacity_(capacity), n_kv_heads_(config.n_kv_heads), head_dim_(config.head_dim), type_(kv_type) {
  if (capacity <= 0) fail("KV cache capacity must be positive (got {})", capacity);
  if (size_t(head_dim_) % type_.block_elems() != 0)
    fail("--kv-dtype {} stores blocks of {} values along head_dim, but this model's head_dim is {}", type_.name(),
         type_.block_elems(), head_dim_);
  if (!(type_.scale > 0.0f && std::isfinite(type_.scale)))
    fail("--kv-scale must be a positive finite number (got {})", type_.scale);
  const size_t bytes = type_.bytes(size_t(n_kv_heads_) * capacity_ * head_dim_);
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
  for (int m = 0; m < M; ++m)
    for (int h = 0; h < n_kv_heads_; ++h)
      kv_encode(type_, rows + (size_t(m) * n_kv_heads_ + h) * head_dim_, size_t(head_dim_),
                base + type_.bytes(offset(h, start_pos + m)));
}

void KVCache::read(int layer, bool is_v, int kv_head, int pos, float* out) const {
  kv_decode(type_, is_v ? v(layer) : k(layer), offset(kv_head, pos), size_t(head_dim_), out);
}

void KVCache::poison() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> row(size_t(head_dim_), nan);
  for (int l = 0; l < n_layers(); ++l)
    for (int h = 0; h < n_kv_heads_; ++h)
      for (int p = 0; p < capacity_; ++p)
        for (bool is_v : {false, true}) {
          auto* base = static_cast<uint8_t*>(is_v ? v(l) : k(l));
          kv_encode(type_, row.data(), size_t(head_dim_), base + type_.bytes(offset(h, p)));
        }
}

}  // namespace kvp
