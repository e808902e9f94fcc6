// The fixed-order policies' CUDA kernels, their own source, run on the CPU (src/cuda/simt_host.h:
// a thread per CUDA thread, barriers for __syncthreads/__syncwarp and shuffles), on every CI run,
// GPU or not. What this checks is everything but the hardware: the kernels' indexing, shared-memory
// layouts, bounds, warp trees and the dispatch between kernels.
//  - the portable kernels (matmul direct and tiled, RMSNorm, activations, attention) give the CPU
//    portable kernels' bits — on the host their arithmetic is portable_scalar.h's host branch, so
//    a mismatch is a decomposition bug, not rounding;
//  - the invariant tensor-core GEMM, with an mma emulated from the PTX fragment layout: a row is
//    the same bits in a call of any M, and the product is right (a fragment mix-up would not be);
//  - the tensor-core flash attention the invariant policy runs every row through: a row is the
//    same bits alone (a decode step), in a chunk, in the whole prefill or beside other slices,
//    and close to the CPU's attention;
//  - the standard policy's split-KV decode, one launch whose last warp a row merges its splits.
// The host runs a grid's blocks in another order at each launch (simt_host.h), so a kernel whose
// last block to finish does the merge has a different one each time.
// The CUDA suite (tests/cuda/) runs the same kernels on a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention_cases.h"
#include "core/dtype.h"
#include "core/kv_type.h"
#include "cuda/cuda_attention_plan.h"
#include "kernels/kernels.h"
#include "test_util.h"
// The kernels' source, built for the host (after every other header: simt_host.h defines the CUDA
// keywords as macros).
#include "cuda/cuda_attention_decode_kernel.cuh"
#include "cuda/cuda_attention_split_kernel.cuh"
#include "cuda/cuda_invariant_gemm_kernel.cuh"
#include "cuda/cuda_portable_attention_kernel.cuh"
#include "cuda/cuda_portable_kernels.cuh"
#include "cuda_on_cpu.h"

