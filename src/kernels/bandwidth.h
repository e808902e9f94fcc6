#pragma once
// Measured memory read bandwidth, the ceiling for memory-bound decode: each token streams every
// weight once, so tokens/s <= bandwidth / weight bytes.
#include <cstddef>

namespace kvp {

// Best-of-a-few read-only streaming sum over a `bytes` buffer split across `threads` threads
// (a pool created for the measurement), in GB/s (1e9 bytes per second). Use a buffer well beyond
// the last-level cache (e.g. 1 GiB) to measure DRAM rather than cache.
double measure_read_bandwidth_gbs(size_t bytes, int threads);

}  // namespace kvp
