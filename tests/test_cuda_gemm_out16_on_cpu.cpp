// The GEMM outputs in 16 bits (Kernels::rounded_output, $KVPARITY_CUDA_GEMM_OUT16): cuBLAS stores
// a projection in the pass's 16-bit dtype, rounded by its epilogue, and the kernel that reads the
// projection next takes its values from there (InRound::src, RoundJob::src) instead of rounding the
// fp32 accumulators. The kernels' own source run on the CPU (src/cuda/simt_host.h): for the same
// accumulators, every reader of a pending rounding point (the rounding check itself, with and
// without its 16-bit copy, the rotation of q and k with the cache writes of K and V, the residual
// add alone and inside RMSNorm, the gated activation, the cache write) must leave the same bits in
// every output and the same NaN/Inf report reading the 16-bit source as rounding the fp32 values,
// while the fp32 buffer, poisoned beforehand, holds the rounded values where it is written back and
// the poison where not. Then cuda_fusion.cuh's bookkeeping of such a source.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
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
#include "cuda_on_cpu.h"

namespace kvp {
namespace {

namespace ew = cuda::elementwise;
using cuda::InRound;
using cuda::KvWriteDesc;
using cuda::NonFiniteSlot;
using cuda::OutCopy;
using cuda::RoundJob;
using test::expect_same_hits;
using test::Hits;
using test::HostLaunch;

constexpr DType kSixteenBit[] = {DType::F16, DType::BF16};

// A GEMM's fp32 accumulators: not representable in 16 bits, with values that overflow fp16 (and
// bf16), NaN, -0 and an fp16 subnormal.
std::vector<float> accumulators(size_t n, std::mt19937& rng, float scale = 1.0f) {
  return test::gemm_sums(n, rng, true, scale);
}

// The accumulators as the GEMM's epilogue stores them in the 16-bit type of a: RNE.
std::vector<uint16_t> sixteen_bit(const std::vector<float>& acc, int a) {
  std::vector<uint16_t> out(acc.size());
  ew::to_storage(HostLaunch{}, acc.data(), acc.size(), out.data(), a);
  return out;
}

// What the fp32 buffer holds where the 16-bit source stands in for it: nothing a reader may use.
std::vector<float> poisoned(size_t n) { return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()); }

// The rounded accumulators, as a rounding check leaves them.
std::vector<float> rounded(std::vector<float> acc, int a) {
  const RoundJob j{acc.data(), acc.size(), a, NonFiniteSlot{}, OutCopy{}};
  ew::round_checks(HostLaunch{}, &j, 1);
  return acc;
}

std::string name(DType t, const std::string& what) { return std::string(dtype_name(t)) + " " + what; }

TEST(CudaGemmOut16OnCpu, RoundCheckWidensTheSourceWithItsCopyAndReport) {
  std::mt19937 rng(21);
  for (DType t : kSixteenBit) {
    const int a = cuda::store_of(t);
    // The float4 path (both aligned), and the one-at-a-time one (x or the source off by a value).
    for (int shift : {0, 1, 2})
      for (int copy : {0, 1, 2}) {  // no copy; a copy; the copy all that is read (OutCopy::only)
        const size_t n = 1003;
        const auto acc = accumulators(n + 1, rng);
        const auto src = sixteen_bit(acc, a);
        const size_t xo = shift == 1 ? 1 : 0, so = shift == 2 ? 1 : 0;
        auto want = acc;
        std::vector<float> copy_w(n + 1, 0.0f), copy_g(n + 1, 0.0f);
        Hits hw, hg;
        const OutCopy cw = copy == 0 ? OutCopy{} : OutCopy{copy_w.data(), a, copy == 2};
        const OutCopy cg = copy == 0 ? OutCopy{} : OutCopy{copy_g.data(), a, copy == 2};
        const RoundJob jw{want.data() + so, n, a, hw.at(1), cw};
        ew::round_checks(HostLaunch{}, &jw, 1);
        auto got = poisoned(n + 1);
        const auto before = got;
        const RoundJob jg{got.data() + xo, n, a, hg.at(1), cg, src.data() + so};
        ew::round_checks(HostLaunch{}, &jg, 1);
        const std::string what =
            name(t, "round check, shift ") + std::to_string(shift) + " copy " + std::to_string(copy);
        const std::vector<float> w(want.begin() + long(so), want.begin() + long(so + n)),
            g(got.begin() + long(xo), got.begin() + long(xo + n));
        EXPECT_SAME_BITS(g, copy == 2 ? std::vector<float>(before.begin(), before.begin() + long(n)) : w,
                         what + (copy == 2 ? ": x untouched" : ": x"));
        EXPECT_SAME_BITS(copy_g, copy_w, what + ": the copy");
        expect_same_hits(hg, hw, what);
        EXPECT_NE(hw.slot[1], ~0ull) << what << ": the accumulators must hold a NaN/Inf";
      }
  }
}

// One reader run twice, on the accumulators with their pending round and on a poisoned buffer with
// the 16-bit source: the caller compares what it wrote.
struct Pending {
  std::vector<float> acc;
  std::vector<uint16_t> src;
  int a;
  // The buffer the reader gets, and its InRound, the source's or not.
  std::vector<float> buffer(bool from_src) const { return from_src ? poisoned(acc.size()) : acc; }
  InRound in(bool from_src, NonFiniteSlot chk, bool back) const {
    return InRound{a, chk, back, from_src ? static_cast<const void*>(src.data()) : nullptr};
  }
  // What the buffer holds after a reader that writes it back (or not).
  void expect_buffer(const std::vector<float>& got, bool from_src, bool back, const std::string& what) const {
    if (back)
      EXPECT_SAME_BITS(got, rounded(acc, a), what + ": written back rounded");
    else
      EXPECT_SAME_BITS(got, buffer(from_src), what + ": as it was");
  }
};

Pending pending(size_t n, std::mt19937& rng, int a, float scale = 1.0f) {
  Pending p{accumulators(n, rng, scale), {}, a};
  p.src = sixteen_bit(p.acc, a);
  return p;
}

TEST(CudaGemmOut16OnCpu, AddAndRmsnormReadTheSourceAsTheirRounding) {
  std::mt19937 rng(22);
  const int M = 3, dim = 2500;
  for (DType t : kSixteenBit)
    for (bool back : {true, false}) {
      const int a = cuda::store_of(t);
      const size_t n = size_t(M) * dim;
      const auto x0 = test::normals(n, rng, t, 8.0f), w = test::normals(size_t(dim), rng, t);
      const Pending y = pending(n, rng, a, 8.0f);
      std::vector<float> xs[2], ys[2], outs[2];
      Hits h[2], hn[2];
      for (bool from_src : {false, true}) {
        auto& x = xs[from_src];
        x = x0;
        ys[from_src] = y.buffer(from_src);
        ew::add(HostLaunch{}, x.data(), ys[from_src].data(), n, a, h[from_src].at(2),
                y.in(from_src, h[from_src].at(1), back));
        const std::string what = name(t, from_src ? "add from the source" : "add") + (back ? "" : ", no write-back");
        y.expect_buffer(ys[from_src], from_src, back, what);
        // The add inside RMSNorm.
        auto xn = x0, yn = y.buffer(from_src);
        outs[from_src].assign(n, 0.0f);
        ew::rmsnorm(HostLaunch{}, xn.data(), M, dim, w.data(), 1e-5f, a, false, outs[from_src].data(),
                    hn[from_src].at(3), OutCopy{},
                    cuda::AddIn{yn.data(), a, hn[from_src].at(2), y.in(from_src, hn[from_src].at(1), back)});
        EXPECT_SAME_BITS(xn, x, what + " in rmsnorm: residual");
        y.expect_buffer(yn, from_src, back, what + " in rmsnorm");
      }
      const std::string what = name(t, back ? "add" : "add, no write-back");
      EXPECT_SAME_BITS(xs[1], xs[0], what + ": residual");
      EXPECT_SAME_BITS(outs[1], outs[0], what + " in rmsnorm: normalised");
      expect_same_hits(h[1], h[0], what);
      expect_same_hits(hn[1], hn[0], what + " in rmsnorm");
      EXPECT_NE(h[0].slot[1], ~0ull) << what << ": the accumulators must hold a NaN/Inf";
    }
  // In place (x + x): the reader reads back what it wrote.
  for (DType t : kSixteenBit) {
    const int a = cuda::store_of(t);
    const Pending z = pending(777, rng, a);
    auto zw = z.buffer(false), zg = z.buffer(true);
    Hits hw, hg;
    ew::add(HostLaunch{}, zw.data(), zw.data(), zw.size(), a, hw.at(1), z.in(false, hw.at(0), true));
    ew::add(HostLaunch{}, zg.data(), zg.data(), zg.size(), a, hg.at(1), z.in(true, hg.at(0), true));
    EXPECT_SAME_BITS(zg, zw, name(t, "add in place from the source"));
    expect_same_hits(hg, hw, name(t, "add in place from the source"));
  }
}

TEST(CudaGemmOut16OnCpu, GatedActivationReadsGateAndUpFromTheirSources) {
  std::mt19937 rng(23);
  for (DType t : kSixteenBit)
    for (bool gelu : {false, true})
      for (bool back : {true, false}) {
        const int a = cuda::store_of(t);
        const size_t n = 777;
        const Pending g = pending(n, rng, a, 3.0f), u = pending(n, rng, a, 3.0f);
        std::vector<float> gates[2], copies[2];
        Hits h[2];
        const std::string what = name(t, gelu ? "gelu_tanh_mul" : "silu_mul") + (back ? "" : ", no write-back");
        for (bool from_src : {false, true}) {
          gates[from_src] = g.buffer(from_src);
          auto up = u.buffer(from_src);
          copies[from_src].assign(n, 0.0f);
          ew::gated(HostLaunch{}, gates[from_src].data(), up.data(), n, a, gelu, h[from_src].at(3),
                    g.in(from_src, h[from_src].at(1), back), u.in(from_src, h[from_src].at(2), back),
                    OutCopy{copies[from_src].data(), a});
          u.expect_buffer(up, from_src, back, what + (from_src ? " from the sources: up" : ": up"));
        }
        EXPECT_SAME_BITS(gates[1], gates[0], what + ": gate");
        EXPECT_SAME_BITS(copies[1], copies[0], what + ": the 16-bit copy");
        expect_same_hits(h[1], h[0], what);
      }
}

TEST(CudaGemmOut16OnCpu, CacheWriteOfVReadsItsSource) {
  std::mt19937 rng(24);
  const int heads = 2, hd = 16, capacity = 12, width = heads * hd;
  const int rows[] = {3, 1, 2}, starts[] = {0, 7, 4};
  const int M = 6;
  const size_t cache_n = size_t(heads) * capacity * hd;
  for (DType t : kSixteenBit)
    for (int store : {cuda::kF32, cuda::kF16, cuda::kBF16})
      for (bool back : {true, false}) {
        const int a = cuda::store_of(t);
        const Pending v = pending(size_t(M) * width, rng, a);
        std::vector<std::vector<float>> caches[2];
        Hits h[2];
        const std::string what =
            name(t, "kv_write of V, cache ") + std::to_string(store) + (back ? "" : ", no write-back");
        for (bool from_src : {false, true}) {
          auto rows_v = v.buffer(from_src);
          caches[from_src].assign(3, std::vector<float>(cache_n, 0.0f));
          std::vector<KvWriteDesc> d;
          for (int s = 0, row0 = 0; s < 3; row0 += rows[s], ++s)
            d.push_back(KvWriteDesc{caches[from_src][size_t(s)].data(), rows_v.data() + size_t(row0) * width, rows[s],
                                    starts[s], capacity});
          ew::kv_write(HostLaunch{}, d.data(), 3, 3, heads, hd, store, v.in(from_src, h[from_src].at(5), back),
                       rows_v.data(), 0);
          v.expect_buffer(rows_v, from_src, back, what + (from_src ? " from the source" : ""));
        }
        for (int s = 0; s < 3; ++s)
          EXPECT_SAME_BITS(caches[1][size_t(s)], caches[0][size_t(s)], what + ": cache " + std::to_string(s));
        expect_same_hits(h[1], h[0], what);
      }
}

// The rotations of q and k, each from its source, with K's cache write and V's from its source, in
// one launch; and q's rotated rows to its 16-bit copy alone (RopeJob::store, copy).
TEST(CudaGemmOut16OnCpu, RotationWithTheCacheWritesReadsQKAndVFromTheirSources) {
  std::mt19937 rng(25);
  const int hq = 4, hk = 2, hd = 16, capacity = 12, half = hd / 2, width = hk * hd;
  const int rows[] = {3, 1, 2}, starts[] = {0, 7, 4};
  const int M = 6;
  const std::vector<int> pos = {0, 1, 2, 7, 4, 5};
  std::vector<float> cs(size_t(capacity) * half), sn(cs.size());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t i = 0; i < cs.size(); ++i) cs[i] = u(rng), sn[i] = u(rng);
  const size_t cache_n = size_t(hk) * capacity * hd;
  for (DType t : kSixteenBit)
    for (int store : {cuda::kF16, cuda::kBF16})
      for (bool stored : {true, false}) {
        const int a = cuda::store_of(t);
        const Pending q = pending(size_t(M) * hq * hd, rng, a), k = pending(size_t(M) * width, rng, a),
                      v = pending(size_t(M) * width, rng, a);
        struct Out {
          std::vector<float> q, k, v, q16;
          std::vector<std::vector<float>> kc, vc;
          Hits h;
        } out[2];
        for (bool from_src : {false, true}) {
          Out& o = out[from_src];
          o.q = q.buffer(from_src), o.k = k.buffer(from_src), o.v = v.buffer(from_src);
          o.q16.assign(o.q.size(), 0.0f);
          o.kc.assign(3, std::vector<float>(cache_n, 0.0f));
          o.vc = o.kc;
          std::vector<KvWriteDesc> d;
          for (int kv = 0; kv < 2; ++kv)
            for (int s = 0, row0 = 0; s < 3; row0 += rows[s], ++s)
              d.push_back(KvWriteDesc{(kv == 0 ? o.kc : o.vc)[size_t(s)].data(),
                                      (kv == 0 ? o.k : o.v).data() + size_t(row0) * width, rows[s], starts[s],
                                      capacity});
          const OutCopy q_copy = stored ? OutCopy{} : OutCopy{o.q16.data(), store};
          const cuda::RopeJob jobs[2] = {{o.q.data(), hq, o.h.at(2), q.in(from_src, o.h.at(1), false), stored, q_copy},
                                         {o.k.data(), hk, o.h.at(4), k.in(from_src, o.h.at(3), false), stored}};
          const cuda::RopeKv kv{d.data(), 3, store, true, v.in(from_src, o.h.at(5), false), o.v.data()};
          ew::rope(HostLaunch{}, jobs, 2, M, hd, hd, pos.data(), cs.data(), sn.data(), a, false, false, kv);
        }
        const std::string what =
            name(t, "rope + kv_write, cache ") + std::to_string(store) + (stored ? "" : ", unstored");
        if (stored) {
          EXPECT_SAME_BITS(out[1].q, out[0].q, what + ": q");
          EXPECT_SAME_BITS(out[1].k, out[0].k, what + ": k");
        } else {
          EXPECT_SAME_BITS(out[1].q16, out[0].q16, what + ": q's 16-bit copy");
        }
        EXPECT_SAME_BITS(out[1].v, poisoned(out[1].v.size()), what + ": v not written back");
        for (int s = 0; s < 3; ++s) {
          EXPECT_SAME_BITS(out[1].kc[size_t(s)], out[0].kc[size_t(s)], what + ": K cache " + std::to_string(s));
          EXPECT_SAME_BITS(out[1].vc[size_t(s)], out[0].vc[size_t(s)], what + ": V cache " + std::to_string(s));
        }
        expect_same_hits(out[1].h, out[0].h, what);
        EXPECT_NE(out[0].h.slot[3], ~0ull) << what << ": the accumulators must hold a NaN/Inf";
      }
  // An fp32 rotation has no 16-bit source to read: refused.
  std::vector<float> x(size_t(M) * width, 0.0f);
  std::vector<uint16_t> src(x.size(), 0);
  const cuda::RopeJob from16{x.data(), hk, {}, InRound{cuda::kF32, {}, true, src.data()}};
  EXPECT_THROW(ew::rope(HostLaunch{}, &from16, 1, M, hd, hd, pos.data(), cs.data(), sn.data(), cuda::kF32, false, false),
               std::invalid_argument);
}