namespace kvp {
namespace {

using test::normals;

constexpr DType kAllTypes[] = {DType::F32, DType::F16, DType::BF16};

using test::HostLaunch;

std::vector<uint8_t> stored(DType t, const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * dtype_size(t));
  from_f32(t, v.data(), b.data(), v.size());
  return b;
}

TEST(CudaKernelsOnCpu, PortableMatmulIsTheCpuPortableKernelsBits) {
  auto cpu = make_kernels(KernelPolicy::Portable, nullptr);
  std::mt19937 rng(31);
  struct Shape {
    int M, N, K;
  };
  // Direct (M < 16; K a multiple of 16 or not) and tiled (tiles past M, N and K).
  const Shape shapes[] = {{1, 45, 77}, {1, 40, 256}, {3, 37, 300}, {7, 64, 256}, {15, 33, 16}, {16, 50, 100},
                          {40, 33, 200}, {33, 70, 96}};
  for (DType wt : kAllTypes)
    for (const Shape& s : shapes)
      for (DType act : {DType::F32, wt}) {
        const auto wf = normals(size_t(s.N) * s.K, rng, wt);
        const auto wb = stored(wt, wf);
        const TensorView W = test::weight_view(wb, wt, s.N, s.K);
        const auto x = normals(size_t(s.M) * s.K, rng, act);
        std::vector<float> want(size_t(s.M) * s.N), got(want.size(), NAN);
        cpu->matmul(x.data(), s.M, W, act, want.data());
        const std::string what = std::string(dtype_name(wt)) + " W, M " + std::to_string(s.M) + " N " +
                                 std::to_string(s.N) + " K " + std::to_string(s.K);
        cuda::portable::matmul(HostLaunch{}, x.data(), s.M, wb.data(), cuda::store_of(wt), s.K, s.N, got.data());
        EXPECT_SAME_BITS(got, want, what);
        if (s.M < 16) {  // x not 16-byte aligned: the element-wise loads
          std::vector<float> xs(x.size() + 1);
          std::copy(x.begin(), x.end(), xs.begin() + 1);
          std::fill(got.begin(), got.end(), NAN);
          cuda::portable::matmul(HostLaunch{}, xs.data() + 1, s.M, wb.data(), cuda::store_of(wt), s.K, s.N, got.data());
          EXPECT_SAME_BITS(got, want, what + " (unaligned x)");
        }
      }
  // -0 chains: no all-zero group past the specification's padded one, in either kernel.
  for (int K : {16, 20})
    for (int M : {1, 20}) {
      const int N = 3;
      const std::vector<float> x(size_t(M) * K, -1e-30f), wf(size_t(N) * K, 1e-30f);
      const auto wb = stored(DType::F32, wf);
      std::vector<float> want(size_t(M) * N), got(want.size(), NAN);
      cpu->matmul(x.data(), M, test::weight_view(wb, DType::F32, N, K), DType::F32, want.data());
      cuda::portable::matmul(HostLaunch{}, x.data(), M, wb.data(), cuda::kF32, K, N, got.data());
      EXPECT_SAME_BITS(got, want, "-0 chains, K " + std::to_string(K) + " M " + std::to_string(M));
      if (K == 16) {  // K = 20: the padded lanes' chains are +0, and so is the sum
        EXPECT_TRUE(std::signbit(got[0])) << "M " << M;
      }
    }
}

TEST(CudaKernelsOnCpu, PortableNormsAndActivationsAreTheCpuPortableKernelsBits) {
  auto cpu = make_kernels(KernelPolicy::Portable, nullptr);
  std::mt19937 rng(32);
  for (DType act : kAllTypes) {
    const int a = cuda::store_of(act);
    const std::string an(dtype_name(act));
    for (int dim : {16, 50, 300}) {
      const int M = 5;
      const auto x = normals(size_t(M) * dim, rng, act, 3.0f);
      const auto w = normals(size_t(dim), rng);
      std::vector<float> want(x.size()), got(x.size(), NAN);
      for (bool fp32_gain : {false, true}) {
        if (fp32_gain)
          cpu->rmsnorm_fp32_gain(x.data(), M, dim, w.data(), 1e-6f, act, want.data());
        else
          cpu->rmsnorm(x.data(), M, dim, w.data(), 1e-6f, act, want.data());
        cuda::portable::rmsnorm(HostLaunch{}, x.data(), M, dim, w.data(), 1e-6f, a, fp32_gain, got.data(), {});
        EXPECT_SAME_BITS(got, want, an + " rmsnorm dim " + std::to_string(dim) + (fp32_gain ? " (fp32 gain)" : ""));
      }
    }
    const size_t n = 1000;
    const auto g = normals(n, rng, act, 6.0f), u = normals(n, rng, act, 2.0f);
    for (int op = 0; op < 3; ++op) {
      std::vector<float> want = g, got = g;
      if (op == 0) cpu->silu_mul(want.data(), u.data(), n, act);
      if (op == 1) cpu->gelu_tanh_mul(want.data(), u.data(), n, act);
      if (op == 2) cpu->softcap(want.data(), n, 30.0f, act);
      if (op < 2)
        cuda::portable::gated(HostLaunch{}, 2, got.data(), u.data(), n, a, op == 1, {});
      else
        cuda::portable::softcap(HostLaunch{}, 2, got.data(), n, 30.0f, a);
      EXPECT_SAME_BITS(got, want, an + (op == 0 ? " silu" : op == 1 ? " gelu-tanh" : " softcap"));
    }
  }
}

using test::AttnCase;

// One slice's inputs, its CPU portable output, and its descriptor for the kernel.
struct Slice {
  std::vector<float> q, want, got;
  std::vector<uint8_t> k, v;
  AttentionParams p;
  Slice(const AttnCase& c, std::mt19937& rng) : p(test::attn_params(c, 5)) {
    const size_t cn = size_t(c.kv_heads) * p.capacity * c.hd;
    std::vector<float> kf = normals(cn, rng, c.kv, 2.0f), vf = normals(cn, rng, c.kv);
    for (int h = 0; h < c.kv_heads; ++h)  // slots past the written positions: NaN, never read
      for (int j = c.start_pos + c.rows; j < p.capacity; ++j)
        for (int e = 0; e < c.hd; ++e) {
          const size_t i = (size_t(h) * p.capacity + j) * c.hd + e;
          kf[i] = vf[i] = NAN;
        }
    k = stored(c.kv, kf);
    v = stored(c.kv, vf);
    q = normals(size_t(c.rows) * c.heads * c.hd, rng, c.act, 2.0f);
    want.assign(q.size(), 0.0f);
    got.assign(q.size(), NAN);
    p.q = q.data();
    p.k_cache = k.data();
    p.v_cache = v.data();
    p.out = want.data();
  }
  cuda::AttnDesc desc() {
    return cuda::AttnDesc{q.data(), got.data(), k.data(), v.data(), p.n_rows, p.start_pos, p.capacity, 1, 0, 0};
  }
  cuda::AttnShape shape() const {
    return cuda::AttnShape{p.n_heads, p.n_kv_heads, p.head_dim, p.score_divisor, p.score_scale, p.softcap,
                           p.sliding_window, cuda::store_of(p.act), cuda::store_of(p.kv.dtype())};
  }
};

TEST(CudaKernelsOnCpu, PortableAttentionIsTheCpuPortableKernelsBits) {
  auto cpu = make_kernels(KernelPolicy::Portable, nullptr);
  std::mt19937 rng(33);
  const AttnCase cases[] = {
      {"fp16 hd16 gqa prefill", DType::F16, DType::F16, 16, 4, 2, 0, 70, 0, false},
      {"bf16 hd40 decode window", DType::BF16, DType::BF16, 40, 2, 1, 130, 1, 50, false},
      {"fp16 hd64 gemma, cached prefix", DType::F16, DType::F16, 64, 2, 2, 60, 9, 0, true},
      {"fp32 hd128 fp16 kv decode", DType::F32, DType::F16, 128, 2, 1, 150, 1, 0, false},
  };
  for (const AttnCase& c : cases) {
    Slice s(c, rng);
    cpu->attention(s.p);
    const cuda::AttnDesc d = s.desc();
    cuda::portable::attention(HostLaunch{}, &d, 1, c.rows, s.shape());
    EXPECT_SAME_BITS(s.got, s.want, c.name);
  }
  // Slices of one batch in one launch (a decode row beside a prefill), each its own bits.
  Slice a({"decode", DType::F16, DType::F16, 32, 2, 1, 100, 1, 0, false}, rng);
  Slice b({"prefill", DType::F16, DType::F16, 32, 2, 1, 0, 40, 0, false}, rng);
  cpu->attention(a.p);
  cpu->attention(b.p);
  const cuda::AttnDesc descs[] = {a.desc(), b.desc()};
  cuda::portable::attention(HostLaunch{}, descs, 2, 40, a.shape());
  EXPECT_SAME_BITS(a.got, a.want, "batch: decode slice");
  EXPECT_SAME_BITS(b.got, b.want, "batch: prefill slice");
}

TEST(CudaKernelsOnCpu, InvariantGemmRowIsTheSameForEveryMAndTheProductIsRight) {
  auto ref = make_kernels(KernelPolicy::Reference, nullptr);
  std::mt19937 rng(34);
  // Every kernel of the dispatch, each forced on every slice (Auto: the register prefetch to
  // M = 64, the shared-memory pipeline beyond, 64 x 128 tiles to M = 256, then 128 x 128), over
  // partial column blocks and chunks past K; rows without 16-byte loads (K % 8 != 0) always take
  // the register prefetch.
  using cuda::invariant::GemmKernel;
  constexpr auto& kernels = test::kMmaSyncGemmKernels;
  const std::pair<int, int> slices[] = {{0, 1},  {299, 1}, {5, 3},   {10, 16}, {20, 17}, {3, 64},
                                        {0, 65}, {7, 130}, {40, 256}, {33, 257}};
  for (DType act : {DType::F16, DType::BF16})
    // Whole 32-k chunks, a partial chunk, rows without 16-byte loads, and 41 chunks, where the rings
    // (16 and 8 chunks) and the pipelines' stages wrap and end on a partial step: that one on 70
    // rows and 40 columns (the emulated mma is slow), which the slices up to 65 rows fit.
    for (int K : {96, 40, 77, 1304}) {
      const bool long_k = K > 1000;
      // N: two 128-column blocks, the second partial; at K = 96 two 256-column blocks too.
      const int kBig = long_k ? 70 : 300, N = long_k ? 40 : K == 96 ? 264 : 136;
      const auto wf = normals(size_t(N) * K, rng, act);
      const auto x = normals(size_t(kBig) * K, rng, act);
      auto wb = stored(act, wf);
      const auto xb = stored(act, x);
      wb.resize(wb.size() + 64, 0xff);  // NaNs past W's end: a kernel that reads past K gives NaN
      const int store = cuda::store_of(act);
      std::vector<float> big(size_t(kBig) * N, NAN), want(big.size());
      cuda::invariant::gemm(HostLaunch{}, xb.data(), kBig, wb.data(), store, K, N, big.data());
      ref->matmul(x.data(), kBig, test::weight_view(wb, act, N, K), act, want.data());
      EXPECT_LE(test::max_abs_diff(big, want), 1e-4 * std::max(1, K / 96))
          << dtype_name(act) << " K " << K << ": the product is wrong";
      for (auto [m0, rows] : slices)
        for (auto [pick, name] : kernels) {
          if (m0 + rows > kBig) continue;
          // The emulation is slow: Auto on every slice, a forced kernel on one row, a partial
          // m16 tile past 16 rows, a partial 64-row tile and the last partial 128-row tile.
          const bool few = (m0 == 0 && rows == 1) || rows == 17 || rows == 65 || rows == 257;
          if (pick != GemmKernel::Auto && !few) continue;
          std::vector<float> alone(size_t(rows) * N, NAN);
          cuda::invariant::gemm(HostLaunch{}, xb.data() + size_t(m0) * K * 2, rows, wb.data(), store, K, N,
                                alone.data(), pick);
          const std::vector<float> part(big.begin() + long(m0) * N, big.begin() + long(m0 + rows) * N);
          EXPECT_SAME_BITS(alone, part,
                           std::string(dtype_name(act)) + " K " + std::to_string(K) + " rows " + std::to_string(m0) +
                               "+" + std::to_string(rows) + " (" + name + ")");
        }
    }
}

// The tensor-core attention of fp16/bf16 passes, as `standard` runs it (one running state) and as
// `invariant` does (keys in 128-key chunks merged in order; decode steps by chunk, then combined):
// under `invariant` a position's output row is the same bits whether the row is a decode step,
// part of a prefill chunk, of the whole cache-OFF prefill, or a slice of a batch; either way it is
// attention (near the CPU's, which rounds at the same points).
TEST(CudaKernelsOnCpu, TensorCoreAttentionRowIsTheSameAloneChunkedOrBatched) {
  auto cpu = make_kernels(KernelPolicy::Standard, nullptr);
  std::mt19937 rng(35);
  // Up to 300 rows: 1 to 3 chunks; windows that start past a whole chunk.
  const AttnCase cases[] = {
      {"fp16 hd64 gqa", DType::F16, DType::F16, 64, 4, 2, 0, 150, 0, false},
      {"bf16 hd128", DType::BF16, DType::BF16, 128, 2, 2, 0, 130, 0, false},
      {"fp16 hd32 window 40", DType::F16, DType::F16, 32, 2, 1, 0, 140, 40, false},
      {"bf16 hd96 gemma window 70", DType::BF16, DType::BF16, 96, 2, 1, 0, 135, 70, true},
      {"fp16 hd32 300 rows", DType::F16, DType::F16, 32, 1, 1, 0, 300, 0, false},
      {"bf16 hd32 300 rows window 150", DType::BF16, DType::BF16, 32, 1, 1, 0, 300, 150, false},
      {"fp16 hd64 gqa 270 rows window 128", DType::F16, DType::F16, 64, 4, 2, 0, 270, 128, false},
  };
  for (const AttnCase& c : cases) {
    Slice whole(c, rng);  // every position 0..rows-1 in one prefill (cache OFF)
    cpu->attention(whole.p);
    const cuda::AttnShape sh = whole.shape();
    const cuda::AttnDesc wd = whole.desc();
    const float tol = c.act == DType::F16 ? 2e-2f : 1e-1f;
    std::vector<float> by_mode[2];  // standard's whole prefill, invariant's
    for (bool chunked : {false, true}) {
      const std::string mode = std::string(c.name) + (chunked ? " (chunked)" : "");
      ASSERT_TRUE(cuda::attn_mma::prefill(HostLaunch{}, &wd, 1, c.rows, sh, 2, chunked)) << mode;
      // Copying each tile before computing it (one stage) gives what overlapping them (two) gives.
      const std::vector<float> two_stages = whole.got;
      ASSERT_TRUE(cuda::attn_mma::prefill(HostLaunch{}, &wd, 1, c.rows, sh, 1, chunked)) << mode;
      EXPECT_SAME_BITS(whole.got, two_stages, mode + ": one stage against two");
      EXPECT_LE(test::max_abs_diff(whole.got, whole.want), tol) << mode << ": not the attention the CPU computes";
      by_mode[chunked] = whole.got;
    }
    // The whole prefill as the output's rounding point (AttnStore): each value rounded, reported
    // at its flat index and copied there; `only` leaves the fp32 output unwritten. On the cases of
    // up to 150 rows (every dtype, head_dim, a window and Gemma's scores): the emulation's time
    // grows with rows squared, and four more passes of the 300-row cases took this test to 470-550 s
    // of its 600 on a loaded two-core host.
    for (bool chunked : {false, true})
      for (bool only : {false, true}) {
        if (c.rows > 150) continue;
        const std::string how = std::string(c.name) + (chunked ? " (chunked)" : "") + (only ? ", copy only" : "");
        std::vector<float> want = by_mode[chunked];
        for (float& x : want) x = round_to(c.act, x);
        std::vector<uint16_t> copy(want.size(), 0xdead);
        unsigned long long hits = ~0ull;
        int any = 0;
        std::fill(whole.got.begin(), whole.got.end(), NAN);
        const cuda::AttnStore st{sh.act, {&hits, 0, &any}, {copy.data(), sh.act, only}, whole.got.data()};
        ASSERT_TRUE(cuda::attn_mma::prefill(HostLaunch{}, &wd, 1, c.rows, sh, 2, chunked, st)) << how;
        if (only)
          EXPECT_TRUE(std::all_of(whole.got.begin(), whole.got.end(), [](float x) { return std::isnan(x); })) << how;
        else
          EXPECT_SAME_BITS(whole.got, want, how + ": rounded");
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_EQ(copy[i], c.act == DType::F16 ? f32_to_f16(want[i]) : f32_to_bf16(want[i])) << how << " copy " << i;
        EXPECT_EQ(hits, ~0ull) << how;
        EXPECT_EQ(any, 0) << how;
      }
    if (c.rows > 128) {  // past one chunk the merges round differently: the modes are not one thing
      EXPECT_NE(std::memcmp(by_mode[0].data(), by_mode[1].data(), by_mode[0].size() * 4), 0) << c.name;
    }
    const size_t row = size_t(c.heads) * c.hd;
    auto part = [&](int pos, int n) {
      return std::vector<float>(by_mode[1].begin() + long(pos * row), by_mode[1].begin() + long((pos + n) * row));
    };
    // The same cache, read by other calls as `invariant` makes them (one-row slices by chunk, then
    // combined; the others through the chunked prefill): a decode step at pos, a 7-row chunk.
    // (first position, rows); a decode block of `warps` warps (the same bits).
    auto call = [&](std::vector<std::pair<int, int>> slices, int stages = 2, int warps = cuda::attn_mma::kSplitWarps) {
      std::vector<std::vector<float>> outs;
      std::vector<AttentionParams> ps;
      for (auto [pos, n] : slices) outs.emplace_back(size_t(n) * row, NAN);
      for (size_t i = 0; i < slices.size(); ++i) {
        AttentionParams a = whole.p;
        a.q = whole.q.data() + slices[i].first * row;
        a.out = outs[i].data();
        a.start_pos = slices[i].first;
        a.n_rows = slices[i].second;
        ps.push_back(a);
      }
      // The cut the CUDA backend makes (cuda_attention_plan.h).
      const cuda::AttentionPlan plan = cuda::plan_fixed_order_attention(ps.data(), int(ps.size()), true);
      if (!plan.rows.empty()) {
        EXPECT_TRUE(cuda::attn_mma::prefill(HostLaunch{}, plan.rows.data(), int(plan.rows.size()), plan.max_rows, sh,
                                            stages, true));
      }
      if (!plan.steps.empty()) {
        const int slots = cuda::attn_mma::split_slots(plan.max_pos);
        EXPECT_GE(slots * cuda::attn_mma::kChunkKeys, plan.max_pos + 1);
        // NaN in every slot: a chunk the combine reads but no block wrote would show.
        std::vector<float> parts(plan.steps.size() * c.heads * slots * (c.hd + 2), NAN);
        std::vector<unsigned> counts(plan.steps.size() * c.heads, 0u);
        EXPECT_TRUE(cuda::attn_mma::split_decode(HostLaunch{}, plan.steps.data(), int(plan.steps.size()), sh,
                                                 parts.data(), slots, counts.data(), {}, stages, warps));
        EXPECT_EQ(counts, std::vector<unsigned>(counts.size(), 0u)) << c.name << ": counts not left at zero";
      }
      return outs;
    };
    // 277: a window of 150 starts at 128, a chunk's first key.
    for (int pos : {0, 1, 39, 63, 64, 65, 100, 127, 128, 129, 255, 256, 277, c.rows - 1}) {
      if (pos >= c.rows) continue;
      const std::string at = std::string(c.name) + " position " + std::to_string(pos);
      EXPECT_SAME_BITS(call({{pos, 1}})[0], part(pos, 1), at + " (decode step)");
      const int n = std::min(7, c.rows - pos);
      EXPECT_SAME_BITS(call({{pos, n}})[0], part(pos, n), at + " (chunk of " + std::to_string(n) + ")");
    }
    EXPECT_SAME_BITS(call({{c.rows - 1, 1}}, 1)[0], part(c.rows - 1, 1), std::string(c.name) + " decode, one stage");
    for (int stages : {1, 2}) {  // decode blocks of one warp: every chain of the row its own
      const auto steps = call({{c.rows - 1, 1}, {c.rows / 2, 1}}, stages, 1);
      const std::string how = std::string(c.name) + " decode, one warp, stages " + std::to_string(stages);
      EXPECT_SAME_BITS(steps[0], part(c.rows - 1, 1), how + ", last position");
      EXPECT_SAME_BITS(steps[1], part(c.rows / 2, 1), how + ", middle position");
    }
    {  // A decode step that is the output's rounding point: the row rounded, reported and copied.
      const int pos = c.rows - 1;
      std::vector<float> got(row, NAN), want = part(pos, 1);
      std::vector<uint16_t> copy(row, 0xdead);
      unsigned long long hits = ~0ull;
      int any = 0;
      cuda::AttnDesc d = wd;
      d.q = whole.q.data() + pos * row, d.out = got.data(), d.start_pos = pos, d.n_rows = 1;
      const int slots = cuda::attn_mma::split_slots(pos);
      std::vector<float> parts(size_t(c.heads) * slots * (c.hd + 2), NAN);
      std::vector<unsigned> counts(size_t(c.heads), 0u);
      const cuda::AttnStore st{sh.act, {&hits, 0, &any}, {copy.data(), sh.act}, got.data()};
      EXPECT_TRUE(cuda::attn_mma::split_decode(HostLaunch{}, &d, 1, sh, parts.data(), slots, counts.data(), st));
      for (float& x : want) x = round_to(c.act, x);
      EXPECT_SAME_BITS(got, want, std::string(c.name) + " decode, rounded");
      for (size_t i = 0; i < row; ++i)
        ASSERT_EQ(copy[i], c.act == DType::F16 ? f32_to_f16(want[i]) : f32_to_bf16(want[i])) << c.name << " copy " << i;
      EXPECT_EQ(hits, ~0ull);
      EXPECT_EQ(any, 0);
    }
    // Decode steps beside prefill slices, one of them across the first chunk boundary and, where
    // the case is long enough, one across the second (whose rows span two 64-row blocks).
    const std::pair<int, int> late = c.rows >= 270 ? std::pair{200, 70} : std::pair{0, 5};
    const auto batch = call({{70, 1}, {10, 60}, {c.rows - 1, 1}, {64, 3}, {120, 1}, {115, 15}, late});
    EXPECT_SAME_BITS(batch[0], part(70, 1), std::string(c.name) + " batch: decode at 70");
    EXPECT_SAME_BITS(batch[1], part(10, 60), std::string(c.name) + " batch: chunk 10..69");
    EXPECT_SAME_BITS(batch[2], part(c.rows - 1, 1), std::string(c.name) + " batch: decode at the end");
    EXPECT_SAME_BITS(batch[3], part(64, 3), std::string(c.name) + " batch: chunk 64..66");
    EXPECT_SAME_BITS(batch[4], part(120, 1), std::string(c.name) + " batch: decode at 120");
    EXPECT_SAME_BITS(batch[5], part(115, 15), std::string(c.name) + " batch: chunk 115..129");
    EXPECT_SAME_BITS(batch[6], part(late.first, late.second),
                     std::string(c.name) + " batch: " + std::to_string(late.second) + " rows from " +
                         std::to_string(late.first));
  }
  {  // 9 chunks: the combine reads a decode step's chunk states in two rounds; the row is still the
     // chunked prefill's (the last row of a 7-row chunk ending there, its own bits: above).
    const int rows = 1100, pos = rows - 1, hd = 32;
    Slice big({"fp16 hd32 1100 rows", DType::F16, DType::F16, hd, 1, 1, 0, rows, 0, false}, rng);
    const cuda::AttnShape sh = big.shape();
    std::vector<float> step_out(hd, NAN), chunk_out(7 * hd, NAN);
    cuda::AttnDesc step = big.desc(), chunk = big.desc();
    step.q = big.q.data() + pos * hd, step.out = step_out.data(), step.start_pos = pos, step.n_rows = 1;
    chunk.q = big.q.data() + (pos - 6) * hd, chunk.out = chunk_out.data(), chunk.start_pos = pos - 6, chunk.n_rows = 7;
    ASSERT_TRUE(cuda::attn_mma::prefill(HostLaunch{}, &chunk, 1, 7, sh, 2, true));
    const int slots = cuda::attn_mma::split_slots(pos);
    ASSERT_GT(slots, 8);
    std::vector<float> parts(size_t(slots) * (hd + 2), NAN);
    std::vector<unsigned> counts(1, 0u);
    for (int warps : {1, cuda::attn_mma::kSplitWarps}) {
      std::fill(parts.begin(), parts.end(), NAN);
      std::fill(step_out.begin(), step_out.end(), NAN);
      ASSERT_TRUE(
          cuda::attn_mma::split_decode(HostLaunch{}, &step, 1, sh, parts.data(), slots, counts.data(), {}, 2, warps));
      EXPECT_SAME_BITS(step_out, std::vector<float>(chunk_out.end() - hd, chunk_out.end()),
                       "9 chunks: decode step, warps " + std::to_string(warps));
    }
  }
  // Where it does not apply, nothing is launched (the caller takes the portable kernel).
  Slice f32({"fp32", DType::F32, DType::F32, 64, 2, 2, 0, 3, 0, false}, rng);
  const cuda::AttnDesc fd = f32.desc();
  EXPECT_FALSE(cuda::attn_mma::prefill(HostLaunch{}, &fd, 1, 3, f32.shape()));
  Slice mixed({"fp16 with fp32 kv", DType::F16, DType::F32, 64, 2, 2, 0, 3, 0, false}, rng);
  const cuda::AttnDesc md = mixed.desc();
  EXPECT_FALSE(cuda::attn_mma::prefill(HostLaunch{}, &md, 1, 3, mixed.shape()));
  EXPECT_TRUE(std::isnan(f32.got[0]) && std::isnan(mixed.got[0]));
}

// q's rows read in the K/V storage type (AttnDesc::q16: the rotation's 16-bit copy of them, where
// nothing else reads q) instead of packed from fp32 by the kernel: the same bits, in both modes,
// with a cached prefix and a window; q's fp32 rows (NaN here) are not read.
TEST(CudaKernelsOnCpu, TensorCoreAttentionOfQsSixteenBitRowsIsItsOwnPacking) {
  std::mt19937 rng(36);
  const AttnCase cases[] = {
      {"fp16 hd64 gqa", DType::F16, DType::F16, 64, 4, 2, 0, 40, 0, false},
      {"bf16 hd128 cached prefix", DType::BF16, DType::BF16, 128, 2, 1, 20, 17, 0, false},
      {"fp16 hd32 window 12", DType::F16, DType::F16, 32, 2, 1, 0, 33, 12, false},
  };
  for (const AttnCase& c : cases) {
    Slice sl(c, rng);
    const cuda::AttnShape sh = sl.shape();
    const std::vector<uint8_t> q16 = stored(c.act, sl.q);
    std::vector<float> poisoned(sl.q.size(), NAN);
    for (bool chunked : {false, true}) {
      const std::string how = std::string(c.name) + (chunked ? " (chunked)" : "");
      const cuda::AttnDesc d = sl.desc();
      ASSERT_TRUE(cuda::attn_mma::prefill(HostLaunch{}, &d, 1, c.rows, sh, 2, chunked)) << how;
      const std::vector<float> from_fp32 = sl.got;
      cuda::AttnDesc d16 = d;
      d16.q = poisoned.data();
      d16.q16 = q16.data();
      std::fill(sl.got.begin(), sl.got.end(), NAN);
      ASSERT_TRUE(cuda::attn_mma::prefill(HostLaunch{}, &d16, 1, c.rows, sh, 2, chunked)) << how;
      EXPECT_SAME_BITS(sl.got, from_fp32, how + ": q in 16 bits");
    }
  }
}

// The standard policy's decode attention, one launch: each (slice, head)'s splits merged by whichever
// of its warps finishes last, in split order, so the bits do not depend on which (three block
// orders), the counts are left at zero, and an early merge would read the NaN the partial states
// start as. Handed the output's rounding point, the rows are rounded, copied and their first
// NaN/Inf reported as launch_round_checks would. Both load paths: whole rows in one round trip
// (16-bit K/V, head_dim 32, 64, 128; with a window and Gemma-2's scores too) and the general one.
TEST(CudaKernelsOnCpu, StandardDecodeIsOneLaunchMergedByTheLastWarp) {
  auto cpu = make_kernels(KernelPolicy::Standard, nullptr);
  std::mt19937 rng(36);
  const AttnCase cases[] = {
      {"fp16 hd64 gqa", DType::F16, DType::F16, 64, 4, 2, 0, 1, 0, false},
      {"bf16 hd128", DType::BF16, DType::BF16, 128, 2, 2, 0, 1, 0, false},
      {"fp32 hd40 window 100", DType::F32, DType::F32, 40, 3, 1, 0, 1, 100, false},
      {"fp16 hd96 gemma, fp32 kv", DType::F16, DType::F32, 96, 2, 1, 0, 1, 0, true},
      {"fp16 hd256", DType::F16, DType::F16, 256, 2, 1, 0, 1, 0, false},
      {"bf16 hd32 gqa", DType::BF16, DType::BF16, 32, 4, 1, 0, 1, 0, false},
      {"fp16 hd128 gemma window 300", DType::F16, DType::F16, 128, 2, 1, 0, 1, 300, true},
      {"fp32 hd64, fp16 kv", DType::F32, DType::F16, 64, 2, 2, 0, 1, 0, false},
  };
  for (const AttnCase& base : cases) {
    std::vector<Slice> slices;
    for (int pos : {700, 5, 333, 1500}) {  // many splits, one, a few, more than a warp's lanes
      AttnCase c = base;
      c.start_pos = pos;
      slices.emplace_back(c, rng);
    }
    const bool overflow = base.kv == DType::F32 && base.act == DType::F16;
    if (overflow) {  // slice 1's V of KV head 0 past fp16's range: its heads' rows round to Inf
      Slice& s = slices[1];
      auto* v = reinterpret_cast<float*>(s.v.data());
      for (int j = 0; j <= s.p.start_pos; ++j)
        for (int e = 0; e < base.hd; ++e) v[size_t(j) * base.hd + e] *= 1e6f;
    }
    const int n = int(slices.size());
    const size_t width = size_t(base.heads) * base.hd;
    std::vector<AttentionParams> ps;
    for (Slice& s : slices) {
      cpu->attention(s.p);
      ps.push_back(s.p);
    }
    const cuda::AttentionPlan plan = cuda::plan_standard_attention(ps.data(), n, 128);
    ASSERT_EQ(plan.steps.size(), size_t(n));
    ASSERT_GT(plan.steps[0].n_splits, 1) << base.name;
    if (base.window == 0) {
      ASSERT_GT(plan.steps[3].n_splits, 32) << base.name;  // the merge takes its splits a warp at a time
    }
    const cuda::AttnShape sh = slices[0].shape();
    auto run = [&](const cuda::AttnStore& st, std::vector<float>& out) {
      std::vector<cuda::AttnDesc> descs = plan.steps;
      for (int i = 0; i < n; ++i) {
        descs[size_t(i)].k = slices[size_t(i)].k.data();
        descs[size_t(i)].v = slices[size_t(i)].v.data();
        descs[size_t(i)].out = out.data() + size_t(i) * width;
      }
      std::vector<float> parts(size_t(n) * base.heads * plan.splits * (base.hd + 2), NAN);
      std::vector<unsigned> counts(size_t(n) * base.heads, 0u);
      cuda::attn_decode::decode(HostLaunch{}, descs.data(), n, plan.splits, sh, parts.data(), counts.data(), st);
      EXPECT_EQ(counts, std::vector<unsigned>(counts.size(), 0u)) << base.name << ": counts not left at zero";
    };
    std::vector<float> first(size_t(n) * width, NAN);
    run({}, first);
    for (int i = 0; i < n; ++i) {
      if (overflow && i == 1) continue;
      const std::vector<float> got(first.begin() + long(i * width), first.begin() + long((i + 1) * width));
      EXPECT_LE(test::max_abs_diff(got, slices[size_t(i)].want), base.act == DType::F32 ? 1e-5f : 2e-2f)
          << base.name << " slice " << i << ": not the attention the CPU computes";
    }
    for (int again = 0; again < 2; ++again) {  // the other two block orders
      std::vector<float> out(first.size(), NAN);
      run({}, out);
      EXPECT_SAME_BITS(out, first, std::string(base.name) + ": another block order");
    }
    // As the output's rounding point.
    const int a = cuda::store_of(base.act);
    std::vector<float> out(first.size(), NAN), want = first;
    for (float& x : want) x = round_to(base.act, x);
    std::vector<uint16_t> copy(first.size(), 0xdead);
    unsigned long long hits = ~0ull;
    int any = 0;
    const bool copies = base.act != DType::F32;
    run(cuda::AttnStore{a, {&hits, 0, &any}, {copies ? copy.data() : nullptr, a}, out.data()}, out);
    EXPECT_SAME_BITS(out, want, std::string(base.name) + ": rounded");
    size_t bad = want.size();
    for (size_t i = 0; i < want.size() && bad == want.size(); ++i)
      if (!std::isfinite(want[i])) bad = i;
    EXPECT_EQ(bad < want.size(), overflow) << base.name;
    if (bad < want.size()) {
      EXPECT_EQ(hits, (static_cast<unsigned long long>(bad) << 2) | (want[bad] > 0 ? 1ull : 2ull)) << base.name;
      EXPECT_EQ(any, 1) << base.name;
    } else {
      EXPECT_EQ(hits, ~0ull) << base.name;
      EXPECT_EQ(any, 0) << base.name;
    }
    for (size_t i = 0; copies && i < want.size(); ++i)
      ASSERT_EQ(copy[i], base.act == DType::F16 ? f32_to_f16(want[i]) : f32_to_bf16(want[i])) << base.name << " " << i;
  }
}

// An attention launch may be the output's rounding point only when its rows are all of that
// output, one block in any order of slices (CudaKernels::submit_attention).
TEST(CudaKernelsOnCpu, AttentionOutputBlockIsTheWholeOutputOnly) {
  std::vector<float> out(8 * 8);
  auto slice = [](float* o, int rows = 1) {
    cuda::AttnDesc d{};
    d.out = o;
    d.n_rows = rows;
    return d;
  };
  cuda::AttentionPlan plan;
  EXPECT_EQ(cuda::output_block(plan.steps, plan.rows, 8), nullptr) << "no step";
  plan.steps = {slice(out.data() + 8), slice(out.data()), slice(out.data() + 16)};
  EXPECT_EQ(cuda::output_block(plan.steps, plan.rows, 8), out.data()) << "three rows, out of order";
  EXPECT_EQ(cuda::output_block(plan.steps, plan.rows, 4), nullptr) << "rows apart";
  plan.steps[2].out = out.data() + 24;
  EXPECT_EQ(cuda::output_block(plan.steps, plan.rows, 8), nullptr) << "a gap";
  plan.steps[2].out = out.data() + 16;
  plan.rows = {slice(out.data() + 24)};
  EXPECT_EQ(cuda::output_block(plan.steps, plan.rows, 8), nullptr) << "a prefill slice beside them";
  // Prefill slices of several rows: each the rows its n_rows says.
  plan.steps.clear();
  plan.rows = {slice(out.data() + 24, 5), slice(out.data(), 3)};
  EXPECT_EQ(cuda::output_block(plan.rows, plan.steps, 8), out.data()) << "slices of 3 and 5 rows";
  plan.rows[1].n_rows = 2;
  EXPECT_EQ(cuda::output_block(plan.rows, plan.steps, 8), nullptr) << "a row between them unwritten";
  plan.rows[1].n_rows = 4;
  EXPECT_EQ(cuda::output_block(plan.rows, plan.steps, 8), nullptr) << "overlapping slices";
  plan.rows[1].n_rows = 3;
  plan.steps = {slice(out.data() + 64)};
  EXPECT_EQ(cuda::output_block(plan.rows, plan.steps, 8), nullptr) << "a decode step beside them";
}

}  // namespace
}  // namespace kvp
