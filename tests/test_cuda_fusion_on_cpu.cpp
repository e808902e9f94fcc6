// The CUDA backend's fused decode kernels (src/cuda/cuda_elementwise_kernels.cuh), their own
// source run on the CPU (src/cuda/simt_host.h), against the unfused launches they replace: a
// pending rounding point folded into the kernel that reads the buffer (RoPE, the residual add, the
// gated activation, the cache write), the 16-bit copy of a cuBLAS input written by the kernel that
// rounds it (RMSNorm, the gated activation, the rounding check), several rounding checks in one
// launch, and cuda_fusion.cuh's bookkeeping. Each must leave the same bits in every buffer it
// touches and the same NaN/Inf report in every slot: inputs hold values that overflow fp16 and
// bf16, NaN, -0 and fp16 subnormals, in fp32, fp16 and bf16 passes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "test_util.h"
// The kernels' source, built for the host (after every other header: simt_host.h defines the CUDA
// keywords as macros).
#include "cuda/cuda_elementwise_kernels.cuh"
#include "cuda/cuda_fusion.cuh"
#include "cuda_fusion_on_cpu_util.h"

namespace kvp {
namespace {

namespace ew = cuda::elementwise;
using cuda::InRound;
using cuda::KvWriteDesc;
using cuda::NonFiniteSlot;
using cuda::OutCopy;
using cuda::RoundJob;
using test::expect_same_hits;
using test::gemm_sums;
using test::Hits;

constexpr DType kAllTypes[] = {DType::F32, DType::F16, DType::BF16};

struct HostLaunch {
  template <class Kernel, class... Args>
  void operator()(Kernel kernel, dim3 grid, dim3 block, Args... args) const {
    simt::launch(grid, block, kernel, args...);
  }
};

void round_all(float* x, size_t n, int act, NonFiniteSlot chk) {
  const RoundJob j{x, n, act, chk, OutCopy{}};
  ew::round_checks(HostLaunch{}, &j, 1);
}

std::string name(DType t, const char* what) { return std::string(dtype_name(t)) + " " + what; }

void rope1(float* x, int M, int heads, int hd, const std::vector<int>& pos, const std::vector<float>& cs,
           const std::vector<float>& sn, int a, bool adjacent, NonFiniteSlot chk, InRound in) {
  const cuda::RopeJob j{x, heads, chk, in};
  ew::rope(HostLaunch{}, &j, 1, M, hd, hd, pos.data(), cs.data(), sn.data(), a, adjacent, false);
}

// q (4 heads) and k (2 heads) rotated in one launch, each rounding its pending projection as it
// reads it, against: round q, rotate q, round k, rotate k.
TEST(CudaFusionOnCpu, RopeOfQAndKInOneLaunchRoundsTheirPendingInputs) {
  std::mt19937 rng(5);
  const int M = 2, hq = 4, hk = 2, hd = 64, positions = 9, half = hd / 2;
  std::vector<float> cs(size_t(positions) * half), sn(cs.size());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t i = 0; i < cs.size(); ++i) cs[i] = u(rng), sn[i] = u(rng);
  const std::vector<int> pos = {3, 8};
  for (DType t : kAllTypes)
    for (bool adjacent : {false, true}) {
      const int a = cuda::store_of(t);
      const auto q0 = gemm_sums(size_t(M) * hq * hd, rng, true), k0 = gemm_sums(size_t(M) * hk * hd, rng, true);
      auto qw = q0, kw = k0, qg = q0, kg = k0, q1 = q0;
      Hits hw, hg, h1;
      round_all(qw.data(), qw.size(), a, hw.at(1));
      rope1(qw.data(), M, hq, hd, pos, cs, sn, a, adjacent, hw.at(2), InRound{});
      round_all(kw.data(), kw.size(), a, hw.at(3));
      rope1(kw.data(), M, hk, hd, pos, cs, sn, a, adjacent, hw.at(4), InRound{});
      const cuda::RopeJob jobs[2] = {{qg.data(), hq, hg.at(2), InRound{a, hg.at(1)}},
                                     {kg.data(), hk, hg.at(4), InRound{a, hg.at(3)}}};
      ew::rope(HostLaunch{}, jobs, 2, M, hd, hd, pos.data(), cs.data(), sn.data(), a, adjacent, false);
      const std::string what = name(t, adjacent ? "rope, adjacent pairs" : "rope, halves");
      EXPECT_SAME_BITS(qg, qw, what + ": q");
      EXPECT_SAME_BITS(kg, kw, what + ": k");
      expect_same_hits(hg, hw, what);
      EXPECT_NE(hw.slot[1], ~0ull) << what << ": the inputs must hold a NaN/Inf";
      // One buffer alone.
      rope1(q1.data(), M, hq, hd, pos, cs, sn, a, adjacent, h1.at(2), InRound{a, h1.at(1)});
      EXPECT_SAME_BITS(q1, qw, what + ": q alone");
      EXPECT_EQ(h1.slot[1], hw.slot[1]);
      EXPECT_EQ(h1.slot[2], hw.slot[2]);
    }
}

TEST(CudaFusionOnCpu, AddRoundsItsPendingOperandAndWritesItBack) {
  std::mt19937 rng(6);
  for (DType t : kAllTypes) {
    const int a = cuda::store_of(t);
    const size_t n = 1000;
    const auto x0 = test::normals(n, rng, t), y0 = gemm_sums(n, rng, true);
    auto xw = x0, yw = y0, xg = x0, yg = y0;
    Hits hw, hg;
    round_all(yw.data(), n, a, hw.at(3));
    ew::add(HostLaunch{}, xw.data(), yw.data(), n, a, hw.at(4), InRound{});
    ew::add(HostLaunch{}, xg.data(), yg.data(), n, a, hg.at(4), InRound{a, hg.at(3)});
    EXPECT_SAME_BITS(xg, xw, name(t, "add: x"));
    EXPECT_SAME_BITS(yg, yw, name(t, "add: y written back rounded"));
    expect_same_hits(hg, hw, name(t, "add"));
    // y not written back (InRound::write_back): the same sum and reports, y as it was.
    auto xn = x0, yn = y0;
    Hits hn;
    ew::add(HostLaunch{}, xn.data(), yn.data(), n, a, hn.at(4), InRound{a, hn.at(3), false});
    EXPECT_SAME_BITS(xn, xw, name(t, "add, no write-back: x"));
    EXPECT_SAME_BITS(yn, y0, name(t, "add, no write-back: y as it was"));
    expect_same_hits(hn, hw, name(t, "add, no write-back"));
    // In place (y == x).
    auto zw = gemm_sums(n, rng, true), zg = zw;
    Hits iw, ig;
    round_all(zw.data(), n, a, iw.at(0));
    ew::add(HostLaunch{}, zw.data(), zw.data(), n, a, iw.at(1), InRound{});
    ew::add(HostLaunch{}, zg.data(), zg.data(), n, a, ig.at(1), InRound{a, ig.at(0)});
    EXPECT_SAME_BITS(zg, zw, name(t, "add in place"));
    expect_same_hits(ig, iw, name(t, "add in place"));
  }
}

// The 16-bit copy as launch_to_storage writes it, into words (fp32: the floats' bits).
std::vector<float> stored_copy(const std::vector<float>& x, int store) {
  std::vector<float> buf(x.size(), 0.0f);  // 4 bytes a value: room for every storage type
  ew::to_storage(HostLaunch{}, x.data(), x.size(), buf.data(), store);
  return buf;
}

TEST(CudaFusionOnCpu, GatedRoundsGateAndUpAndWritesTheCopy) {
  std::mt19937 rng(7);
  for (DType t : kAllTypes)
    for (bool gelu : {false, true})
      for (int store : {cuda::kF16, cuda::kBF16}) {
        const int a = cuda::store_of(t);
        const size_t n = 777;
        auto gw = gemm_sums(n, rng, true, 3.0f), uw = gemm_sums(n, rng, false, 3.0f);
        uw[n - 5] = std::numeric_limits<float>::infinity();
        uw[n - 9] = std::numeric_limits<float>::quiet_NaN();
        const auto g0 = gw, u0 = uw;
        auto gg = gw, ug = uw;
        Hits hw, hg;
        round_all(gw.data(), n, a, hw.at(1));
        round_all(uw.data(), n, a, hw.at(2));
        ew::gated(HostLaunch{}, gw.data(), uw.data(), n, a, gelu, hw.at(3), InRound{}, InRound{}, OutCopy{});
        const auto copy_w = stored_copy(gw, store);
        std::vector<float> copy_g(n, 0.0f);
        ew::gated(HostLaunch{}, gg.data(), ug.data(), n, a, gelu, hg.at(3), InRound{a, hg.at(1)}, InRound{a, hg.at(2)},
                  OutCopy{copy_g.data(), store});
        const std::string what = name(t, gelu ? "gelu_tanh_mul" : "silu_mul") + " copy " + std::to_string(store);
        EXPECT_SAME_BITS(gg, gw, what + ": gate");
        EXPECT_SAME_BITS(ug, uw, what + ": up written back rounded");
        EXPECT_SAME_BITS(copy_g, copy_w, what + ": 16-bit copy");
        expect_same_hits(hg, hw, what);
        // Neither input written back (InRound::write_back): gate holds the result all the same.
        auto gn = g0, un = u0;
        std::vector<float> copy_n(n, 0.0f);
        Hits hn;
        ew::gated(HostLaunch{}, gn.data(), un.data(), n, a, gelu, hn.at(3), InRound{a, hn.at(1), false},
                  InRound{a, hn.at(2), false}, OutCopy{copy_n.data(), store});
        EXPECT_SAME_BITS(gn, gw, what + ", no write-back: gate");
        EXPECT_SAME_BITS(un, u0, what + ", no write-back: up as it was");
        EXPECT_SAME_BITS(copy_n, copy_w, what + ", no write-back: 16-bit copy");
        expect_same_hits(hn, hw, what + ", no write-back");
        // The copy all that is read (OutCopy::only): gate left as it was too.
        auto go = g0, uo = u0;
        std::vector<float> copy_o(n, 0.0f);
        Hits ho;
        ew::gated(HostLaunch{}, go.data(), uo.data(), n, a, gelu, ho.at(3), InRound{a, ho.at(1), false},
                  InRound{a, ho.at(2), false}, OutCopy{copy_o.data(), store, true});
        EXPECT_SAME_BITS(go, g0, what + ", copy only: gate as it was");
        EXPECT_SAME_BITS(copy_o, copy_w, what + ", copy only: 16-bit copy");
        expect_same_hits(ho, hw, what + ", copy only");
      }
}

TEST(CudaFusionOnCpu, RmsnormWritesTheCopyOfWhatItStores) {
  std::mt19937 rng(8);
  const int M = 3, dim = 96;
  for (DType t : kAllTypes)
    for (bool fp32_gain : {false, true})
      for (int store : {cuda::kF32, cuda::kF16, cuda::kBF16}) {
        const int a = cuda::store_of(t);
        auto x = test::normals(size_t(M) * dim, rng, t);
        x[5] = 60000.0f;  // the row's norm keeps it large: the gain takes it past fp16
        const auto w = test::normals(dim, rng, t, 4.0f);
        std::vector<float> yw(x.size()), yg(x.size()), copy_g(x.size(), 0.0f);
        Hits hw, hg;
        ew::rmsnorm(HostLaunch{}, x.data(), M, dim, w.data(), 1e-5f, a, fp32_gain, yw.data(), hw.at(0), OutCopy{},
                    cuda::AddIn{}, false);
        const auto copy_w = stored_copy(yw, store);
        ew::rmsnorm(HostLaunch{}, x.data(), M, dim, w.data(), 1e-5f, a, fp32_gain, yg.data(), hg.at(0),
                    OutCopy{copy_g.data(), store}, cuda::AddIn{});
        const std::string what = name(t, "rmsnorm") + " copy " + std::to_string(store);
        EXPECT_SAME_BITS(yg, yw, what);
        EXPECT_SAME_BITS(copy_g, copy_w, what + ": 16-bit copy");
        expect_same_hits(hg, hw, what);
      }
}

// The residual add before an RMSNorm of its output, in the norm's kernel: round the pending
// projection, add it, then normalise (rows wider than a block: a thread's share is strided), each
// thread's share and gains held in registers against the kernel that reads them twice (wider than
// kNormHeld shares, 9000: read twice in both).
TEST(CudaFusionOnCpu, RmsnormTakesOverTheResidualAddBeforeIt) {
  std::mt19937 rng(11);
  const int M = 3;
  for (int dim : {96, 2500, 9000})
    for (DType t : kAllTypes)
      for (bool fp32_gain : {false, true}) {
        const int a = cuda::store_of(t);
        const auto x0 = test::normals(size_t(M) * dim, rng, t, 8.0f), y0 = gemm_sums(x0.size(), rng, true, 8.0f);
        const auto w = test::normals(size_t(dim), rng, t);
        auto xw = x0, yw = y0, xg = x0, yg = y0;
        std::vector<float> ow(x0.size()), og(x0.size()), copy_g(x0.size(), 0.0f);
        Hits hw, hg;
        round_all(yw.data(), yw.size(), a, hw.at(1));
        ew::add(HostLaunch{}, xw.data(), yw.data(), xw.size(), a, hw.at(2), InRound{});
        ew::rmsnorm(HostLaunch{}, xw.data(), M, dim, w.data(), 1e-5f, a, fp32_gain, ow.data(), hw.at(3), OutCopy{},
                    cuda::AddIn{}, false);
        const auto copy_w = stored_copy(ow, cuda::kBF16);
        ew::rmsnorm(HostLaunch{}, xg.data(), M, dim, w.data(), 1e-5f, a, fp32_gain, og.data(), hg.at(3),
                    OutCopy{copy_g.data(), cuda::kBF16}, cuda::AddIn{yg.data(), a, hg.at(2), InRound{a, hg.at(1)}});
        const std::string what = name(t, "add + rmsnorm, dim ") + std::to_string(dim);
        EXPECT_SAME_BITS(xg, xw, what + ": residual");
        EXPECT_SAME_BITS(yg, yw, what + ": projection written back rounded");
        EXPECT_SAME_BITS(og, ow, what + ": normalised");
        EXPECT_SAME_BITS(copy_g, copy_w, what + ": 16-bit copy");
        expect_same_hits(hg, hw, what);
        // The projection not written back (InRound::write_back): the same residual and norm.
        auto xn = x0, yn = y0;
        std::vector<float> on(x0.size());
        Hits hn;
        ew::rmsnorm(HostLaunch{}, xn.data(), M, dim, w.data(), 1e-5f, a, fp32_gain, on.data(), hn.at(3), OutCopy{},
                    cuda::AddIn{yn.data(), a, hn.at(2), InRound{a, hn.at(1), false}});
        EXPECT_SAME_BITS(xn, xw, what + ", no write-back: residual");
        EXPECT_SAME_BITS(yn, y0, what + ", no write-back: projection as it was");
        EXPECT_SAME_BITS(on, ow, what + ", no write-back: normalised");
        expect_same_hits(hn, hw, what + ", no write-back");
        // The copy all that is read of the output (OutCopy::only): the output left as it was.
        auto xo = x0, yo = y0;
        std::vector<float> oo(x0.size(), 0.0f), copy_o(x0.size(), 0.0f);
        Hits ho;
        ew::rmsnorm(HostLaunch{}, xo.data(), M, dim, w.data(), 1e-5f, a, fp32_gain, oo.data(), ho.at(3),
                    OutCopy{copy_o.data(), cuda::kBF16, true},
                    cuda::AddIn{yo.data(), a, ho.at(2), InRound{a, ho.at(1), false}});
        EXPECT_SAME_BITS(xo, xw, what + ", copy only: residual");
        EXPECT_SAME_BITS(oo, std::vector<float>(x0.size(), 0.0f), what + ", copy only: output untouched");
        EXPECT_SAME_BITS(copy_o, copy_w, what + ", copy only: 16-bit copy");
        expect_same_hits(ho, hw, what + ", copy only");
        // In place (x + x), x pending.
        auto zw = y0, zg = y0;
        Hits iw, ig;
        round_all(zw.data(), zw.size(), a, iw.at(1));
        ew::add(HostLaunch{}, zw.data(), zw.data(), zw.size(), a, iw.at(2), InRound{});
        ew::rmsnorm(HostLaunch{}, zw.data(), M, dim, w.data(), 1e-5f, a, fp32_gain, ow.data(), iw.at(3), OutCopy{},
                    cuda::AddIn{}, false);
        ew::rmsnorm(HostLaunch{}, zg.data(), M, dim, w.data(), 1e-5f, a, fp32_gain, og.data(), ig.at(3), OutCopy{},
                    cuda::AddIn{zg.data(), a, ig.at(2), InRound{a, ig.at(1)}});
        EXPECT_SAME_BITS(zg, zw, what + " in place: residual");
        EXPECT_SAME_BITS(og, ow, what + " in place: normalised");
        expect_same_hits(ig, iw, what + " in place");
      }
}

TEST(CudaFusionOnCpu, RoundChecksOfSeveralBuffersInOneLaunchWithCopies) {
  std::mt19937 rng(9);
  for (DType t : kAllTypes) {
    const int a = cuda::store_of(t);
    // Six buffers (two launches of up to four), of other lengths, aligned or not (the float4
    // path and the one-at-a-time path).
    const size_t lens[] = {1003, 64, 4096, 5, 777, 130};
    std::vector<std::vector<float>> w, g, copies_w, copies_g;
    for (size_t i = 0; i < std::size(lens); ++i) {
      w.push_back(gemm_sums(lens[i] + 1, rng, true));
      g.push_back(w.back());
    }
    const std::vector<std::vector<float>> g0 = g;
    Hits hw, hg;
    std::vector<RoundJob> jobs;
    for (size_t i = 0; i < w.size(); ++i) {
      const size_t off = i % 2;  // odd buffers start one float in: not 16-byte aligned
      round_all(w[i].data() + off, lens[i], a, hw.at(int(i)));
      copies_w.push_back(i == 2 ? std::vector<float>(lens[i], 0.0f) : stored_copy(std::vector<float>(w[i].begin() + off, w[i].begin() + off + lens[i]), cuda::kF16));
      copies_g.push_back(std::vector<float>(lens[i], 0.0f));
      // Buffers 3 to 5: the copy is all that is read (OutCopy::only), the buffer left as it was.
      jobs.push_back(RoundJob{g[i].data() + off, lens[i], a, hg.at(int(i)),
                              i == 2 ? OutCopy{} : OutCopy{copies_g.back().data(), cuda::kF16, i >= 3}});
    }
    ew::round_checks(HostLaunch{}, jobs.data(), int(jobs.size()));
    for (size_t i = 0; i < w.size(); ++i) {
      EXPECT_SAME_BITS(g[i], i >= 3 ? g0[i] : w[i], name(t, "round checks: buffer ") + std::to_string(i));
      EXPECT_SAME_BITS(copies_g[i], copies_w[i], name(t, "round checks: copy ") + std::to_string(i));
    }
    expect_same_hits(hg, hw, name(t, "round checks"));
  }
}

TEST(CudaFusionOnCpu, KvWriteOfKAndPendingVInOneLaunch) {
  std::mt19937 rng(10);
  const int heads = 2, hd = 16, capacity = 12, width = heads * hd;
  const int rows[] = {3, 1, 2}, starts[] = {0, 7, 4};  // three sequences, rows concatenated
  const int M = 6;
  for (DType t : kAllTypes)
    for (int store : {cuda::kF32, cuda::kF16, cuda::kBF16}) {
      const int a = cuda::store_of(t);
      const auto k = test::normals(size_t(M) * width, rng, t);
      const auto v0 = gemm_sums(size_t(M) * width, rng, true);
      const size_t cache_n = size_t(heads) * capacity * hd;
      std::vector<std::vector<float>> kc_w(3, std::vector<float>(cache_n, 0.0f)), vc_w = kc_w, kc_g = kc_w,
                                      vc_g = kc_w;
      auto vw = v0, vg = v0;
      auto descs = [&](std::vector<std::vector<float>>& cache, const std::vector<float>& x) {
        std::vector<KvWriteDesc> d;
        int row0 = 0;
        for (int s = 0; s < 3; ++s) {
          d.push_back(KvWriteDesc{cache[size_t(s)].data(), x.data() + size_t(row0) * width, rows[s], starts[s], capacity});
          row0 += rows[s];
        }
        return d;
      };
      Hits hw, hg;
      round_all(vw.data(), vw.size(), a, hw.at(5));
      const auto dk = descs(kc_w, k), dv = descs(vc_w, vw);
      ew::kv_write(HostLaunch{}, dk.data(), 3, 3, heads, hd, store, InRound{}, nullptr, 0);
      ew::kv_write(HostLaunch{}, dv.data(), 3, 3, heads, hd, store, InRound{}, nullptr, 0);
      auto both = descs(kc_g, k);
      const auto dvg = descs(vc_g, vg);
      both.insert(both.end(), dvg.begin(), dvg.end());
      ew::kv_write(HostLaunch{}, both.data(), 6, 3, heads, hd, store, InRound{a, hg.at(5)}, vg.data(), 3);
      const std::string what = name(t, "kv_write, cache ") + std::to_string(store);
      for (int s = 0; s < 3; ++s) {
        EXPECT_SAME_BITS(kc_g[size_t(s)], kc_w[size_t(s)], what + ": K cache " + std::to_string(s));
        EXPECT_SAME_BITS(vc_g[size_t(s)], vc_w[size_t(s)], what + ": V cache " + std::to_string(s));
      }
      EXPECT_SAME_BITS(vg, vw, what + ": v written back rounded");
      expect_same_hits(hg, hw, what);
      // V's rows not written back (InRound::write_back): the same caches, v as it was.
      auto vn = v0;
      std::vector<std::vector<float>> kc_n(3, std::vector<float>(cache_n, 0.0f)), vc_n = kc_n;
      auto both_n = descs(kc_n, k);
      const auto dvn = descs(vc_n, vn);
      both_n.insert(both_n.end(), dvn.begin(), dvn.end());
      Hits hn;
      ew::kv_write(HostLaunch{}, both_n.data(), 6, 3, heads, hd, store, InRound{a, hn.at(5), false}, vn.data(), 3);
      for (int s = 0; s < 3; ++s)
        EXPECT_SAME_BITS(vc_n[size_t(s)], vc_w[size_t(s)], what + ", no write-back: V cache " + std::to_string(s));
      EXPECT_SAME_BITS(vn, v0, what + ", no write-back: v as it was");
      expect_same_hits(hn, hw, what + ", no write-back");
    }
}

// The rotations of q and k with the cache writes of K and V in one launch (RopeKv), each pending
// projection rounded as it is read, against: round q, rotate q, round k, rotate k, write K, round
// v, write V. Without V (its write launched apart), with V's rows read as they are, with no
// input written back (InRound::write_back: q and k hold the rotation all the same, v what it held),
// and, besides, with neither rotation stored (RopeJob::store: q and k hold what they held, the
// caches and reports the same, and q's rotated rows are in its 16-bit copy, RopeJob::copy, as the
// attention's AttnDesc::q16 reads them).
TEST(CudaFusionOnCpu, RopeOfQAndKWithTheCacheWritesOfKAndVInOneLaunch) {
  std::mt19937 rng(11);
  const int hq = 4, hk = 2, hd = 16, capacity = 12, half = hd / 2, width = hk * hd, positions = capacity;
  const int rows[] = {3, 1, 2}, starts[] = {0, 7, 4};  // three sequences, rows concatenated
  const int M = 6;
  const std::vector<int> pos = {0, 1, 2, 7, 4, 5};
  std::vector<float> cs(size_t(positions) * half), sn(cs.size());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t i = 0; i < cs.size(); ++i) cs[i] = u(rng), sn[i] = u(rng);
  const size_t cache_n = size_t(hk) * capacity * hd;
  for (DType t : kAllTypes)
    for (int store : {cuda::kF32, cuda::kF16, cuda::kBF16})
      for (int mode = 0; mode < 5; ++mode) {  // V in the launch with its pending round; apart; as it is;
        const int a = cuda::store_of(t);      // as mode 0, nothing written back; as 3, k not stored
        const bool back = mode < 3, k_stored = mode != 4;
        const auto q0 = gemm_sums(size_t(M) * hq * hd, rng, true), k0 = gemm_sums(size_t(M) * width, rng, true);
        const auto v0 = mode == 2 ? test::normals(size_t(M) * width, rng, t) : gemm_sums(size_t(M) * width, rng, true);
        auto qw = q0, kw = k0, vw = v0, qg = q0, kg = k0, vg = v0;
        using Caches = std::vector<std::vector<float>>;
        Caches kc_w(3, std::vector<float>(cache_n, 0.0f)), vc_w = kc_w, kc_g = kc_w, vc_g = kc_w;
        auto descs = [&](Caches& cache, const std::vector<float>& x) {
          std::vector<KvWriteDesc> d;
          int row0 = 0;
          for (int s = 0; s < 3; ++s) {
            d.push_back(
                KvWriteDesc{cache[size_t(s)].data(), x.data() + size_t(row0) * width, rows[s], starts[s], capacity});
            row0 += rows[s];
          }
          return d;
        };
        Hits hw, hg;
        round_all(qw.data(), qw.size(), a, hw.at(1));
        rope1(qw.data(), M, hq, hd, pos, cs, sn, a, false, hw.at(2), InRound{});
        round_all(kw.data(), kw.size(), a, hw.at(3));
        rope1(kw.data(), M, hk, hd, pos, cs, sn, a, false, hw.at(4), InRound{});
        const auto dk = descs(kc_w, kw);
        ew::kv_write(HostLaunch{}, dk.data(), 3, 3, hk, hd, store, InRound{}, nullptr, 0);
        if (mode != 2) round_all(vw.data(), vw.size(), a, hw.at(5));
        const auto dv = descs(vc_w, vw);
        ew::kv_write(HostLaunch{}, dv.data(), 3, 3, hk, hd, store, InRound{}, nullptr, 0);

        auto both = descs(kc_g, kg);
        const auto dvg = descs(vc_g, vg);
        both.insert(both.end(), dvg.begin(), dvg.end());
        const int q16_store = t == DType::BF16 ? cuda::kBF16 : cuda::kF16;
        std::vector<float> q16(q0.size(), 0.0f);
        const OutCopy q_copy = k_stored ? OutCopy{} : OutCopy{q16.data(), q16_store};
        const cuda::RopeJob jobs[2] = {{qg.data(), hq, hg.at(2), InRound{a, hg.at(1), back}, k_stored, q_copy},
                                       {kg.data(), hk, hg.at(4), InRound{a, hg.at(3), back}, k_stored}};
        const InRound v_in = mode == 0 || mode >= 3 ? InRound{a, hg.at(5), back} : InRound{};
        const cuda::RopeKv kv{both.data(), 3, store, mode != 1, v_in, vg.data()};
        ew::rope(HostLaunch{}, jobs, 2, M, hd, hd, pos.data(), cs.data(), sn.data(), a, false, false, kv);
        if (mode == 1) ew::kv_write(HostLaunch{}, dvg.data(), 3, 3, hk, hd, store, InRound{a, hg.at(5)}, vg.data(), 0);

        const std::string what =
            name(t, "rope + kv_write, cache ") + std::to_string(store) + " mode " + std::to_string(mode);
        EXPECT_SAME_BITS(qg, k_stored ? qw : q0, what + (k_stored ? ": q" : ": q as it was"));
        if (!k_stored) EXPECT_SAME_BITS(q16, stored_copy(qw, q16_store), what + ": q's 16-bit copy");
        EXPECT_SAME_BITS(kg, k_stored ? kw : k0, what + (k_stored ? ": k" : ": k as it was"));
        EXPECT_SAME_BITS(vg, back ? vw : v0, what + (back ? ": v" : ": v as it was"));
        for (int s = 0; s < 3; ++s) {
          EXPECT_SAME_BITS(kc_g[size_t(s)], kc_w[size_t(s)], what + ": K cache " + std::to_string(s));
          EXPECT_SAME_BITS(vc_g[size_t(s)], vc_w[size_t(s)], what + ": V cache " + std::to_string(s));
        }
        expect_same_hits(hg, hw, what);
        EXPECT_NE(hw.slot[3], ~0ull) << what << ": the inputs must hold a NaN/Inf";
      }
  // A rotation left unstored goes nowhere unless it is the cache write's: refused.
  std::vector<float> x(size_t(M) * width, 0.0f);
  const cuda::RopeJob unstored{x.data(), hk, {}, {}, false};
  EXPECT_THROW(ew::rope(HostLaunch{}, &unstored, 1, M, hd, hd, pos.data(), cs.data(), sn.data(), cuda::kF32, false, false),
               std::invalid_argument);
}

