#pragma once
// Counter-based random numbers (Philox-4x32-10, Salmon et al. 2011): the draw for
// (seed, sequence id, step) is a pure function of those three numbers, so the cache-ON and
// cache-OFF paths, batches and shards all see the same uniform at the same step.
#include <array>
#include <cstdint>

namespace kvp {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// Uniform in [0, 1) with 53 random bits.
double uniform_at(uint64_t seed, uint64_t sequence_id, uint64_t step);

}  // namespace kvp
