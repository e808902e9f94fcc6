#include "runtime/kv_cache.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace kvp {

KVCache::KVCache(const ModelConfig& config, int capacity, const KvType& kv_type, Device device)
    : capacity_(capacity), n_kv_heads_(config.n_kv_heads), head_dim_(config.head_dim), type_(kv_type), device_(device) {
  if (capacity <= 0) fail("KV cache capacity must be positive (got {})", capacity);
  const size_t bytes = position_bytes(config, kv_type) * size_t(capacity);
  if (!(type_.scale > 0.0f && std::isfinite(type_.scale)))
    fail("--kv-scale must be a positive finite number (got {})", type_.scale);
  for (int l = 0; l < config.n_layers; ++l) {
    k_.emplace_back(device, bytes);
    v_.emplace_back(device, bytes);
  }
}

size_t KVCache::position_bytes(const ModelConfig& config, const KvType& kv_type) {
  if (size_t(config.head_dim) % kv_type.block_elems() != 0)
    fail("--kv-dtype {} stores blocks of {} values along head_dim, but this model's head_dim is {}", kv_type.name(),
         kv_type.block_elems(), config.head_dim);
  return size_t(config.n_kv_heads) * kv_type.bytes(size_t(config.head_dim));
}

void KVCache::set_length(int n) {
  if (n < 0 || n > capacity_) fail("KV cache length {} outside [0, {}]", n, capacity_);
  length_ = n;
}

void KVCache::write(int layer, bool is_v, const float* rows, int M, int start_pos) {
  if (start_pos < 0 || start_pos + M > capacity_)
    fail("KV cache overflow: positions {}..{} exceed the cache capacity {}", start_pos, start_pos + M - 1, capacity_);
  auto* base = static_cast<uint8_t*>(is_v ? v(layer) : k(layer));
  const size_t row_bytes = type_.bytes(size_t(head_dim_));
  std::vector<uint8_t> encoded(device_ == Device::Cpu ? 0 : row_bytes);
  for (int m = 0; m < M; ++m)
    for (int h = 0; h < n_kv_heads_; ++h) {
      const float* row = rows + (size_t(m) * n_kv_heads_ + h) * head_dim_;
      uint8_t* at = base + type_.bytes(offset(h, start_pos + m));
      if (device_ == Device::Cpu) {
        kv_encode(type_, row, size_t(head_dim_), at);
      } else {
        kv_encode(type_, row, size_t(head_dim_), encoded.data());
        host_to_device(device_, at, encoded.data(), row_bytes);
      }
    }
}

void KVCache::read(int layer, bool is_v, int kv_head, int pos, float* out) const {
  if (device_ == Device::Cpu) return kv_decode(type_, is_v ? v(layer) : k(layer), offset(kv_head, pos), size_t(head_dim_), out);
  const size_t row_bytes = type_.bytes(size_t(head_dim_));
  std::vector<uint8_t> encoded(row_bytes);
  device_to_host(device_, encoded.data(), static_cast<const uint8_t*>(is_v ? v(layer) : k(layer)) +
                                               type_.bytes(offset(kv_head, pos)), row_bytes);
  kv_decode(type_, encoded.data(), 0, size_t(head_dim_), out);
}

void KVCache::poison() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> row(size_t(head_dim_), nan);
  const size_t row_bytes = type_.bytes(size_t(head_dim_));
  std::vector<uint8_t> layer(type_.bytes(size_t(n_kv_heads_) * capacity_ * head_dim_));
  for (size_t at = 0; at + row_bytes <= layer.size(); at += row_bytes) kv_encode(type_, row.data(), size_t(head_dim_), layer.data() + at);
  for (int l = 0; l < n_layers(); ++l)
    for (bool is_v : {false, true}) host_to_device(device_, is_v ? v(l) : k(l), layer.data(), layer.size());
}

}  // namespace kvp
