#pragma once
// How much of a set of memory ranges is mapped with 2 MiB pages (transparent huge pages for
// anonymous memory, PMD-mapped page-cache folios for mapped files). Decode streams every weight
// once per token, and in 4 KiB pages it runs at about two thirds of the speed (see
// core/mapped_file.cpp), so `kvparity bench` reports this beside its speeds.
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace kvp {

// The x86-64 PMD page size: transparent huge pages and page-cache folios mapped by one PMD entry.
constexpr size_t kHugePageBytes = size_t(2) << 20;

struct HugePageShare {
  size_t resident_bytes = 0;  // resident bytes of the mappings that hold the ranges
  size_t huge_bytes = 0;      // of which mapped by 2 MiB entries
  bool known = false;         // false where /proc/self/smaps cannot be read
  double share() const { return resident_bytes > 0 ? double(huge_bytes) / double(resident_bytes) : 0.0; }
};

// Sums over every mapping in /proc/self/smaps that overlaps one of the [pointer, pointer+bytes)
// ranges (each mapping counted once).
HugePageShare huge_page_share(const std::vector<std::pair<const void*, size_t>>& ranges);

// The same, from the text of an smaps file (exposed for tests).
HugePageShare huge_page_share_from_smaps(const std::string& smaps,
                                         const std::vector<std::pair<const void*, size_t>>& ranges);

}  // namespace kvp
