#pragma once
// Quantised weights in the matmul kernels: every policy dequantises a few rows of W at a time
// into fp32 scratch and runs its own fp32 path on them (the standard decode GEMV first tries
// simd::dot_rows_quant, which decodes in registers with the same result). The per-output summation orders of all
// three policies do not depend on which rows a call covers (kernels.h, simd_ops.h,
// invariant_simd.h), and the fp32 values are exactly core/quant.h's, so the result is bitwise the
// result for the same matrix dequantised to F32 beforehand — the on-the-fly path is a memory
// layout, not a numerical choice.
#include <cstddef>
#include <cstdint>

#include "core/kv_type.h"
#include "core/tensor.h"

namespace kvp {

// Rows [n0, n0 + rows) of quantised W, columns [k0, k1) widened to the enclosing block
// boundaries, into dst: column k of row n0 + r lands at dst[r * ld + (k - col_origin)].
void dequantize_rows(const TensorView& W, int64_t n0, int64_t rows, int64_t k0, int64_t k1, int64_t col_origin,
                     float* dst, size_t ld);

// core/quant.h's dequantize_blocks, vectorised for the formats decode spends its time on (the
// others fall back to the scalar decoders): the same values, bit for bit.
void dequantize_blocks_fast(QuantType q, const void* blocks, size_t n_blocks, float* out);

// Walks rows [n0, n1) of quantised W in chunks of at most R rows: each chunk is dequantised into
// buf (R * K floats; row n0 + i of the chunk at buf + i * K, columns [k0, k1) widened to blocks)
// and handed to f(first_row, rows), which runs a kernel's fp32 path on it.
template <class F>
void for_dequantized_chunks(const TensorView& W, int64_t n0, int64_t n1, int64_t k0, int64_t k1, int64_t R,
                            float* buf, F&& f) {
  const int64_t K = W.cols();
  for (int64_t n = n0; n < n1; n += R) {
    const int64_t r = n1 - n < R ? n1 - n : R;
    dequantize_rows(W, n, r, k0, k1, 0, buf, size_t(K));
    f(n, r);
  }
}

// n FP8 codes (t an fp8 KV type) to fp32, vectorised: core/kv_type.h's values times t.scale, bit
// for bit (kv_decode for any other type).
void decode_fp8_fast(const KvType& t, const void* src, size_t n, float* out);

// Elements [first, first + n) of a KV cache array stored as `t` (first and n whole blocks), in
// fp32: the vectorised decoders for q8_0/q4_0 and fp8, core/kv_type.h's otherwise. Same values.
void decode_kv_span(const KvType& t, const void* src, size_t first, size_t n, float* out);

// Rows per dequantised chunk so that a chunk (at least `min_rows`, at most `max_rows` rows of K
// floats) stays near L1 while the fp32 path reads it back.
int64_t dequant_chunk_rows(int64_t K, int64_t min_rows = 1, int64_t max_rows = 16);

}  // namespace kvp
