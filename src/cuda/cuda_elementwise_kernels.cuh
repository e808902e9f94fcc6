#pragma once
// The element-wise kernels that a decode step's rounding points fold into (cuda_fusion.cuh has
// why and when), with their dispatch: RoPE, the gated activations (GPT-OSS's clamped SwiGLU
// among them), the residual add, RMSNorm, the cache write, the rounding check and the 16-bit copy
// of a cuBLAS input. Each computes, per element, exactly what its CPU counterpart computes
// (elementwise.cpp, CpuKernels) with the same roundings; only RMSNorm's sum of squares (a
// reduction) is summed in another order, as the standard policy allows.
// A fused kernel does the float operations of the launches it replaces, in their order, on the
// same values: an InRound input is round_act(v) -> written back -> reported, as the rounding
// check would have done before the kernel read it, and an OutCopy is the stored output converted,
// as the separate conversion would have read it. No bit and no NaN/Inf report changes.
// In a header so that the CPU suite runs the same source on the host (simt_host.h,
// tests/test_cuda_fusion_on_cpu.cpp); cuda_elementwise.cu launches them through StreamLaunch.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "cuda/cuda_nonfinite.cuh"
#include "cuda/cuda_ops.h"
#include "kernels/elementwise.h"

// An unnamed namespace: the CPU suite compiles this source for the host in a program that also
// links the GPU build of it, and the two must not meet at link time.
namespace kvp::cuda::elementwise {
namespace {

constexpr unsigned kThreads = 256;
constexpr int kMaxRoundJobs = 4;  // buffers per launch_round_checks launch
constexpr int kMaxRopeJobs = 2;   // q and k

struct RoundJobs {
  RoundJob job[kMaxRoundJobs];
  int n;
};
struct RopeJobs {
  RopeJob job[kMaxRopeJobs];
  int n;
};

// Element i of a 16-bit array of type t (kF16 or kBF16), widened: exact.
__device__ __forceinline__ float widen16(const void* src, int t, size_t i) {
  return t == kBF16 ? load_as_f32<kBF16>(src, i) : load_as_f32<kF16>(src, i);
}

// p[i] as the pending rounding point `in` leaves it (flat index `at` in that point's buffer). ACT:
// that point's dtype where the kernel knows it to be its own compute dtype (the rotation's jobs:
// CudaKernels takes them at that dtype; rope() checks it), a choice fewer per value; -1: in.act's.
// A point whose values a GEMM wrote in 16 bits (InRound::src) reads them there, already rounded.
template <int ACT = -1>
__device__ __forceinline__ float read_rounded(const InRound& in, float* p, size_t i, size_t at) {
  if (in.act < 0) return p[i];
  const int act = ACT >= 0 ? ACT : in.act;
  const float v = in.src != nullptr ? widen16(in.src, act, at) : round_act(p[i], act);
  if (in.write_back) p[i] = v;
  note_nonfinite(in.chk, at, v);
  return v;
}

// The slice of kv.descs[0, n) whose rows hold the row at r (rows `width` floats wide; the slices'
// rows in increasing order): a binary search, since a batch may have hundreds; -1: none.
__device__ __forceinline__ int kv_slice_of(const RopeKv& kv, const float* r, size_t width) {
  if (kv.n <= 0) return -1;
  int lo = 0, hi = kv.n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (kv.descs[mid].rows <= r)
      lo = mid;
    else
      hi = mid - 1;
  }
  const KvWriteDesc& d = kv.descs[lo];
  return r >= d.rows && r < d.rows + size_t(d.n_rows) * width ? lo : -1;
}

// V's cache write in a rotation launch (RopeKv): row m, head h of the V rows, laid out as the K rows
// of the last job (x, heads); each value read through the pending round, as kv_write_kernel does.
// lane / lanes: this thread's place among the threads that share the (row, head).
__device__ void rope_kv_write_v(const RopeKv& kv, const float* kx, int heads, int hd, int m, int h, int lane,
                                int lanes) {
  const size_t width = size_t(heads) * hd;
  const float* kr = kx + size_t(m) * width;
  const int s = kv_slice_of(kv, kr, width);
  if (s < 0) return;
  const KvWriteDesc& dk = kv.descs[s];
  const KvWriteDesc& dv = kv.descs[kv.n + s];
  const size_t r = size_t(kr - dk.rows) / width;                         // the row within its slice
  float* vr = const_cast<float*>(dv.rows) + r * width + size_t(h) * hd;  // written only through a pending round
  const size_t first = kv.v_in.act < 0 ? 0 : size_t(vr - kv.v_base);
  const size_t at = (size_t(h) * dv.capacity + size_t(dv.start_pos) + r) * hd;
  for (int e = lane; e < hd; e += lanes)
    copy_out(OutCopy{dv.cache, kv.store}, at + e, read_rounded(kv.v_in, vr, e, first + e));
}

// The rotation's shape: units (job, row, head), the rotations' first (job by job, each row's heads
// in order) then, with V's cache write, one per row and head of V; `lanes` threads a unit (on the
// GPU a warp's multiple), `per_round` units side by side in a block, `rounds` such rows of units
// one after another. A block of several units, each thread's loads for all its rounds issued
// before any is used: one unit a block (the layout before 2026-11-27, KVPARITY_CUDA_ROPE_BLOCK=1)
// gives a 7B cache-OFF step of 64 x 200 tokens 1.2 million blocks of 64 threads a layer, each
// waiting on its position's table entry after its position. Which thread rotates which pair never
// changes an operation or its order, so the bits are those of one unit a block.
// `pairs`: a thread rotates that many of its unit's pairs (lane, lane + lanes, ...; one before
// 2026-11-27 evening), so that a large launch pays each unit's bookkeeping (its job, row and head,
// the cache slice's binary search, the table's row) once for several pairs: Nsight Compute timed
// that step's rotation at 1.27 ms a layer on an H100, SM throughput 67% and DRAM 34%, where its
// ~1.45 GB take ~0.45 ms: bound by issued instructions, not bytes.
constexpr int kRopeMaxRounds = 4;
constexpr int kRopeMaxPairs = 2;  // 4 took ptxas from 48 to 80 registers
struct RopeShape {
  int lanes, per_round, rounds, pairs;
};

// Rotation unit u of a launch: its job, row, head and the offset of its head in the job's buffer.
struct RopeUnit {
  int job, row, head;
  size_t base;
};
__device__ __forceinline__ RopeUnit rope_unit(const RopeJobs& jobs, int M, int hd, int u) {
  int j = 0;
  while (j + 1 < jobs.n && u >= M * jobs.job[j].n_heads) u -= M * jobs.job[j++].n_heads;
  const int n_heads = jobs.job[j].n_heads, row = u / n_heads, head = u % n_heads;
  return RopeUnit{j, row, head, (size_t(row) * n_heads + head) * hd};
}

// Every term of a unit is read (phase 1) before any is written (phase 2, after a barrier), so pairs
// read from adjacent slots can be written to the halves in place. hd even where a job has an
// InRound (the pairs then cover the head, so the rounded input is all overwritten). With kv.n > 0
// the last job's rotated rows also go to the cache as they are stored (or there only: RopeJob::
// store, where nothing reads K's rows again; ~0.2 GB a layer of the study's step). The compute dtype is the
// template's: each pair rounds eight times, and a run-time dtype made each of those a choice
// among three (the kernel is bound by issued instructions at the study's sizes, above).
template <int ACT>
__global__ void rope_kernel(RopeJobs jobs, int M, int hd, int rd, const int* pos, const float* cos_t,
                            const float* sin_t, int adjacent, int once, RopeKv kv, RopeShape shape) {
  constexpr int act = ACT;
  pdl_entry();
  int heads = 0;
  for (int t = 0; t < jobs.n; ++t) heads += jobs.job[t].n_heads;
  const int last = jobs.n - 1;
  const int rotations = M * heads, v_units = kv.n > 0 && kv.with_v ? M * jobs.job[last].n_heads : 0;
  const int lane = int(threadIdx.x) % shape.lanes, half = hd / 2;
  const int unit0 = int(blockIdx.x) * shape.rounds * shape.per_round + int(threadIdx.x) / shape.lanes;
  float o0[kRopeMaxRounds][kRopeMaxPairs], o1[kRopeMaxRounds][kRopeMaxPairs];
#pragma unroll
  for (int r = 0; r < kRopeMaxRounds; ++r) {
    const int u = unit0 + r * shape.per_round;
    if (r >= shape.rounds || u >= rotations || lane >= half) continue;
    const RopeUnit un = rope_unit(jobs, M, hd, u);
    float* v = jobs.job[un.job].x + un.base;
    const InRound in = jobs.job[un.job].in;
    const size_t row_at = size_t(pos[un.row]) * half;
#pragma unroll
    for (int k = 0; k < kRopeMaxPairs; ++k) {
      const int p = lane + k * shape.lanes;
      if (k >= shape.pairs || p >= half) continue;
      // (rd < hd: the pairs past rd/2 hold the dimensions a partial rotary factor passes through)
      const RopePairPlace pl = rope_pair(p, hd, rd, adjacent != 0);
      const float a = read_rounded<ACT>(in, v, pl.in_a, un.base + pl.in_a);
      const float bv = read_rounded<ACT>(in, v, pl.in_b, un.base + pl.in_b);
      if (!pl.rotates) {
        o0[r][k] = a;
        o1[r][k] = bv;
        continue;
      }
      // once (RopeRounding::Once): fp32 cos/sin and terms, the sums alone rounded.
      const int term = once ? kF32 : act;
      const float c = round_act(cos_t[row_at + p], term), sn = round_act(sin_t[row_at + p], term);
      const float t0 = round_act(a * c, term), t1 = round_act(-bv * sn, term);
      const float t2 = round_act(bv * c, term), t3 = round_act(a * sn, term);
      o0[r][k] = round_act(t0 + t1, act);
      o1[r][k] = round_act(t2 + t3, act);
    }
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < kRopeMaxRounds; ++r) {
    const int u = unit0 + r * shape.per_round;
    if (r >= shape.rounds) continue;
    if (u >= rotations) {
      const int vb = u - rotations, kvh = jobs.job[last].n_heads;
      if (vb < v_units) rope_kv_write_v(kv, jobs.job[last].x, kvh, hd, vb / kvh, vb % kvh, lane, shape.lanes);
      continue;
    }
    if (lane >= half) continue;
    const RopeUnit un = rope_unit(jobs, M, hd, u);
    float* x = jobs.job[un.job].x;
    float* v = x + un.base;
    const NonFiniteSlot chk = jobs.job[un.job].chk;
    const bool keep = jobs.job[un.job].store;
    const OutCopy cp = jobs.job[un.job].copy;
    const size_t width = size_t(jobs.job[un.job].n_heads) * hd;
    const int s = kv.n > 0 && un.job == last ? kv_slice_of(kv, x + size_t(un.row) * width, width) : -1;
    size_t cache_at = 0;
    OutCopy to{};
    if (s >= 0) {  // K's cache write, of the values stored below
      const KvWriteDesc& d = kv.descs[s];
      const size_t rr = size_t(x + size_t(un.row) * width - d.rows) / width;
      cache_at = (size_t(un.head) * d.capacity + size_t(d.start_pos) + rr) * hd;
      to = OutCopy{d.cache, kv.store};
    }
#pragma unroll
    for (int k = 0; k < kRopeMaxPairs; ++k) {
      const int p = lane + k * shape.lanes;
      if (k >= shape.pairs || p >= half) continue;
      const RopePairPlace pl = rope_pair(p, hd, rd, adjacent != 0);
      const int oa = pl.out_a, ob = pl.out_b;
      if (keep) {
        v[oa] = o0[r][k];
        v[ob] = o1[r][k];
      }
      note_nonfinite(chk, un.base + oa, o0[r][k]);
      note_nonfinite(chk, un.base + ob, o1[r][k]);
      copy_out(cp, un.base + oa, o0[r][k]);  // (none where cp.dst is null)
      copy_out(cp, un.base + ob, o1[r][k]);
      copy_out(to, cache_at + oa, o0[r][k]);  // (none where to.dst is null)
      copy_out(to, cache_at + ob, o1[r][k]);
    }
  }
}

__global__ void gated_kernel(float* gate, float* up, size_t n, int act, int gelu, NonFiniteSlot chk, InRound gate_in,
                             InRound up_in, OutCopy copy) {
  pdl_entry();
  // PyTorch's GeluKernel (approximate="tanh"): kBeta = sqrt(2) * (2/sqrt(pi)) * 0.5.
  const float kBeta = float(1.4142135623730950488 * 1.1283791670955125739 * 0.5);
  const float kKappa = 0.044715f;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float g = read_rounded(gate_in, gate, i, i), u = read_rounded(up_in, up, i, i);
    float a;
    if (gelu) {
      const float inner = kBeta * (g + kKappa * (g * g * g));
      a = 0.5f * g * (1.0f + tanhf(inner));
    } else {
      a = g / (1.0f + expf(-g));
    }
    const float r = round_act(round_act(a, act) * u, act);
    if (!copy.only) gate[i] = r;
    note_nonfinite(chk, i, r);
    copy_out(copy, i, r);
  }
}

