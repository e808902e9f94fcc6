#include "core/huge_pages.h"

#include <cstdint>
#include <fstream>
#include <sstream>

namespace kvp {

namespace {

bool overlaps(uintptr_t lo, uintptr_t hi, const std::vector<std::pair<const void*, size_t>>& ranges) {
  for (const auto& [p, n] : ranges) {
    const auto b = reinterpret_cast<uintptr_t>(p);
    if (n > 0 && b < hi && lo < b + n) return true;
  }
  return false;
}

// "Rss:   1234 kB" -> 1234 * 1024 when the line starts with `key`.
bool field_bytes(const std::string& line, const char* key, size_t& out) {
  const std::string k(key);
  if (line.compare(0, k.size(), k) != 0) return false;
  std::istringstream in(line.substr(k.size()));
  size_t kb = 0;
  if (!(in >> kb)) return false;
  out = kb * 1024;
  return true;
}

}  // namespace

HugePageShare huge_page_share_from_smaps(const std::string& smaps,
                                         const std::vector<std::pair<const void*, size_t>>& ranges) {
  HugePageShare r;
  r.known = true;
  std::istringstream in(smaps);
  std::string line;
  bool selected = false;
  while (std::getline(in, line)) {
    // A mapping's header: "lo-hi perms offset dev inode [path]", addresses in hex.
    const size_t dash = line.find('-');
    const size_t space = line.find(' ');
    if (dash != std::string::npos && space != std::string::npos && dash < space && line.find(':') > space) {
      uintptr_t lo = 0, hi = 0;
      std::istringstream h(line.substr(0, space));
      char sep = 0;
      if (h >> std::hex >> lo >> sep >> hi && sep == '-') {
        selected = overlaps(lo, hi, ranges);
        continue;
      }
    }
    if (!selected) continue;
    size_t v = 0;
    if (field_bytes(line, "Rss:", v)) r.resident_bytes += v;
    else if (field_bytes(line, "AnonHugePages:", v) || field_bytes(line, "FilePmdMapped:", v) ||
             field_bytes(line, "ShmemPmdMapped:", v))
      r.huge_bytes += v;
  }
  return r;
}

HugePageShare huge_page_share(const std::vector<std::pair<const void*, size_t>>& ranges) {
  std::ifstream f("/proc/self/smaps");
  if (!f) return {};
  std::ostringstream text;
  text << f.rdbuf();
  return huge_page_share_from_smaps(text.str(), ranges);
}

}  // namespace kvp
