// The forward pass's element-wise operations, cache writes, rounding points and RMSNorm on the
// GPU. Each computes, per element, exactly what its CPU counterpart computes (elementwise.cpp,
// CpuKernels) with the same roundings; only RMSNorm's sum of squares (a reduction) is summed in
// another order, as the standard policy allows.
#include <cmath>

#include "cuda/cuda_common.cuh"
#include "cuda/cuda_nonfinite.cuh"
#include "cuda/cuda_ops.h"

namespace kvp::cuda {
namespace {

constexpr unsigned kThreads = 256;

#define KVP_GRID_STRIDE(i, n) \
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < (n); i += size_t(gridDim.x) * blockDim.x)

template <int S>
__global__ void embed_kernel(const void* table, const int* tokens, int M, int dim, float* x) {
  KVP_GRID_STRIDE(i, size_t(M) * dim) {
    const size_t m = i / dim, d = i % dim;
    x[i] = load_as_f32<S>(table, size_t(tokens[m]) * dim + d);
  }
}

__global__ void add_bias_kernel(float* y, int M, int N, const float* b) {
  KVP_GRID_STRIDE(i, size_t(M) * N) y[i] += b[i % N];
}

// One block per (row, head), one thread per rotated pair: every term is read before any is
// written, so pairs read from adjacent slots can be written to the halves in place.
__global__ void rope_kernel(float* x, int n_heads, int hd, const int* pos, const float* cos_t, const float* sin_t,
                            int act, int adjacent, NonFiniteSlot chk) {
  const int row = blockIdx.x / n_heads, head = blockIdx.x % n_heads;
  const int half = hd / 2, i = threadIdx.x;
  float* v = x + (size_t(row) * n_heads + head) * hd;
  float o0 = 0.0f, o1 = 0.0f;
  if (i < half) {
    const int a_step = adjacent ? 2 : 1, b_off = adjacent ? 1 : half;
    const float a = v[i * a_step], b = v[i * a_step + b_off];
    const size_t at = size_t(pos[row]) * half + i;
    const float c = round_act(cos_t[at], act), s = round_act(sin_t[at], act);
    const float t0 = round_act(a * c, act), t1 = round_act(-b * s, act);
    const float t2 = round_act(b * c, act), t3 = round_act(a * s, act);
    o0 = round_act(t0 + t1, act);
    o1 = round_act(t2 + t3, act);
  }
  __syncthreads();
  if (i < half) {
    v[i] = o0;
    v[i + half] = o1;
    const size_t base = (size_t(row) * n_heads + head) * hd;
    note_nonfinite(chk, base + i, o0);
    note_nonfinite(chk, base + i + half, o1);
  }
}

__global__ void gated_kernel(float* gate, const float* up, size_t n, int act, int gelu, NonFiniteSlot chk) {
  // PyTorch's GeluKernel (approximate="tanh"): kBeta = sqrt(2) * (2/sqrt(pi)) * 0.5.
  const float kBeta = float(1.4142135623730950488 * 1.1283791670955125739 * 0.5);
  const float kKappa = 0.044715f;
  KVP_GRID_STRIDE(i, n) {
    const float g = gate[i];
    float a;
    if (gelu) {
      const float inner = kBeta * (g + kKappa * (g * g * g));
      a = 0.5f * g * (1.0f + tanhf(inner));
    } else {
      a = g / (1.0f + expf(-g));
    }
    const float r = round_act(round_act(a, act) * up[i], act);
    gate[i] = r;
    note_nonfinite(chk, i, r);
  }
}

__global__ void softcap_kernel(float* x, size_t n, float cap, int act) {
  KVP_GRID_STRIDE(i, n) x[i] = round_act(round_act(tanhf(round_act(x[i] / cap, act)), act) * cap, act);
}

__global__ void scale_kernel(float* x, size_t n, float s, int act) {
  KVP_GRID_STRIDE(i, n) x[i] = round_act(x[i] * s, act);
}

__global__ void add_kernel(float* x, const float* y, size_t n, int act, NonFiniteSlot chk) {
  KVP_GRID_STRIDE(i, n) {
    const float r = round_act(x[i] + y[i], act);
    x[i] = r;
    note_nonfinite(chk, i, r);
  }
}

template <int S>
__global__ void to_storage_kernel(const float* x, size_t n, void* dst) {
  KVP_GRID_STRIDE(i, n) store_from_f32<S>(dst, i, x[i]);
}

// Four values per thread where x is 16-byte aligned (activation rows are), one at a time else.
__global__ void round_check_kernel(float* x, size_t n, int act, NonFiniteSlot chk) {
  if ((reinterpret_cast<uintptr_t>(x) & 15) == 0) {
    float4* x4 = reinterpret_cast<float4*>(x);
    KVP_GRID_STRIDE(i, n / 4) {
      float4 v = x4[i];
      v.x = round_act(v.x, act), v.y = round_act(v.y, act), v.z = round_act(v.z, act), v.w = round_act(v.w, act);
      x4[i] = v;
      note_nonfinite(chk, 4 * i, v.x), note_nonfinite(chk, 4 * i + 1, v.y);
      note_nonfinite(chk, 4 * i + 2, v.z), note_nonfinite(chk, 4 * i + 3, v.w);
    }
    for (size_t i = n / 4 * 4 + blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
      x[i] = round_act(x[i], act);
      note_nonfinite(chk, i, x[i]);
    }
    return;
  }
  KVP_GRID_STRIDE(i, n) {
    const float v = round_act(x[i], act);
    x[i] = v;
    note_nonfinite(chk, i, v);
  }
}

// One block per row: each thread sums the squares of a strided share, then a fixed tree across
// the block (warp shuffles, then the warps' sums in order).
__global__ void rmsnorm_kernel(const float* x, int dim, const float* w, float eps, int act, int fp32_gain, float* y,
                               NonFiniteSlot chk) {
  const float* xr = x + size_t(blockIdx.x) * dim;
  float* yr = y + size_t(blockIdx.x) * dim;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  __shared__ float warp_sums[32];
  __shared__ float inv_s;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = ss;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.0f;
    for (int k = 0; k < int(blockDim.x / 32); ++k) t += warp_sums[k];
    inv_s = 1.0f / sqrtf(t / float(dim) + eps);
  }
  __syncthreads();
  const float inv = inv_s;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const float r = fp32_gain ? round_act((xr[i] * inv) * w[i], act) : round_act(w[i] * round_act(xr[i] * inv, act), act);
    yr[i] = r;
    note_nonfinite(chk, size_t(blockIdx.x) * dim + i, r);
  }
}

