#pragma once
// Internal helpers shared by the readers and writers in src/io.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/error.h"

namespace kvp::io {

// Bounds-checked little-endian cursor over an in-memory image. Every read either stays inside
// [0, size) or throws an Error naming the file, what was being read and where.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size, const std::string& name) : data_(data), size_(size), name_(name) {}

  size_t pos() const { return pos_; }
  size_t size() const { return size_; }
  size_t remaining() const { return size_ - pos_; }
  const std::string& name() const { return name_; }

  const uint8_t* take(uint64_t n, const char* what) {
    if (n > remaining())
      fail("{}: truncated file: {} needs {} bytes at offset {}, only {} remain", name_, what, n, pos_, remaining());
    const uint8_t* p = data_ + pos_;
    pos_ += size_t(n);
    return p;
  }
  template <typename T>
  T read(const char* what) {
    T v;
    std::memcpy(&v, take(sizeof(T), what), sizeof(T));
    return v;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string name_;
};


// Reads a whole (small) text file such as config.json; errors name the path.
std::string read_text_file(const std::string& path, size_t max_bytes = size_t(64) << 20);

}  // namespace kvp::io
