#include "io/io_util.h"

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kvp::io {

AtomicFile::AtomicFile(const std::string& path) : path_(path), tmp_(path + ".tmp") {
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (f_ == nullptr) fail("{}: cannot create file: {}", path_, std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (f_ != nullptr) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

void AtomicFile::write(const void* p, size_t n) {
  if (n == 0) return;
  if (std::fwrite(p, 1, n, f_) != n) fail("{}: write failed after {} bytes: {}", path_, written_, std::strerror(errno));
  written_ += n;
}

void AtomicFile::pad_zeros(size_t n) {
  static const char zeros[64] = {};
  while (n > 0) {
    size_t k = n < sizeof(zeros) ? n : sizeof(zeros);
    write(zeros, k);
    n -= k;
  }
}

void AtomicFile::commit() {
  // fclose flushes; a full disk often only shows up here, so its result matters.
  std::FILE* f = f_;
  f_ = nullptr;
  if (std::fflush(f) != 0 || std::fclose(f) != 0) {
    int e = errno;
    std::remove(tmp_.c_str());
    fail("{}: write failed: {}", path_, std::strerror(e));
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int e = errno;
    std::remove(tmp_.c_str());
    fail("{}: cannot rename {} into place: {}", path_, tmp_, std::strerror(e));
  }
}

std::string read_text_file(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail("{}: not found (or not a regular file)", path);
  auto sz = std::filesystem::file_size(path, ec);
  if (ec) fail("{}: cannot stat: {}", path, ec.message());
  if (sz > max_bytes) fail("{}: file is {} bytes, more than the {} allowed for this kind of file", path, sz, max_bytes);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open: {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("{}: read error", path);
  return ss.str();
}

}  // namespace kvp::io