template <int S>
__global__ void kv_write_kernel(const KvWriteDesc* descs, int n_kv_heads, int hd) {
  const KvWriteDesc d = descs[blockIdx.y];
  const size_t width = size_t(n_kv_heads) * hd;
  KVP_GRID_STRIDE(i, size_t(d.n_rows) * width) {
    const size_t m = i / width, h = (i % width) / hd, e = i % hd;
    const size_t at = (h * size_t(d.capacity) + size_t(d.start_pos) + m) * hd + e;
    store_from_f32<S>(d.cache, at, d.rows[i]);
  }
}

void after_launch(const char* what) { check(cudaGetLastError(), what); }

}  // namespace

void launch_embed(const void* table, int table_t, const int* tokens, int M, int dim, float* x) {
  const unsigned b = blocks_for(size_t(M) * dim, kThreads);
  if (table_t == kF32) embed_kernel<kF32><<<b, kThreads, 0, stream()>>>(table, tokens, M, dim, x);
  if (table_t == kF16) embed_kernel<kF16><<<b, kThreads, 0, stream()>>>(table, tokens, M, dim, x);
  if (table_t == kBF16) embed_kernel<kBF16><<<b, kThreads, 0, stream()>>>(table, tokens, M, dim, x);
  after_launch("embed");
}

void launch_add_bias(float* y, int M, int N, const float* b) {
  add_bias_kernel<<<blocks_for(size_t(M) * N, kThreads), kThreads, 0, stream()>>>(y, M, N, b);
  after_launch("add_bias");
}

void launch_rope(float* x, int M, int n_heads, int hd, const int* pos, const float* cos_t, const float* sin_t,
                 int act, bool adjacent_pairs, NonFiniteSlot chk) {
  const unsigned threads = unsigned((hd / 2 + 31) / 32 * 32);
  rope_kernel<<<unsigned(M * n_heads), threads, 0, stream()>>>(x, n_heads, hd, pos, cos_t, sin_t, act,
                                                              adjacent_pairs ? 1 : 0, chk);
  after_launch("rope");
}

void launch_gated(float* gate, const float* up, size_t n, int act, bool gelu, NonFiniteSlot chk) {
  gated_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(gate, up, n, act, gelu ? 1 : 0, chk);
  after_launch("gated activation");
}

void launch_softcap(float* x, size_t n, float cap, int act) {
  softcap_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(x, n, cap, act);
  after_launch("softcap");
}

void launch_scale(float* x, size_t n, float s, int act) {
  scale_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(x, n, s, act);
  after_launch("scale");
}

void launch_add(float* x, const float* y, size_t n, int act, NonFiniteSlot chk) {
  add_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(x, y, n, act, chk);
  after_launch("add");
}

void launch_to_storage(const float* x, size_t n, void* dst, int store) {
  const unsigned b = blocks_for(n, kThreads);
  if (store == kF32) to_storage_kernel<kF32><<<b, kThreads, 0, stream()>>>(x, n, dst);
  if (store == kF16) to_storage_kernel<kF16><<<b, kThreads, 0, stream()>>>(x, n, dst);
  if (store == kBF16) to_storage_kernel<kBF16><<<b, kThreads, 0, stream()>>>(x, n, dst);
  after_launch("convert");
}

void launch_round_check(float* x, size_t n, int act, NonFiniteSlot chk) {
  round_check_kernel<<<blocks_for((n + 3) / 4, kThreads), kThreads, 0, stream()>>>(x, n, act, chk);
  after_launch("round");
}

void launch_rmsnorm(const float* x, int M, int dim, const float* w, float eps, int act, bool fp32_gain, float* y,
                    NonFiniteSlot chk) {
  const unsigned threads = dim >= 1024 ? 1024u : unsigned((dim + 31) / 32 * 32);
  rmsnorm_kernel<<<unsigned(M), threads, 0, stream()>>>(x, dim, w, eps, act, fp32_gain ? 1 : 0, y, chk);
  after_launch("rmsnorm");
}

void launch_kv_write(const KvWriteDesc* descs, int n, int max_rows, int n_kv_heads, int head_dim, int store) {
  const dim3 grid(blocks_for(size_t(max_rows) * n_kv_heads * head_dim, kThreads, 65535u), unsigned(n));
  if (store == kF32) kv_write_kernel<kF32><<<grid, kThreads, 0, stream()>>>(descs, n_kv_heads, head_dim);
  if (store == kF16) kv_write_kernel<kF16><<<grid, kThreads, 0, stream()>>>(descs, n_kv_heads, head_dim);
  if (store == kBF16) kv_write_kernel<kBF16><<<grid, kThreads, 0, stream()>>>(descs, n_kv_heads, head_dim);
  after_launch("kv_write");
}

}  // namespace kvp::cuda
