#pragma once
// A result file that appears whole or not at all: bytes go to `path.tmp`, which is flushed,
// fsync'ed and renamed over `path` on commit(). Destroyed without commit, the temp file is removed.
#include <cstddef>
#include <cstdio>
#include <string>

namespace kvp {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(const void* data, size_t n);
  void write(const std::string& s) { write(s.data(), s.size()); }
  void commit();

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
};

// Convenience: writes the whole string atomically.
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace kvp
