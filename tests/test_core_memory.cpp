// Where weights live in memory: model files mapped at 2 MiB-aligned addresses (so the kernel can
// map page-cache huge folios with PMD entries), written model files dropped from the page cache,
// and the /proc/self/smaps reading behind `kvparity bench`'s weights_huge_page_share.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/huge_pages.h"
#include "core/mapped_file.h"
#include "core/tensor.h"
#include "test_util.h"

namespace kvp {
namespace {

void write_pattern(const std::string& path, size_t n) {
  std::vector<char> buf(n);
  for (size_t i = 0; i < n; ++i) buf[i] = char((i * 131 + 7) & 0xff);
  std::ofstream(path, std::ios::binary).write(buf.data(), std::streamsize(n));
}

TEST(MappedFile, LargeFilesMapAtHugePageAlignedAddresses) {
  test::TempDir dir;
  const size_t n = 3 * kHugePageBytes + 123;
  write_pattern(dir.file("big.bin"), n);
  auto f = MappedFile::open(dir.file("big.bin"));
  ASSERT_EQ(f->size(), n);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f->data()) % kHugePageBytes, 0u);
  for (size_t i : {size_t(0), size_t(4095), kHugePageBytes, n - 1}) ASSERT_EQ(f->data()[i], uint8_t((i * 131 + 7) & 0xff)) << i;
  EXPECT_THROW(f->bytes(n - 10, 11, "tail"), Error);
}

TEST(MappedFile, SmallFilesStillMap) {
  test::TempDir dir;
  write_pattern(dir.file("small.bin"), 100);
  auto f = MappedFile::open(dir.file("small.bin"));
  ASSERT_EQ(f->size(), 100u);
  EXPECT_EQ(f->data()[99], uint8_t((99 * 131 + 7) & 0xff));
}

TEST(HugePages, SmapsParsingCountsOnlyMappingsHoldingTheRanges) {
  const std::string smaps =
      "7f0000000000-7f0000600000 r--p 00000000 fe:00 42        /models/tl.gguf\n"
      "Size:               6144 kB\n"
      "Rss:                6144 kB\n"
      "AnonHugePages:         0 kB\n"
      "FilePmdMapped:      4096 kB\n"
      "VmFlags: rd mr mw me hg\n"
      "7f0000600000-7f0000800000 rw-p 00000000 00:00 0\n"
      "Rss:                2048 kB\n"
      "AnonHugePages:      2048 kB\n"
      "FilePmdMapped:         0 kB\n";
  const auto* inside = reinterpret_cast<const void*>(uintptr_t(0x7f0000100000));
  HugePageShare s = huge_page_share_from_smaps(smaps, {{inside, 4096}});
  EXPECT_TRUE(s.known);
  EXPECT_EQ(s.resident_bytes, size_t(6144) * 1024);
  EXPECT_EQ(s.huge_bytes, size_t(4096) * 1024);
  EXPECT_DOUBLE_EQ(s.share(), 4096.0 / 6144.0);
  // Overlapping both mappings counts each once.
  s = huge_page_share_from_smaps(smaps, {{inside, 4096}, {reinterpret_cast<const void*>(uintptr_t(0x7f00005ff000)), 8192}});
  EXPECT_EQ(s.resident_bytes, size_t(8192) * 1024);
  EXPECT_EQ(s.huge_bytes, size_t(6144) * 1024);
  // Nothing overlaps: nothing counted.
  s = huge_page_share_from_smaps(smaps, {{reinterpret_cast<const void*>(uintptr_t(0x1000)), 4096}});
  EXPECT_EQ(s.resident_bytes, 0u);
  EXPECT_DOUBLE_EQ(s.share(), 0.0);
}

TEST(HugePages, ReadsThisProcessesMappings) {
  AlignedBuffer buf(8 * kHugePageBytes);  // zero-filled, so resident
  const HugePageShare s = huge_page_share({{buf.data(), buf.size()}});
  ASSERT_TRUE(s.known) << "/proc/self/smaps unreadable";
  EXPECT_GE(s.resident_bytes, buf.size());
  EXPECT_LE(s.huge_bytes, s.resident_bytes);
}

// Pages of `path` resident in the page cache, as a fraction.
double resident_fraction(const std::string& path) {
  auto f = MappedFile::open(path);
  const long page = sysconf(_SC_PAGESIZE);
  const size_t pages = (f->size() + size_t(page) - 1) / size_t(page);
  std::vector<unsigned char> vec(pages);
  if (mincore(const_cast<uint8_t*>(f->data()), f->size(), vec.data()) != 0) return -1;
  size_t resident = 0;
  for (unsigned char v : vec) resident += v & 1;
  return double(resident) / double(pages);
}

TEST(AtomicFile, LargeOutputLeavesThePageCache) {
  test::TempDir dir;
  struct statfs fs {};
  ASSERT_EQ(statfs(dir.path().c_str(), &fs), 0);
  if (fs.f_type == 0x01021994 /* TMPFS_MAGIC */)
    GTEST_SKIP() << dir.path() << " is tmpfs, which has no backing store to drop pages to";
  std::vector<char> chunk(size_t(1) << 20, 'x');
  {
    AtomicFile out(dir.file("model.bin"));
    for (int i = 0; i < 64; ++i) out.write(chunk.data(), chunk.size());
    out.commit();
  }
  const double after_large = resident_fraction(dir.file("model.bin"));
  EXPECT_GE(after_large, 0.0);
  EXPECT_LT(after_large, 0.25) << "a 64 MiB model file stayed in the page cache in the 4 KiB pages write() made";
  {
    AtomicFile out(dir.file("small.json"));
    out.write(chunk.data(), 4096);
    out.commit();
  }
  EXPECT_GT(resident_fraction(dir.file("small.json")), 0.99) << "small outputs (results, reports) stay cached";
}

}  // namespace
}  // namespace kvp
