#pragma once
// Static KV cache (DESIGN.md §5): per layer, K and V preallocated to `capacity` positions as
// [n_kv_heads][capacity][head_dim] in the KV type (a float dtype, or a quantised format whose
// blocks run along head_dim: core/kv_type.h). `length` positions are valid; attention must
// never read beyond them, which the NaN-poisoning test checks.
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/kv_type.h"
#include "core/tensor.h"
#include "model/config.h"

namespace kvp {

class KVCache {
 public:
  // The cache lives on `device` (the device of the kernels that will read it).
  KVCache(const ModelConfig& config, int capacity, const KvType& kv_type, Device device = Device::Cpu);
  // Bytes of K (or of V) for one position of one layer, in `kv_type`; refuses a block type that
  // head_dim does not hold whole.
  static size_t position_bytes(const ModelConfig& config, const KvType& kv_type);

  int capacity() const { return capacity_; }
  int length() const { return length_; }
  void set_length(int n);  // truncates or extends the valid range (extend only over written positions)
  void clear() { length_ = 0; }
  const KvType& type() const { return type_; }
  int n_layers() const { return int(k_.size()); }
  int n_kv_heads() const { return n_kv_heads_; }
  int head_dim() const { return head_dim_; }
  Device device() const { return device_; }

  void* k(int layer) { return k_[size_t(layer)].data(); }
  void* v(int layer) { return v_[size_t(layer)].data(); }
  const void* k(int layer) const { return k_[size_t(layer)].data(); }
  const void* v(int layer) const { return v_[size_t(layer)].data(); }

  // Writes M rows of K or V ([M, n_kv_heads*head_dim] fp32, host memory) for positions start_pos..
  // into the cache (the lab's KV patching; the forward pass writes through Kernels::kv_write).
  void write(int layer, bool is_v, const float* rows, int M, int start_pos);
  // Reads one (layer, kv head, position) entry as fp32 into host memory.
  void read(int layer, bool is_v, int kv_head, int pos, float* out) const;
  // Fills every position with NaN (the poisoning test: unwritten entries must never matter).
  void poison();

 private:
  // Element index of (kv_head, pos, 0); a whole number of blocks, since head_dim is.
  size_t offset(int kv_head, int pos) const { return (size_t(kv_head) * capacity_ + size_t(pos)) * head_dim_; }
  int capacity_, n_kv_heads_, head_dim_;
  int length_ = 0;
  KvType type_;
  Device device_;
  std::vector<DeviceBuffer> k_, v_;
};

}  // namespace kvp
