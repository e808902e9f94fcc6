#pragma once
// A named, typed, row-major view of tensor data owned elsewhere (a mapping or a WeightStore buffer).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/quant.h"

namespace kvp {

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // outermost first, as in PyTorch/HF ([out, in] for a linear weight)
  const void* data = nullptr;
  // Not None: `data` holds ggml blocks of this format, row by row (shape.back() a multiple of the
  // block), and `dtype` is F32, the type the weights dequantise to (core/quant.h).
  QuantType quant = QuantType::None;

  bool quantized() const { return quant != QuantType::None; }
  int64_t numel() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
  size_t nbytes() const {
    if (quantized()) return size_t(numel() / cols()) * quant_row_bytes(quant, size_t(cols()));
    return size_t(numel()) * dtype_size(dtype);
  }
  // Bytes from one row to the next (rows of a 2-D view).
  size_t row_bytes() const {
    return quantized() ? quant_row_bytes(quant, size_t(cols())) : size_t(cols()) * dtype_size(dtype);
  }
  int64_t rows() const { return shape.size() >= 2 ? shape[0] : 1; }
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
  bool valid() const { return data != nullptr; }
};

// Rows [first, first + n) of `t` (a [a, b, cols] tensor has a x b rows) as a 2-D view named
// `name`, pointing into t's bytes: an expert of a stacked or fused tensor, one of fused projections.
inline TensorView row_slice(const TensorView& t, int64_t first, int64_t n, std::string name) {
  TensorView v = t;
  v.name = std::move(name);
  v.shape = {n, t.cols()};
  v.data = static_cast<const uint8_t*>(t.data) + size_t(first) * t.row_bytes();
  return v;
}

// Elements [first, first + n) of `t` (flat index) as fp32. For a quantised view both ends must fall
// on block boundaries (whole rows always do).
void view_to_f32(const TensorView& t, size_t first, size_t n, float* out);

// 64-byte aligned heap buffer for weights converted at load time and for activations.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& o) noexcept : data_(o.data_), size_(o.size_) { o.data_ = nullptr; o.size_ = 0; }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T> T* as() { return static_cast<T*>(data_); }
  template <typename T> const T* as() const { return static_cast<const T*>(data_); }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kvp