// cuda_fusion.cuh: a buffer pending in a 16-bit source.
std::vector<RoundJob> g_jobs;
void host_rounds(const RoundJob* jobs, int n) {
  for (int i = 0; i < n; ++i) g_jobs.push_back(jobs[i]);
  ew::round_checks(HostLaunch{}, jobs, n);
}

TEST(CudaGemmOut16OnCpu, FusionKeepsABufferPendingInItsSourceUntilItIsRead) {
  g_jobs.clear();
  std::vector<uint64_t> sigs;
  cuda::Fusion f([&](uint64_t sig, std::function<void()> launch) { sigs.push_back(sig), launch(); }, &host_rounds);
  const int a = cuda::kF16;
  std::mt19937 rng(26);
  const Pending q = pending(64, rng, a), k = pending(64, rng, a);
  auto qb = q.buffer(true), kb = k.buffer(true);
  Hits h;
  f.defer_source(qb.data(), 64, a, q.src.data());
  f.defer_source(kb.data(), 64, a, k.src.data());
  EXPECT_TRUE(g_jobs.empty()) << "pending from the GEMM on";
  // The rounding point attaches its check: only to its exact buffer at its dtype, once.
  EXPECT_FALSE(f.check_source(qb.data(), 32, a, h.at(1)));
  EXPECT_FALSE(f.check_source(qb.data(), 64, cuda::kBF16, h.at(1)));
  EXPECT_TRUE(f.check_source(qb.data(), 64, a, h.at(1)));
  EXPECT_FALSE(f.check_source(qb.data(), 64, a, h.at(2))) << "one rounding point";
  EXPECT_TRUE(f.source_over(q.src.data() + 10, 2));
  EXPECT_FALSE(f.source_over(qb.data(), 64 * sizeof(float))) << "x is not a source";
  // Taken by its reader: the source and the check go with it.
  const InRound tq = f.take(qb.data(), 64, a);
  EXPECT_EQ(tq.src, q.src.data());
  EXPECT_EQ(tq.chk.slot, 1);
  EXPECT_FALSE(f.source_over(q.src.data(), 128)) << "taken: q's source is free";
  // A GEMM about to write over k's source launches its pending round first: k widened, unchecked.
  f.settle_source(k.src.data() + 63, 2);
  ASSERT_EQ(g_jobs.size(), 1u);
  EXPECT_EQ(g_jobs[0].src, k.src.data());
  EXPECT_EQ(g_jobs[0].chk.hits, nullptr);
  EXPECT_SAME_BITS(kb, rounded(k.acc, a), "k widened");
  // A converted() of a pending source: its round writes the copy.
  auto vb = poisoned(64);
  const Pending v = pending(64, rng, a);
  f.defer_source(vb.data(), 64, a, v.src.data());
  std::vector<uint16_t> copy(64, 0);
  EXPECT_TRUE(f.fuse_copy(vb.data(), 64, a, copy.data()));
  EXPECT_EQ(copy, v.src) << "the copy of a 16-bit output is its source";
  EXPECT_SAME_BITS(vb, rounded(v.acc, a), "v widened");
  // One by one (op timing): widened at once, the rounding point then a plain one.
  f.set_one_by_one(true);
  auto wb = poisoned(64);
  f.defer_source(wb.data(), 64, a, v.src.data());
  EXPECT_SAME_BITS(wb, rounded(v.acc, a), "widened at once");
  EXPECT_FALSE(f.check_source(wb.data(), 64, a, h.at(3)));
  f.set_one_by_one(false);
  // A graph must not mix a widening launch with a rounding one of the same buffer.
  const size_t n0 = sigs.size();
  f.defer_source(wb.data(), 64, a, v.src.data());
  f.settle_all();
  f.defer_round(wb.data(), 64, a, NonFiniteSlot{});
  f.settle_all();
  ASSERT_EQ(sigs.size(), n0 + 2);
  EXPECT_NE(sigs[n0], sigs[n0 + 1]);
}

}  // namespace
}  // namespace kvp
