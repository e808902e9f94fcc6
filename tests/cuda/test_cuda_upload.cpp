// cuda_upload.cu: a copy through the pinned staging buffers moves exactly the bytes a plain copy
// moves, at sizes around its threshold (4 MiB) and its chunk (32 MiB), from pageable memory at odd
// offsets; and every copy counts into upload_totals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/device.h"
#include "cuda/cuda_runtime_api.h"
#include "cuda/cuda_test_util.h"

namespace kvp {
namespace {

struct Staged {
  explicit Staged(bool on) : was(cuda::staged_upload_on()) { cuda::set_staged_upload(on); }
  ~Staged() { cuda::set_staged_upload(was); }
  bool was;
};

TEST(CudaUpload, StagedCopiesMoveThePlainCopysBytes) {
  KVP_REQUIRE_GPU();
  const size_t MiB = size_t(1) << 20;
  for (const size_t n : {size_t(1000), 4 * MiB - 1, 4 * MiB, 32 * MiB, 32 * MiB + 7, 97 * MiB + 3}) {
    // A source that starts 3 bytes into its allocation, filled with a pattern no chunk repeats.
    std::vector<uint8_t> host(n + 3);
    uint32_t x = 2463534242u ^ uint32_t(n);
    for (uint8_t& b : host) {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      b = uint8_t(x >> 24);
    }
    void* dev = cuda::alloc(n);
    for (const bool staged : {true, false}) {
      Staged s(staged);
      const cuda::UploadTotals before = cuda::upload_totals();
      cuda::to_device(dev, host.data() + 3, n);
      EXPECT_EQ(cuda::upload_totals().bytes, before.bytes + n);
      std::vector<uint8_t> back(n, 0);
      cuda::to_host(back.data(), dev, n);
      const size_t first_bad = size_t(std::mismatch(back.begin(), back.end(), host.begin() + 3).first - back.begin());
      EXPECT_EQ(first_bad, n) << n << " bytes, staged " << staged << ": first wrong byte";
    }
    cuda::release(dev);
  }
}

}  // namespace
}  // namespace kvp