// GPT-OSS's clamped SwiGLU (clamped_swiglu in elementwise.cpp: the same operations and rounding
// points; comparisons, so that a NaN stays NaN as torch.clamp keeps it), its inputs read through
// their pending rounding points as gated_kernel reads them.
__global__ void clamped_swiglu_kernel(float* gate, float* up, size_t n, int act, float alpha, float limit,
                                      NonFiniteSlot chk, InRound gate_in, InRound up_in, OutCopy copy) {
  pdl_entry();
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float g = read_rounded(gate_in, gate, i, i), u = read_rounded(up_in, up, i, i);
    g = g > limit ? limit : g;
    u = u > limit ? limit : u < -limit ? -limit : u;
    const float sig = round_act(1.0f / (1.0f + expf(-round_act(g * alpha, act))), act);
    const float r = round_act(round_act(u + 1.0f, act) * round_act(g * sig, act), act);
    if (!copy.only) gate[i] = r;
    note_nonfinite(chk, i, r);
    copy_out(copy, i, r);
  }
}

// y == x (in place) is allowed; the host fuses a pending y only when the two do not overlap otherwise.
__global__ void add_kernel(float* x, float* y, size_t n, int act, NonFiniteSlot chk, InRound y_in) {
  pdl_entry();
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float yv = read_rounded(y_in, y, i, i);
    const float r = round_act(x[i] + yv, act);
    x[i] = r;
    note_nonfinite(chk, i, r);
  }
}

