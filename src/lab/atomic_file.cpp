#include "lab/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace kvp {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (f_ == nullptr) fail("{}: cannot create: {}", tmp_, std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (f_ != nullptr) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

void AtomicFile::write(const void* data, size_t n) {
  if (n > 0 && std::fwrite(data, 1, n, f_) != n) fail("{}: write failed: {}", tmp_, std::strerror(errno));
}

void AtomicFile::commit() {
  if (std::fflush(f_) != 0 || ::fsync(fileno(f_)) != 0) fail("{}: flush failed: {}", tmp_, std::strerror(errno));
  std::fclose(f_);
  f_ = nullptr;
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) fail("{}: cannot rename into place: {}", path_, std::strerror(errno));
}

void write_file_atomic(const std::string& path, const std::string& content) {
  AtomicFile f(path);
  f.write(content);
  f.commit();
}

}  // namespace kvp