// RoPE's units laid out several a block, in one round or several with two pairs a thread
// (RopeLayout), against a block per (row, head) and a pair a thread: every buffer, both caches and
// every NaN/Inf report the same, for head sizes whose pairs fill their lanes or leave some idle
// (96: 48 pairs on 64 lanes), both pair layouts, pending inputs, V in the launch or not, and
// launches whose last block is partly empty.
TEST(CudaFusionOnCpu, RopeBlocksOfSeveralUnitsAreABlockPerUnitsBits) {
  std::mt19937 rng(12);
  const int hq = 4, hk = 2, capacity = 12, positions = capacity;
  const int rows[] = {3, 1, 3}, starts[] = {0, 7, 4};
  const int M = 7;
  const std::vector<int> pos = {0, 1, 2, 7, 4, 5, 6};
  for (int hd : {16, 64, 96, 128})
    for (DType t : kAllTypes)
      for (bool adjacent : {false, true})
        for (int mode = 0; mode < 3; ++mode) {  // no cache write; K and V (V pending); K and V as they are
          const int a = cuda::store_of(t), half = hd / 2, width = hk * hd;
          std::vector<float> cs(size_t(positions) * half), sn(cs.size());
          std::uniform_real_distribution<float> u(-1.0f, 1.0f);
          for (size_t i = 0; i < cs.size(); ++i) cs[i] = u(rng), sn[i] = u(rng);
          const auto q0 = gemm_sums(size_t(M) * hq * hd, rng, true), k0 = gemm_sums(size_t(M) * width, rng, true);
          const auto v0 = gemm_sums(size_t(M) * width, rng, mode == 1);
          struct Run {
            std::vector<float> q, k, v;
            std::vector<std::vector<float>> kc, vc;
            Hits hits;
          };
          auto run = [&](ew::RopeLayout layout) {
            Run r{q0, k0, v0, {}, {}, {}};
            const size_t cache_n = size_t(hk) * capacity * hd;
            r.kc.assign(3, std::vector<float>(cache_n, 0.0f));
            r.vc = r.kc;
            std::vector<KvWriteDesc> d;  // K's three slices, then V's
            for (auto [cache, x] : {std::pair{&r.kc, r.k.data()}, std::pair{&r.vc, r.v.data()}})
              for (int sq = 0, row0 = 0; sq < 3; row0 += rows[sq++])
                d.push_back(
                    KvWriteDesc{(*cache)[size_t(sq)].data(), x + size_t(row0) * width, rows[sq], starts[sq], capacity});
            const cuda::RopeJob jobs[2] = {{r.q.data(), hq, r.hits.at(2), InRound{a, r.hits.at(1)}},
                                           {r.k.data(), hk, r.hits.at(4), InRound{a, r.hits.at(3)}}};
            const cuda::RopeKv kv =
                mode == 0
                    ? cuda::RopeKv{}
                    : cuda::RopeKv{d.data(),  3, cuda::kF16, true, mode == 1 ? InRound{a, r.hits.at(5)} : InRound{},
                                   r.v.data()};
            ew::rope(HostLaunch{}, jobs, 2, M, hd, hd, pos.data(), cs.data(), sn.data(), a, adjacent, false, kv, layout);
            return r;
          };
          const Run want = run(ew::RopeLayout::OneUnit);
          EXPECT_NE(want.hits.slot[1], ~0ull) << "the inputs must hold a NaN/Inf";
          for (auto layout : {ew::RopeLayout::Auto, ew::RopeLayout::Rounds}) {
            const Run got = run(layout);
            const std::string what = name(t, "rope") + " hd " + std::to_string(hd) +
                                     (adjacent ? " adjacent" : " halves") + " mode " + std::to_string(mode) +
                                     (layout == ew::RopeLayout::Auto ? " (auto)" : " (rounds, pairs)");
            EXPECT_SAME_BITS(got.q, want.q, what + ": q");
            EXPECT_SAME_BITS(got.k, want.k, what + ": k");
            EXPECT_SAME_BITS(got.v, want.v, what + ": v");
            for (int sq = 0; sq < 3; ++sq) {
              EXPECT_SAME_BITS(got.kc[size_t(sq)], want.kc[size_t(sq)], what + ": K cache " + std::to_string(sq));
              EXPECT_SAME_BITS(got.vc[size_t(sq)], want.vc[size_t(sq)], what + ": V cache " + std::to_string(sq));
            }
            expect_same_hits(got.hits, want.hits, what);
          }
          if (mode != 0) {  // the caches were written at all
            bool any = false;
            for (float x : want.kc[0]) any |= x != 0.0f;
            EXPECT_TRUE(any) << "hd " << hd << ": K's cache untouched";
          }
        }
}