template <int S>
__global__ void to_storage_kernel(const float* x, size_t n, void* dst) {
  pdl_entry();
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    store_from_f32<S>(dst, i, x[i]);
}

// Job blockIdx.y; four values per thread where x is 16-byte aligned (activation rows are) and a
// 16-bit source (RoundJob::src) 8-byte aligned, one at a time else.
__global__ void round_check_kernel(RoundJobs jobs) {
  pdl_entry();
  if (int(blockIdx.y) >= jobs.n) return;
  const RoundJob& j = jobs.job[blockIdx.y];
  float* x = j.x;
  const size_t n = j.n;
  const int act = j.act;
  const bool keep = !j.copy.only;  // else the copy is all that is read of x
  auto one = [&](size_t i, float v) {
    note_nonfinite(j.chk, i, v);
    copy_out(j.copy, i, v);
  };
  auto value = [&](size_t i) { return j.src != nullptr ? widen16(j.src, act, i) : round_act(x[i], act); };
  if ((reinterpret_cast<uintptr_t>(x) & 15) == 0 && (reinterpret_cast<uintptr_t>(j.src) & 7) == 0) {
    float4* x4 = reinterpret_cast<float4*>(x);
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n / 4; i += size_t(gridDim.x) * blockDim.x) {
      float4 v;
      if (j.src != nullptr) {
        float w[4];
        if (act == kBF16)
          load_vec<kBF16, 4>(j.src, 4 * i, w);
        else
          load_vec<kF16, 4>(j.src, 4 * i, w);
        v.x = w[0], v.y = w[1], v.z = w[2], v.w = w[3];
      } else {
        v = x4[i];
        v.x = round_act(v.x, act), v.y = round_act(v.y, act), v.z = round_act(v.z, act), v.w = round_act(v.w, act);
      }
      if (keep) x4[i] = v;
      one(4 * i, v.x), one(4 * i + 1, v.y), one(4 * i + 2, v.z), one(4 * i + 3, v.w);
    }
    for (size_t i = n / 4 * 4 + blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
      const float v = value(i);
      if (keep) x[i] = v;
      one(i, v);
    }
    return;
  }
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float v = value(i);
    if (keep) x[i] = v;
    one(i, v);
  }
}

