#pragma once
// Karpathy's llama2.c checkpoint: 7 int32 header (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
// vocab_size, seq_len), then fp32 arrays; a negative vocab_size means an unshared classifier at the end.
#include <cstddef>
#include <cstdint>
#include <string>

#include "io/checkpoint.h"

namespace kvp {

// Parses an in-memory image; the views point into `data`, which the caller keeps alive.
// The size must match the header exactly.
Checkpoint parse_llama2c(const uint8_t* data, size_t size, const std::string& name);
Checkpoint load_llama2c(const std::string& path);

}  // namespace kvp