// cuda_fusion.cuh's bookkeeping, with launches that run at once on the host.
std::vector<std::string> g_log;
void host_rounds(const RoundJob* jobs, int n) {
  std::string s = "round";
  for (int i = 0; i < n; ++i) {
    s.append(" ").append(std::to_string(jobs[i].chk.slot));
    if (jobs[i].copy.dst != nullptr) s.append("+copy");
  }
  g_log.push_back(s);
  ew::round_checks(HostLaunch{}, jobs, n);
}

// A launch large enough for Auto's several rounds and, at head_dim 128, two pairs a thread on
// whole warps (the shape the GPU runs on a cache-OFF step), against a block a unit: the same bits.
TEST(CudaFusionOnCpu, RopeOfALargeLaunchIsABlockPerUnitsBits) {
  std::mt19937 rng(13);
  const int hq = 4, hk = 2, hd = 128, half = hd / 2, width = hk * hd;
  const int M = 4300;  // (4 + 2 + 2) x 4300 units: past 64 x 132 blocks of 4 units
  std::vector<int> pos(M);
  for (int m = 0; m < M; ++m) pos[size_t(m)] = m % 97;
  std::vector<float> cs(size_t(97) * half), sn(cs.size());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t i = 0; i < cs.size(); ++i) cs[i] = u(rng), sn[i] = u(rng);
  const int a = cuda::store_of(DType::F16);
  const auto q0 = gemm_sums(size_t(M) * hq * hd, rng, true), k0 = gemm_sums(size_t(M) * width, rng, true);
  const auto v0 = gemm_sums(size_t(M) * width, rng, true);
  struct Run {
    std::vector<float> q, k, v, kc, vc;
    Hits hits;
  };
  auto run = [&](ew::RopeLayout layout) {
    Run r{q0, k0, v0, std::vector<float>(size_t(hk) * M * hd, 0.0f), std::vector<float>(size_t(hk) * M * hd, 0.0f), {}};
    const KvWriteDesc d[2] = {{r.kc.data(), r.k.data(), M, 0, M}, {r.vc.data(), r.v.data(), M, 0, M}};
    const cuda::RopeJob jobs[2] = {{r.q.data(), hq, r.hits.at(2), InRound{a, r.hits.at(1), false}},
                                   {r.k.data(), hk, r.hits.at(4), InRound{a, r.hits.at(3), false}}};
    const cuda::RopeKv kv{d, 1, cuda::kF16, true, InRound{a, r.hits.at(5)}, r.v.data()};
    ew::rope(HostLaunch{}, jobs, 2, M, hd, hd, pos.data(), cs.data(), sn.data(), a, false, false, kv, layout);
    return r;
  };
  const Run want = run(ew::RopeLayout::OneUnit), got = run(ew::RopeLayout::Auto);
  EXPECT_SAME_BITS(got.q, want.q, "large rope: q");
  EXPECT_SAME_BITS(got.k, want.k, "large rope: k");
  EXPECT_SAME_BITS(got.v, want.v, "large rope: v");
  EXPECT_SAME_BITS(got.kc, want.kc, "large rope: K cache");
  EXPECT_SAME_BITS(got.vc, want.vc, "large rope: V cache");
  expect_same_hits(got.hits, want.hits, "large rope");
}