// One block per row: each thread sums the squares of a strided share, then a fixed tree across
// the block (warp shuffles, then the warps' sums in order). With an AddIn, each thread first adds
// its share of the row, as add_kernel would, and reads back only what it wrote itself.
// Where a thread's share is at most kNormHeld values (rows up to 8192 wide), the share and its
// gains stay in registers: a decode step's single row is a chain of memory round trips on one
// multiprocessor (Nsight Compute, H100: 8.7 us a call at 7B), and this drops two of them, the
// gain's (a weight no earlier kernel writes, so its loads go out even before the wait on that
// kernel) and the row's second read. The same operations on the same values.
// HELD: dim <= kNormHeld * blockDim.x.
constexpr int kNormHeld = 8;
template <bool HELD>
__global__ void rmsnorm_kernel(const float* x, int dim, const float* w, float eps, int act, int fp32_gain, float* y,
                               NonFiniteSlot chk, OutCopy copy, AddIn add) {
  const size_t row = blockIdx.x;
  const float* xr = x + row * dim;
  float* yr = y + row * dim;
  const int t = int(threadIdx.x), step = int(blockDim.x);
  [[maybe_unused]] float wv[HELD ? kNormHeld : 1], xv[HELD ? kNormHeld : 1];
  if constexpr (HELD) {
#pragma unroll
    for (int k = 0; k < kNormHeld; ++k)
      if (t + k * step < dim) wv[k] = w[t + k * step];
  }
  pdl_entry();
  auto load = [&](int i) {
    if (add.y == nullptr) return xr[i];
    // y first: it may be x itself, rounded in place
    const size_t at = row * dim + i;
    const float yv = read_rounded(add.y_in, add.y, at, at);
    const float v = round_act(xr[i] + yv, add.act);
    const_cast<float*>(xr)[i] = v;  // x is the residual stream the add updates in place
    note_nonfinite(add.chk, at, v);
    return v;
  };
  float ss = 0.0f;
  if constexpr (HELD) {
#pragma unroll
    for (int k = 0; k < kNormHeld; ++k)
      if (t + k * step < dim) {
        xv[k] = load(t + k * step);
        ss += xv[k] * xv[k];
      }
  } else {
    for (int i = t; i < dim; i += step) {
      const float v = load(i);
      ss += v * v;
    }
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  __shared__ float warp_sums[32];
  __shared__ float inv_s;
  const int warp = t / 32, lane = t % 32;
  if (lane == 0) warp_sums[warp] = ss;
  __syncthreads();
  if (t == 0) {
    float s = 0.0f;
    for (int k = 0; k < step / 32; ++k) s += warp_sums[k];
    inv_s = 1.0f / sqrtf(s / float(dim) + eps);
  }
  __syncthreads();
  const float inv = inv_s;
  auto store = [&](int i, float xi, float wi) {
    const float r = fp32_gain ? round_act((xi * inv) * wi, act) : round_act(wi * round_act(xi * inv, act), act);
    if (!copy.only) yr[i] = r;
    note_nonfinite(chk, row * dim + i, r);
    copy_out(copy, row * dim + i, r);
  };
  if constexpr (HELD) {
#pragma unroll
    for (int k = 0; k < kNormHeld; ++k)
      if (t + k * step < dim) store(t + k * step, xv[k], wv[k]);
  } else {
    for (int i = t; i < dim; i += step) store(i, xr[i], w[i]);
  }
}

// Slice blockIdx.y; slices from in_first on read their rows through `in` (a pending rounding point
// of the buffer at in_base, which holds those rows).
template <int S>
__global__ void kv_write_kernel(const KvWriteDesc* descs, int n_kv_heads, int hd, InRound in, const float* in_base,
                                int in_first) {
  pdl_entry();
  const KvWriteDesc d = descs[blockIdx.y];
  const InRound r = int(blockIdx.y) >= in_first ? in : InRound{};
  float* rows = const_cast<float*>(d.rows);  // written only through a pending round: the model's activations
  const size_t first = r.act < 0 ? 0 : size_t(d.rows - in_base);
  const size_t width = size_t(n_kv_heads) * hd;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < size_t(d.n_rows) * width;
       i += size_t(gridDim.x) * blockDim.x) {
    const size_t m = i / width, h = (i % width) / hd, e = i % hd;
    const size_t at = (h * size_t(d.capacity) + size_t(d.start_pos) + m) * hd + e;
    store_from_f32<S>(d.cache, at, read_rounded(r, rows, i, first + i));
  }
}

