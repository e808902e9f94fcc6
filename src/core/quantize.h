#pragma once
// kvparity's own quantisers for the formats in core/quant.h, used by `convert --quant` and
// `synth --quant`. They aim for a small round-trip error (every weight within about half a code
// step of its block's grid), not for llama.cpp's importance-weighted search: files they write are
// valid ggml blocks that any GGUF reader dequantises identically.
#include <cstddef>

#include "core/quant.h"

namespace kvp {

// Quantises n floats (a multiple of block_elems(q)) into n / block_elems(q) blocks at `out`.
// Non-finite inputs are the caller's to refuse.
void quantize_row(QuantType q, const float* x, size_t n, void* out);

}  // namespace kvp
