#pragma once
// Device pieces of the `portable` policy's kernels (cuda_portable*.cu): the rounding functor for
// pscalar's templates and the specification's 16-lane tree spread over the threads of a warp.
#include "cuda/cuda_device_api.cuh"
#include "kernels/portable_scalar.h"

namespace kvp::cuda {

constexpr unsigned kFullWarp = 0xffffffffu;

// round_act as a functor (pscalar's element functions take the rounding as an argument).
struct RoundTo {
  int act;
  __device__ __forceinline__ float operator()(float v) const { return round_act(v, act); }
};

// The specification's tree over one output's 16 lane sums, held LPT lanes per thread by 16 / LPT
// consecutive threads (thread t of the group holds lanes t*LPT .. t*LPT + LPT - 1; groups aligned
// to 16 / LPT). Each level adds the pairs pscalar::tree16 adds, lane i + lane i + off for off = 8,
// 4, 2, 1: across threads by a shuffle while the partner lives in another thread, inside the
// thread after that. Every thread of the warp must take part; the sum ends in v[0] of the group's
// first thread. (Addition commutes bit for bit, so who holds which operand does not matter.)
template <int LPT>
__device__ __forceinline__ void tree_lanes(float (&v)[LPT]) {
  static_assert(LPT == 1 || LPT == 2 || LPT == 4 || LPT == 8 || LPT == 16, "lanes per thread divide 16");
  constexpr int kGroup = 16 / LPT;
#pragma unroll
  for (int off = 8; off >= 1; off /= 2) {
    if (off >= LPT) {
#pragma unroll
      for (int i = 0; i < LPT; ++i) v[i] = pscalar::add(v[i], __shfl_down_sync(kFullWarp, v[i], off / LPT, kGroup));
    } else {
#pragma unroll
      for (int i = 0; i < off && i + off < LPT; ++i) v[i] = pscalar::add(v[i], v[i + off]);  // off < LPT
    }
  }
}

}  // namespace kvp::cuda