// How rope() lays its units out in blocks: Auto (several a block; several rounds, and several pairs
// a thread at head_dim >= 128, where the launch is large), OneUnit (a block per (row, head), a pair
// a thread, as before RopeShape), Rounds (several rounds and pairs a thread, on one lane more than
// they need, so that some threads' last slots fall past the head's pairs, at any size: for the CPU
// suite, whose launches are small). The same bits in each.
enum class RopeLayout { Auto, OneUnit, Rounds };

// The dispatch: launch(kernel, grid, block, args...) runs a kernel (StreamLaunch on the GPU).
// Up to kMaxRopeJobs buffers of M rows each (the same positions and table) in one launch; with kv
// (n <= kMaxRopeJobs), the cache writes of the last job's rows and of V's too. rd: the rotated
// dimensions of a head (RopeTable::rotary_dim), the rest passed through; pos: the table's rows.
template <class Launch>
void rope(const Launch& launch, const RopeJob* jobs, int n, int M, int hd, int rd, const int* pos,
          const float* cos_t, const float* sin_t, int act, bool adjacent_pairs, bool once, const RopeKv& kv = {},
          RopeLayout layout = RopeLayout::Auto) {
  const int half = hd / 2;
  if (rd <= 0 || rd > hd || rd % 2 != 0 || (adjacent_pairs && rd != hd))
    throw std::invalid_argument("rope: rotary dimension " + std::to_string(rd) + " of a head of " +
                                std::to_string(hd) + (adjacent_pairs ? " in adjacent pairs" : ""));
  for (int j0 = 0; j0 < n; j0 += kMaxRopeJobs) {
    RopeJobs js{};
    int heads = 0;
    for (int j = j0; j < n && j < j0 + kMaxRopeJobs; ++j) {
      if (jobs[j].in.act >= 0 && jobs[j].in.act != (act == kF16 || act == kBF16 ? act : kF32))
        throw std::invalid_argument("rope: a pending input round of another dtype than the rotation's");
      if (jobs[j].in.src != nullptr && act != kF16 && act != kBF16)
        throw std::invalid_argument("rope: a 16-bit GEMM output read by an fp32 rotation");
      if (!jobs[j].store && jobs[j].copy.dst == nullptr && (j != n - 1 || kv.n <= 0))
        throw std::invalid_argument("rope: a rotation left unstored that goes to no cache and no copy");
      js.job[js.n++] = jobs[j];
      heads += jobs[j].n_heads;
    }
    const bool writes = j0 + kMaxRopeJobs >= n && kv.n > 0;
    const int units = M * heads + (writes && kv.with_v ? M * js.job[js.n - 1].n_heads : 0);
    // Blocks of about 256 threads; several rounds only where the launch still fills every
    // multiprocessor many times over (64 blocks each of an H100's 132; a decode step's few units
    // keep a round a block).
    constexpr int kManyBlocks = 64 * 132;
    auto shaped = [&](int pairs, bool whole_warps) {
      int lanes = (half + pairs - 1) / pairs;
      lanes = whole_warps ? (lanes + 31) / 32 * 32 : lanes + 1;
      return RopeShape{lanes, layout == RopeLayout::OneUnit || lanes >= 256 ? 1 : 256 / lanes, 1, pairs};
    };
    RopeShape shape = shaped(1, true);
    if (layout == RopeLayout::Rounds) {
      shape = shaped(kRopeMaxPairs, false);
      shape.rounds = kRopeMaxRounds;
    } else if (layout == RopeLayout::Auto && units >= kManyBlocks * shape.per_round) {
      shape = shaped(std::clamp(half / 32, 1, kRopeMaxPairs), true);
      shape.rounds = kRopeMaxRounds;
    }
    const int per_block = shape.per_round * shape.rounds;
    const dim3 grid(unsigned((units + per_block - 1) / per_block)), block(unsigned(shape.lanes * shape.per_round));
    const RopeKv k = writes ? kv : RopeKv{};
    const int adj = adjacent_pairs ? 1 : 0, one = once ? 1 : 0;
    if (act == kF16)
      launch(rope_kernel<kF16>, grid, block, js, M, hd, rd, pos, cos_t, sin_t, adj, one, k, shape);
    else if (act == kBF16)
      launch(rope_kernel<kBF16>, grid, block, js, M, hd, rd, pos, cos_t, sin_t, adj, one, k, shape);
    else
      launch(rope_kernel<kF32>, grid, block, js, M, hd, rd, pos, cos_t, sin_t, adj, one, k, shape);
  }
}

