#include "kernels/dequant_rows.h"

#include <algorithm>

namespace kvp {

void dequantize_rows(const TensorView& W, int64_t n0, int64_t rows, int64_t k0, int64_t k1, int64_t col_origin,
                     float* dst, size_t ld) {
  const int64_t K = W.cols();
  const int64_t be = int64_t(block_elems(W.quant));
  const int64_t kb0 = k0 / be * be, kb1 = std::min(K, (k1 + be - 1) / be * be);
  const size_t stride = W.row_bytes();
  const auto* base = static_cast<const uint8_t*>(W.data);
  for (int64_t r = 0; r < rows; ++r)
    dequantize_blocks_fast(W.quant, base + size_t(n0 + r) * stride + size_t(kb0 / be) * block_bytes(W.quant),
                           size_t((kb1 - kb0) / be), dst + size_t(r) * ld + size_t(kb0 - col_origin));
}

void decode_kv_span(const KvType& t, const void* src, size_t first, size_t n, float* out) {
  if (const QuantType q = t.block_quant(); q != QuantType::None)
    return dequantize_blocks_fast(q, static_cast<const uint8_t*>(src) + t.bytes(first), n / t.block_elems(), out);
  if (t.format == KvFormat::FP8_E4M3 || t.format == KvFormat::FP8_E5M2)
    return decode_fp8_fast(t, static_cast<const uint8_t*>(src) + t.bytes(first), n, out);
  kv_decode(t, src, first, n, out);
}

int64_t dequant_chunk_rows(int64_t K, int64_t min_rows, int64_t max_rows) {
  constexpr int64_t kL1Floats = 8192;  // 32 KiB
  return std::clamp<int64_t>(kL1Floats / std::max<int64_t>(K, 1), min_rows, max_rows);
}

}  // namespace kvp
