#pragma once
// NumPy .npy (format 1.0) writer/reader for float32 arrays, so outputs load with np.load().
#include <cstdint>
#include <string>
#include <vector>

namespace kvp {

// Writes atomically (path.tmp, then rename).
void write_npy_f32(const std::string& path, const std::vector<int64_t>& shape, const float* data);
// Reads a little-endian float32 C-order .npy; fills shape. Errors name the file.
std::vector<float> read_npy_f32(const std::string& path, std::vector<int64_t>* shape);

}  // namespace kvp