template <class Launch>
void gated(const Launch& launch, float* gate, float* up, size_t n, int act, bool gelu, NonFiniteSlot chk,
           InRound gate_in, InRound up_in, OutCopy copy) {
  launch(gated_kernel, dim3(blocks_for(n, kThreads)), dim3(kThreads), gate, up, n, act, gelu ? 1 : 0, chk, gate_in,
         up_in, copy);
}

template <class Launch>
void clamped_swiglu(const Launch& launch, float* gate, float* up, size_t n, int act, float alpha, float limit,
                    NonFiniteSlot chk, InRound gate_in, InRound up_in, OutCopy copy) {
  launch(clamped_swiglu_kernel, dim3(blocks_for(n, kThreads)), dim3(kThreads), gate, up, n, act, alpha, limit, chk,
         gate_in, up_in, copy);
}

template <class Launch>
void add(const Launch& launch, float* x, float* y, size_t n, int act, NonFiniteSlot chk, InRound y_in) {
  launch(add_kernel, dim3(blocks_for(n, kThreads)), dim3(kThreads), x, y, n, act, chk, y_in);
}

template <class Launch>
void to_storage(const Launch& launch, const float* x, size_t n, void* dst, int store) {
  const dim3 g(blocks_for(n, kThreads)), b(kThreads);
  if (store == kF32) launch(to_storage_kernel<kF32>, g, b, x, n, dst);
  if (store == kF16) launch(to_storage_kernel<kF16>, g, b, x, n, dst);
  if (store == kBF16) launch(to_storage_kernel<kBF16>, g, b, x, n, dst);
}

