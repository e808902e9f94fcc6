#pragma once
// safetensors: 8-byte little-endian header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the data section.
// Offsets are relative to the data section.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/checkpoint.h"

namespace kvp {

// Largest JSON header accepted. Real headers are a few hundred bytes per tensor; anything far
// larger is corrupt and would only make the JSON parser allocate.
inline constexpr uint64_t kMaxSafetensorsHeader = uint64_t(256) << 20;

// Parses a whole safetensors image held in memory. Views point into `data`; `name` is the file
// named in errors. Tensors come back in header order (nlohmann sorts keys, so: by name).
// `metadata`, when given, receives the string entries of "__metadata__". `bytes`, when given,
// receives the U8 tensors (refused as an unsupported dtype without it).
std::vector<TensorView> parse_safetensors(const uint8_t* data, size_t size, const std::string& name,
                                          std::map<std::string, std::string>* metadata = nullptr,
                                          std::map<std::string, ByteTensor>* bytes = nullptr);

// True when the first bytes look like a safetensors header: a length below 4 GiB, then '{'.
bool looks_like_safetensors(const uint8_t* data, size_t size);

// A .safetensors file with config.json in the same directory.
Checkpoint load_safetensors_file(const std::string& path);
// A Hugging Face model directory: config.json plus model.safetensors or a sharded
// model.safetensors.index.json; tokenizer.json is recorded when present.
Checkpoint load_hf_dir(const std::string& dir);

}  // namespace kvp
