#include "lab/npy.h"

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/error.h"
#include "core/atomic_file.h"

namespace kvp {

void write_npy_f32(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]) + (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
    n *= shape[i];
  }
  dict += "), }";
  // Magic (6) + version (2) + header length (2) + dict, padded with spaces and a newline to 64 bytes.
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string header = "\x93NUMPY";
  header += char(1);
  header += char(0);
  header += char(dict.size() & 0xff);
  header += char((dict.size() >> 8) & 0xff);
  header += dict;
  AtomicFile out(path);
  out.write_str(header);
  out.write(data, size_t(n) * sizeof(float));
  out.commit();
}

std::vector<float> read_npy_f32(const std::string& path, std::vector<int64_t>* shape) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open", path);
  char magic[10];
  if (!in.read(magic, 10) || std::string(magic, 6) != "\x93NUMPY" || magic[6] != 1)
    fail("{}: not a version 1 .npy file", path);
  const size_t hlen = size_t(uint8_t(magic[8])) | (size_t(uint8_t(magic[9])) << 8);
  std::string dict(hlen, '\0');
  if (!in.read(dict.data(), std::streamsize(hlen))) fail("{}: truncated .npy header", path);
  if (dict.find("'<f4'") == std::string::npos || dict.find("'fortran_order': False") == std::string::npos)
    fail("{}: only little-endian float32 C-order arrays are supported", path);
  std::smatch m;
  if (!std::regex_search(dict, m, std::regex("'shape': \\(([0-9, ]*)\\)"))) fail("{}: .npy header has no shape", path);
  shape->clear();
  std::stringstream ss(m[1].str());
  std::string item;
  int64_t n = 1;
  while (std::getline(ss, item, ',')) {
    if (item.find_first_not_of(' ') == std::string::npos) continue;
    shape->push_back(std::stoll(item));
    n *= shape->back();
  }
  std::vector<float> data(static_cast<size_t>(n));
  if (!in.read(reinterpret_cast<char*>(data.data()), std::streamsize(n * 4))) fail("{}: truncated .npy data", path);
  return data;
}

}  // namespace kvp
