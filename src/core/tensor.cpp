#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include <sys/mman.h>

#include "core/huge_pages.h"

namespace kvp {

void view_to_f32(const TensorView& t, size_t first, size_t n, float* out) {
  if (!t.quantized()) {
    to_f32(t.dtype, static_cast<const uint8_t*>(t.data) + first * dtype_size(t.dtype), out, n);
    return;
  }
  const size_t be = block_elems(t.quant);
  dequantize_blocks(t.quant, static_cast<const uint8_t*>(t.data) + first / be * block_bytes(t.quant), n / be, out);
}

AlignedBuffer::AlignedBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  const size_t rounded = (bytes + 63) / 64 * 64;
  // Large buffers (weights converted at load, KV caches) are 2 MiB aligned and asked to be backed
  // by transparent huge pages: decode streams them once per token, and huge pages spare it a TLB
  // miss, and the hardware prefetchers a stop, every 4 KiB.
  const bool huge = rounded >= kHugePageBytes;
  const size_t align = huge ? kHugePageBytes : 64;
  const size_t bytes_alloc = (rounded + align - 1) / align * align;
  data_ = std::aligned_alloc(align, bytes_alloc);
  if (data_ == nullptr) throw std::bad_alloc();
  if (huge) ::madvise(data_, bytes_alloc, MADV_HUGEPAGE);  // advice only: failure changes nothing
  std::memset(data_, 0, rounded);
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    std::free(data_);
    data_ = o.data_;
    size_ = o.size_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

}  // namespace kvp
