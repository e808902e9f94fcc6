#pragma once
// Read-only memory map of a whole file. Every access that a parser makes goes through
// `bytes(offset, len, what)`, which refuses ranges outside the file instead of reading past it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kvp {

class MappedFile {
 public:
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  size_t size() const { return size_; }
  const uint8_t* data() const { return data_; }
  // Pointer to [offset, offset+len) or an error naming `what` and the file.
  const uint8_t* bytes(uint64_t offset, uint64_t len, const std::string& what) const;

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kvp