TEST(CudaFusionOnCpu, FusionLaunchesEachRoundBeforeItsBufferIsTouched) {
  g_log.clear();
  std::vector<uint64_t> sigs;
  cuda::Fusion f([&](uint64_t sig, std::function<void()> launch) { sigs.push_back(sig), launch(); }, &host_rounds);
  Hits h;
  std::vector<float> q(64, 1.0f / 3.0f), k(64, 1.0f / 3.0f), v(64, 1.0f / 3.0f), o(64, 0.0f);
  const int a = cuda::kF16;
  f.defer_round(q.data(), 64, a, h.at(1));
  f.defer_round(k.data(), 64, a, h.at(2));
  f.defer_round(v.data(), 64, a, h.at(3));
  EXPECT_TRUE(g_log.empty()) << "pending rounds launch late";
  // Taken: only an exact buffer at its act.
  EXPECT_LT(f.take(q.data(), 32, a).act, 0);
  EXPECT_LT(f.take(q.data(), 64, cuda::kBF16).act, 0);
  const InRound tq = f.take(q.data(), 64, a);
  EXPECT_EQ(tq.act, a);
  EXPECT_EQ(tq.chk.slot, 1);
  EXPECT_LT(f.take(q.data(), 64, a).act, 0) << "taken once";
  // Touching part of k launches k's round alone.
  f.settle(k.data() + 10, 1);
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_EQ(g_log[0], "round 2");
  EXPECT_EQ(k[0], round_to(DType::F16, 1.0f / 3.0f));
  EXPECT_EQ(v[0], 1.0f / 3.0f) << "v still pending";
  // A converted() of v: the round writes the copy.
  std::vector<float> copy(64, 0.0f);
  EXPECT_TRUE(f.fuse_copy(v.data(), 64, cuda::kF16, copy.data()));
  EXPECT_EQ(g_log.back(), "round 3+copy");
  EXPECT_FALSE(f.fuse_copy(v.data(), 64, cuda::kF16, copy.data())) << "nothing left to write it";
  // A held operation: its rounding point and its copy join it; a mismatch does not.
  int launched = 0;
  NonFiniteSlot got_chk{};
  OutCopy got_copy{};
  f.hold(o.data(), 64, a, 42, [&](NonFiniteSlot c, OutCopy cp) { ++launched, got_chk = c, got_copy = cp; }, true);
  EXPECT_FALSE(f.fuse_check(o.data(), 64, cuda::kBF16, h.at(4)));
  EXPECT_FALSE(f.fuse_check(o.data(), 32, a, h.at(4)));
  EXPECT_TRUE(f.fuse_check(o.data(), 64, a, h.at(4)));
  EXPECT_FALSE(f.fuse_check(o.data(), 64, a, h.at(5))) << "one rounding point";
  EXPECT_EQ(launched, 0);
  EXPECT_TRUE(f.fuse_copy(o.data(), 64, cuda::kBF16, copy.data()));
  EXPECT_EQ(launched, 1);
  EXPECT_EQ(got_chk.slot, 4);
  EXPECT_EQ(got_copy.dst, copy.data());
  // One by one (op timing): everything at once.
  f.set_one_by_one(true);
  f.defer_round(o.data(), 64, a, h.at(6));
  EXPECT_EQ(g_log.back(), "round 6");
  f.hold(o.data(), 64, a, 43, [&](NonFiniteSlot, OutCopy) { ++launched; }, true);
  EXPECT_EQ(launched, 2);
  // flush: what is held and pending, all of it.
  f.set_one_by_one(false);
  f.defer_round(q.data(), 64, a, h.at(7));
  f.defer_round(k.data(), 64, a, h.at(8));
  f.hold_other(1, [&] { ++launched; });
  EXPECT_TRUE(f.holding_other(1));
  f.flush();
  EXPECT_EQ(launched, 3);
  EXPECT_EQ(g_log.back(), "round 7 8");
  // A held launch taken over (the rotation of q, joined by k's): only with its check, never launched.
  NonFiniteSlot taken{};
  f.hold(o.data(), 64, a, 45, [&](NonFiniteSlot, OutCopy) { ++launched; }, false, cuda::kRopeHeld);
  EXPECT_FALSE(f.take_checked(cuda::kRopeHeld, &taken)) << "no check attached yet";
  EXPECT_TRUE(f.fuse_check(o.data(), 64, a, h.at(9)));
  EXPECT_FALSE(f.take_checked(cuda::kKvHeld, &taken)) << "another tag";
  EXPECT_TRUE(f.take_checked(cuda::kRopeHeld, &taken));
  EXPECT_EQ(taken.slot, 9);
  f.flush();
  EXPECT_EQ(launched, 3) << "taken over: the caller launches it";
  // Signatures tell a checked or copying launch from a plain one (graphs must not mix them).
  const size_t n0 = sigs.size();
  f.hold(o.data(), 64, a, 44, [](NonFiniteSlot, OutCopy) {}, true);
  f.release();
  f.hold(o.data(), 64, a, 44, [](NonFiniteSlot, OutCopy) {}, true);
  f.fuse_check(o.data(), 64, a, h.at(4));
  f.release();
  ASSERT_EQ(sigs.size(), n0 + 2);
  EXPECT_NE(sigs[n0], sigs[n0 + 1]);
}

}  // namespace
}  // namespace kvp
