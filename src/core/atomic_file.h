#pragma once
// A file that appears whole or not at all: bytes go to `path.tmp`, which commit() flushes, fsyncs
// and renames over `path`. Destroying an uncommitted writer removes the temporary file, so an
// error or a crash never leaves partial output under the real name.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace kvp {

class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* p, size_t n);
  void write_str(const std::string& s) { write(s.data(), s.size()); }
  template <typename T>
  void write_pod(T v) { write(&v, sizeof(T)); }
  void pad_zeros(size_t n);
  uint64_t written() const { return written_; }
  void commit();

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  uint64_t written_ = 0;
};

void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace kvp