// Up to kMaxRoundJobs buffers a launch (grid y), shaped for the longest.
template <class Launch>
void round_checks(const Launch& launch, const RoundJob* jobs, int n) {
  for (int j0 = 0; j0 < n; j0 += kMaxRoundJobs) {
    RoundJobs js{};
    size_t longest = 0;
    for (int j = j0; j < n && j < j0 + kMaxRoundJobs; ++j) {
      js.job[js.n++] = jobs[j];
      longest = longest > jobs[j].n ? longest : jobs[j].n;
    }
    launch(round_check_kernel, dim3(blocks_for((longest + 3) / 4, kThreads), unsigned(js.n)), dim3(kThreads), js);
  }
}

// held = false: the row read twice and the gains after the sum at any width (the kernel before
// 2026-11-27 evening; the CPU suite's reference for the held shares). The held shares only for a
// launch of no more rows than an H100 has multiprocessors, whose time is its chain of round trips:
// their registers (48 against 28 at 1024 threads) leave a multiprocessor one block instead of two,
// which a launch of thousands of rows, bound by bandwidth, would pay for.
constexpr int kNormHeldRows = 132;
template <class Launch>
void rmsnorm(const Launch& launch, const float* x, int M, int dim, const float* w, float eps, int act, bool fp32_gain,
             float* y, NonFiniteSlot chk, OutCopy copy, AddIn add, bool held = true) {
  const unsigned threads = dim >= 1024 ? 1024u : unsigned((dim + 31) / 32 * 32);
  const int g = fp32_gain ? 1 : 0;
  if (held && M <= kNormHeldRows && dim <= kNormHeld * int(threads))
    launch(rmsnorm_kernel<true>, dim3(unsigned(M)), dim3(threads), x, dim, w, eps, act, g, y, chk, copy, add);
  else
    launch(rmsnorm_kernel<false>, dim3(unsigned(M)), dim3(threads), x, dim, w, eps, act, g, y, chk, copy, add);
}

template <class Launch>
void kv_write(const Launch& launch, const KvWriteDesc* descs, int n, int max_rows, int n_kv_heads, int head_dim,
              int store, InRound in, const float* in_base, int in_first) {
  const dim3 g(blocks_for(size_t(max_rows) * n_kv_heads * head_dim, kThreads, 65535u), unsigned(n)), b(kThreads);
  if (store == kF32) launch(kv_write_kernel<kF32>, g, b, descs, n_kv_heads, head_dim, in, in_base, in_first);
  if (store == kF16) launch(kv_write_kernel<kF16>, g, b, descs, n_kv_heads, head_dim, in, in_base, in_first);
  if (store == kBF16) launch(kv_write_kernel<kBF16>, g, b, descs, n_kv_heads, head_dim, in, in_base, in_first);
}

}  // namespace
}  // namespace kvp::cuda::elementwise
