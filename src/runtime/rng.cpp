#include "runtime/rng.h"

namespace kvp {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kMul0) * ctr[0];
    const uint64_t p1 = uint64_t(kMul1) * ctr[2];
    ctr = {uint32_t(p1 >> 32) ^ ctr[1] ^ key[0], uint32_t(p1), uint32_t(p0 >> 32) ^ ctr[3] ^ key[1], uint32_t(p0)};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return ctr;
}

double uniform_at(uint64_t seed, uint64_t sequence_id, uint64_t step) {
  const auto r = philox4x32({uint32_t(step), uint32_t(step >> 32), uint32_t(sequence_id), uint32_t(sequence_id >> 32)},
                            {uint32_t(seed), uint32_t(seed >> 32)});
  const uint64_t bits = (uint64_t(r[0]) << 21) ^ (uint64_t(r[1]) >> 11);  // 53 bits
  return double(bits & ((uint64_t(1) << 53) - 1)) * (1.0 / 9007199254740992.0);
}

}  // namespace kvp
