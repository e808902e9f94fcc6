// The GPU's attention kernels against the CPU reference kernel on the same inputs: the tensor-core
// prefill (fp16/bf16, head_dim 32..128), the CUDA-core prefill (other head dims, fp32), and the
// split-KV decode; GQA, a cached prefix, sliding windows, Gemma-2's scale and soft cap, and cache
// slots past the written positions poisoned with NaN. The orders of summation differ (that is the
// standard policy), so the bound is relative: ||gpu - cpu|| / ||cpu|| within what rounding a score
// or probability to the compute dtype one ulp differently can give.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/device.h"
#include "core/dtype.h"
#include "cuda/cuda_runtime_api.h"
#include "cuda/cuda_test_util.h"
#include "kernels/kernels.h"

namespace kvp {
namespace {

struct Case {
  const char* name;
  DType act;
  int head_dim, n_heads, n_kv_heads, start_pos, n_rows;
  int window = 0;
  float softcap = 0.0f, scale = 0.0f;
};

std::vector<uint16_t> encode(DType t, const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = t == DType::F16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
  return out;
}

// One case's inputs on the host: q, and K and V in the cache's layout and dtype, slots past the
// written positions NaN.
struct Inputs {
  AttentionParams a;  // without buffers
  std::vector<float> q, k, v;
  std::vector<uint16_t> k16, v16;
  const void* k_cache() const { return a.act == DType::F32 ? static_cast<const void*>(k.data()) : k16.data(); }
  const void* v_cache() const { return a.act == DType::F32 ? static_cast<const void*>(v.data()) : v16.data(); }
};

Inputs make_inputs(const Case& c, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Inputs in;
  const int capacity = c.start_pos + c.n_rows + 37;  // 37 slots never written: NaN
  const int written = c.start_pos + c.n_rows;
  const size_t qn = size_t(c.n_rows) * c.n_heads * c.head_dim;
  const size_t cn = size_t(c.n_kv_heads) * capacity * c.head_dim;
  in.q.resize(qn);
  in.k.assign(cn, NAN);
  in.v.assign(cn, NAN);
  for (float& x : in.q) x = round_to(c.act, 1.5f * nd(rng));
  for (int h = 0; h < c.n_kv_heads; ++h)
    for (int p = 0; p < written; ++p)
      for (int e = 0; e < c.head_dim; ++e) {
        const size_t i = (size_t(h) * capacity + p) * c.head_dim + e;
        in.k[i] = round_to(c.act, nd(rng));
        in.v[i] = round_to(c.act, nd(rng));
      }
  if (c.act != DType::F32) {
    in.k16 = encode(c.act, in.k);
    in.v16 = encode(c.act, in.v);
  }
  AttentionParams& a = in.a;
  a.n_rows = c.n_rows;
  a.start_pos = c.start_pos;
  a.n_heads = c.n_heads;
  a.n_kv_heads = c.n_kv_heads;
  a.head_dim = c.head_dim;
  a.kv = KvType::of(c.act);
  a.capacity = capacity;
  a.score_divisor = std::sqrt(float(c.head_dim));
  a.score_scale = c.scale;
  a.softcap = c.softcap;
  a.sliding_window = c.window;
  a.act = c.act;
  return in;
}

// The attention `k` (a GPU Kernels) computes for the inputs, its output first poisoned with NaN.
std::vector<float> gpu_attention(Kernels& k, const Inputs& in) {
  const size_t qn = in.q.size(), cache_bytes = in.k.size() * dtype_size(in.a.act);
  DeviceBuffer dq(Device::Cuda, qn * 4), dout(Device::Cuda, qn * 4), dk(Device::Cuda, cache_bytes),
      dv(Device::Cuda, cache_bytes);
  host_to_device(Device::Cuda, dq.data(), in.q.data(), qn * 4);
  host_to_device(Device::Cuda, dk.data(), in.k_cache(), cache_bytes);
  host_to_device(Device::Cuda, dv.data(), in.v_cache(), cache_bytes);
  const std::vector<float> poison(qn, NAN);
  host_to_device(Device::Cuda, dout.data(), poison.data(), qn * 4);
  AttentionParams ag = in.a;
  ag.q = dq.as<float>();
  ag.out = dout.as<float>();
  ag.k_cache = dk.data();
  ag.v_cache = dv.data();
  k.attention(ag);
  std::vector<float> got(qn);
  k.to_host(got.data(), dout.data(), qn * 4);
  return got;
}

TEST(CudaAttention, PrefillAndDecodeKernelsAgreeWithTheCpuReference) {
  try {
    require_device(Device::Cuda);
  } catch (const std::exception& e) {
    GTEST_SKIP() << "no usable CUDA device: " << e.what();
  }
  const Case cases[] = {
      {"fp16 hd128 gqa prefill", DType::F16, 128, 8, 2, 0, 200},
      {"fp16 hd128 cached prefix", DType::F16, 128, 4, 4, 70, 90},
      {"bf16 hd64 window", DType::BF16, 64, 8, 4, 30, 150, 40},
      {"fp16 hd64 gemma scale+softcap", DType::F16, 64, 4, 2, 5, 130, 0, 50.0f, 0.0625f},
      {"bf16 hd32 one tile", DType::BF16, 32, 2, 1, 0, 17},
      {"fp16 hd48 cuda cores", DType::F16, 48, 4, 2, 10, 100},
      {"fp32 hd128 cuda cores", DType::F32, 128, 4, 2, 3, 80},
      {"fp16 hd128 decode", DType::F16, 128, 8, 2, 700, 1},
      {"bf16 hd64 decode window", DType::BF16, 64, 4, 4, 300, 1, 100},
      {"fp32 hd64 decode", DType::F32, 64, 4, 2, 2000, 1},
  };
  std::mt19937 rng(7);
  auto gpu = make_kernels(KernelPolicy::Standard, nullptr, Device::Cuda);
  auto cpu = make_kernels(KernelPolicy::Reference, nullptr, Device::Cpu);
  for (const Case& c : cases) {
    const Inputs in = make_inputs(c, rng);
    std::vector<float> want(in.q.size());
    AttentionParams ac = in.a;
    ac.q = in.q.data();
    ac.out = want.data();
    ac.k_cache = in.k_cache();
    ac.v_cache = in.v_cache();
    cpu->attention(ac);
    const std::vector<float> got = gpu_attention(*gpu, in);
    const double err = test::rel_err(got, want);
    std::printf("[ measured ] %s: relative error vs CPU reference %.3g\n", c.name, err);
    const double bound = c.act == DType::F32 ? 1e-5 : (c.act == DType::F16 ? 4e-3 : 3e-2);
    EXPECT_LE(err, bound) << c.name;
  }
}

// standard's decode loads a lane's whole K row and its share of a chunk's V rows at once where K/V
// are 16-bit and head_dim is 32, 64 or 128, eight loads a round elsewhere; which loads go together
// never changes an operation or its order, so both give the same bits on the hardware too (the CPU
// suite checks them on its emulation): short and long caches (a merge of more than 32 splits), GQA,
// a window, Gemma-2's scores.
TEST(CudaAttention, StandardDecodeLoadPathsGiveTheSameBits) {
  try {
    require_device(Device::Cuda);
  } catch (const std::exception& e) {
    GTEST_SKIP() << "no usable CUDA device: " << e.what();
  }
  struct Path {
    explicit Path(bool whole) { cuda::set_decode_whole_rows(whole); }
    ~Path() { cuda::set_decode_whole_rows(true); }
  };
  const Case cases[] = {
      {"fp16 hd128 decode over 700", DType::F16, 128, 8, 2, 700, 1},
      {"bf16 hd64 gqa decode over 5000", DType::BF16, 64, 8, 2, 5000, 1},
      {"fp16 hd32 decode window", DType::F16, 32, 4, 4, 900, 1, 300},
      {"fp16 hd128 gemma decode", DType::F16, 128, 4, 2, 333, 1, 0, 50.0f, 0.0883883f},
  };
  std::mt19937 rng(8);
  auto gpu = make_kernels(KernelPolicy::Standard, nullptr, Device::Cuda);
  for (const Case& c : cases) {
    const Inputs in = make_inputs(c, rng);
    std::vector<float> got[2];
    for (int whole = 0; whole < 2; ++whole) {
      Path path(whole != 0);
      got[whole] = gpu_attention(*gpu, in);
    }
    size_t differ = 0, nonfinite = 0;
    for (size_t i = 0; i < got[0].size(); ++i) {
      differ += std::memcmp(&got[0][i], &got[1][i], sizeof(float)) != 0;
      nonfinite += !std::isfinite(got[1][i]);
    }
    EXPECT_EQ(differ, 0u) << c.name << ": the two load paths part";
    EXPECT_EQ(nonfinite, 0u) << c.name;
  }
}

}  // namespace
}  // namespace kvp
