#pragma once
// Sweeps thinned in the sanitizer build. The Release run executes every case of a sweep; the
// sanitizer build (KVP_CHECKING_BUILD, CMakeLists.txt) looks for memory and UB faults, which a case
// finds by running code paths, not by being one more point of a grid whose paths the other points
// already run. So there a sweep keeps every path (each format, policy, tile, sampler) at least once
// and drops only repeats of a path at other grid points: an instrumented case costs 10-50x a
// Release one, and CI (.ci/run) has 30 minutes for both builds.
#include <cstddef>

namespace kvp::test {

#ifdef KVP_CHECKING_BUILD
inline constexpr bool kCheckingBuild = true;
#else
inline constexpr bool kCheckingBuild = false;
#endif

// Whether grid point (i, j) runs: all of them in a Release build; in the sanitizer build those on
// every `stride`-th diagonal, so each value of i and each value of j (j < stride * count of i)
// still runs, with a partner that rotates.
inline bool runs_grid_point(size_t i, size_t j, size_t stride) { return !kCheckingBuild || (i + j) % stride == 0; }

}  // namespace kvp::test
