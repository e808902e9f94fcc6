#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace kvp {

namespace {
constexpr uint64_t kEvictAfterWriteBytes = uint64_t(64) << 20;
}  // namespace

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
  // A full disk often only shows up when flushing, so every result here matters; fsync makes the
  // rename publish data that is really on disk.
  std::FILE* f = f_;
  f_ = nullptr;
  const bool synced = std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  // The pages write() left in the page cache are 4 KiB folios, and a model file mapped from them
  // decodes at two thirds of the speed it reaches once the cache holds it in 2 MiB folios (see
  // mapped_file.cpp). The data is on disk now, so dropping those clean pages loses nothing: the
  // first load reads the file back through readahead, which builds large folios.
  if (synced && written_ >= kEvictAfterWriteBytes) ::posix_fadvise(fileno(f), 0, 0, POSIX_FADV_DONTNEED);
  if (std::fclose(f) != 0 || !synced) {
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

void write_file_atomic(const std::string& path, const std::string& content) {
  AtomicFile f(path);
  f.write_str(content);
  f.commit();
}

}  // namespace kvp
