#include "io/io_util.h"

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kvp::io {


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
