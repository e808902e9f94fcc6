// GPT-OSS's attention sinks in every CUDA attention kernel, their own source run on the CPU
// (src/cuda/simt_host.h): each kernel's softmax state starts at the head's sink
// (cuda_attention_sinks.cuh), and the kernels that merge partial states count it once.
//  - against a double-precision softmax with the sink (the sink's share dropped), on random data
//    whose values average near 1, so that the sink's share moves the output well past the
//    tolerance, and on "flat" data (K = 0, V = 1), where each output is n / (n + e^sink) for n
//    keys: a kernel that ignores the sink gives 1, one that counts it once a split or chunk
//    gives n / (n + c e^sink), each far from the tolerance at the positions tried;
//  - against the CPU kernels of the same policy: standard close, portable bit for bit, and
//    invariant's guarantee kept: a row's bits the same alone (a decode step), in a chunk, in the
//    whole prefill or beside other slices;
//  - a sink far below every score (-1e30) changes no bit of any kernel's output.
// The CUDA suite (tests/cuda/test_cuda_gpt_oss.cpp) runs them on a GPU inside a GPT-OSS model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
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
#include "cuda/cuda_attention_prefill_kernel.cuh"
#include "cuda/cuda_attention_split_kernel.cuh"
#include "cuda/cuda_portable_attention_kernel.cuh"
#include "cuda_on_cpu.h"

namespace kvp {
namespace {

using test::AttnCase;
using test::HostLaunch;

// The heads' sinks (head h takes value h % 4): one that takes most of the mass, one below the
// scores, one above them, one near them.
constexpr float kSinkValues[4] = {5.0f, -2.0f, 3.5f, 0.5f};

std::vector<uint8_t> sink_stored(DType t, const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * dtype_size(t));
  from_f32(t, v.data(), b.data(), v.size());
  return b;
}

// One slice (rows start_pos .. start_pos + rows - 1 over its cache, NaN past them) and its heads'
// sinks. Random: q and K normal, V = 1 + N(0, 0.5). Flat: K = 0 and V = 1.
struct SinkSlice {
  AttnCase c;
  bool flat;
  AttentionParams p;
  std::vector<float> kf, vf, q, sinks, got;
  std::vector<uint8_t> k, v;

  SinkSlice(const AttnCase& cs, std::mt19937& rng, bool flat_data)
      : c(cs), flat(flat_data), p(test::attn_params(cs, 5)) {
    const size_t cn = size_t(c.kv_heads) * p.capacity * c.hd;
    kf = flat ? std::vector<float>(cn, 0.0f) : test::normals(cn, rng, c.kv);
    vf = test::normals(cn, rng, DType::F32, 0.5f);
    for (float& x : vf) x = flat ? 1.0f : round_to(c.kv, x + 1.0f);
    for (int h = 0; h < c.kv_heads; ++h)  // slots past the written positions: NaN, never read
      for (int j = c.start_pos + c.rows; j < p.capacity; ++j)
        for (int e = 0; e < c.hd; ++e) {
          const size_t i = (size_t(h) * p.capacity + j) * c.hd + e;
          kf[i] = vf[i] = NAN;
        }
    k = sink_stored(c.kv, kf);
    v = sink_stored(c.kv, vf);
    q = test::normals(size_t(c.rows) * c.heads * c.hd, rng, c.act);
    for (int h = 0; h < c.heads; ++h) sinks.push_back(round_to(c.act, kSinkValues[h % 4]));
    got.assign(q.size(), NAN);
    p.q = q.data();
    p.k_cache = k.data();
    p.v_cache = v.data();
    p.out = got.data();
    p.sinks = sinks.data();
  }
  cuda::AttnDesc desc() { return cuda::attention_desc(p); }
  cuda::AttnShape shape(const float* s) const {
    cuda::AttnShape sh{p.n_heads,        p.n_kv_heads,          p.head_dim,
                       p.score_divisor,  p.score_scale,         p.softcap,
                       p.sliding_window, cuda::store_of(p.act), cuda::store_of(p.kv.dtype())};
    sh.sinks = s;
    return sh;
  }
  // The CPU kernels' rows, with these sinks (null: none).
  std::vector<float> cpu(Kernels& kn, const float* s) const {
    std::vector<float> out(q.size(), NAN);
    AttentionParams a = p;
    a.out = out.data();
    a.sinks = s;
    kn.attention(a);
    return out;
  }
  // In double: each row's softmax over its scores and the sink (null: none), the sink's share
  // dropped, times V. The scores as the kernels compute them before rounding (no soft cap here).
  std::vector<double> reference(const float* s) const {
    const size_t row = size_t(c.heads) * c.hd;
    std::vector<double> out(size_t(c.rows) * row, 0.0);
    for (int r = 0; r < c.rows; ++r)
      for (int h = 0; h < c.heads; ++h) {
        const int pos = c.start_pos + r, kvh = h / (c.heads / c.kv_heads);
        const int first = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
        std::vector<double> sc;
        double mx = s != nullptr ? double(s[h]) : -INFINITY;
        for (int j = first; j <= pos; ++j) {
          double dot = 0.0;
          for (int e = 0; e < c.hd; ++e)
            dot += double(q[r * row + size_t(h) * c.hd + e]) * kf[(size_t(kvh) * p.capacity + j) * c.hd + e];
          sc.push_back(p.score_scale > 0.0f ? dot * p.score_scale : dot / p.score_divisor);
          mx = std::max(mx, sc.back());
        }
        double den = s != nullptr ? std::exp(double(s[h]) - mx) : 0.0;
        for (double& x : sc) den += (x = std::exp(x - mx));
        for (int j = first; j <= pos; ++j)
          for (int e = 0; e < c.hd; ++e)
            out[r * row + size_t(h) * c.hd + e] +=
                sc[size_t(j - first)] / den * vf[(size_t(kvh) * p.capacity + j) * c.hd + e];
      }
    return out;
  }
};

double sink_max_diff(const std::vector<float>& got, const std::vector<double>& want) {
  double d = 0.0;
  for (size_t i = 0; i < got.size(); ++i)
    d = std::max(d, std::isfinite(got[i]) ? std::abs(got[i] - want[i]) : INFINITY);
  return d;
}
double sink_max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0.0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

// How far from the double reference a kernel in `act` may be: the scores and probabilities rounded
// to act; on flat data only the probabilities, each the same.
double sink_tolerance(DType act, bool flat) {
  if (act == DType::F32) return 5e-6;
  if (act == DType::F16) return flat ? 1e-3 : 3e-3;
  return flat ? 2e-3 : 1.5e-2;
}

// Each slice's rows against the reference with its sinks, the sinks moving that reference by more
// than four tolerances (else the check would not tell a kernel that ignores them).
void expect_softmax_with_sink(const SinkSlice& s, const std::vector<float>& got, const std::string& what) {
  const std::vector<double> want = s.reference(s.sinks.data());
  const double tol = sink_tolerance(s.c.act, s.flat);
  EXPECT_GT(sink_max_diff(want, s.reference(nullptr)), 4 * tol) << what << ": the sinks must matter here";
  EXPECT_LE(sink_max_diff(got, want), tol) << what << (s.flat ? " (flat)" : "") << ": not the softmax with the sink";
}

const std::vector<float> kLowSinks(8, -1e30f);

TEST(CudaSinksOnCpu, StandardPrefillStartsAtTheSink) {
  auto cpu = make_kernels(KernelPolicy::Standard, nullptr);
  std::mt19937 rng(41);
  // The CUDA-core kernel: fp32 passes and 16-bit passes whose KV or head_dim the tensor cores do
  // not take; GPT-OSS's score scale in one.
  const AttnCase cases[] = {
      {"fp32 hd64 gqa", DType::F32, DType::F32, 64, 4, 2, 0, 150, 0, false},
      {"fp32 hd40 window 50, cached prefix", DType::F32, DType::F32, 40, 2, 1, 30, 40, 50, false},
      {"fp16 hd64 fp32 kv", DType::F16, DType::F32, 64, 4, 1, 0, 70, 0, false},
  };
  for (const AttnCase& c : cases)
    for (bool flat : {false, true}) {
      SinkSlice s(c, rng, flat);
      if (c.hd == 64 && c.act == DType::F32) s.p.score_divisor = 1.0f, s.p.score_scale = 0.125f;
      const cuda::AttnDesc d = s.desc();
      cuda::attn_prefill::prefill(HostLaunch{}, &d, 1, c.rows, s.shape(s.sinks.data()), {});
      expect_softmax_with_sink(s, s.got, c.name);
      EXPECT_LE(test::max_abs_diff(s.got, s.cpu(*cpu, s.sinks.data())), sink_tolerance(c.act, flat)) << c.name;
      const std::vector<float> with = s.got;
      cuda::attn_prefill::prefill(HostLaunch{}, &d, 1, c.rows, s.shape(nullptr), {});
      const std::vector<float> none = s.got;
      cuda::attn_prefill::prefill(HostLaunch{}, &d, 1, c.rows, s.shape(kLowSinks.data()), {});
      EXPECT_SAME_BITS(s.got, none, std::string(c.name) + ": a sink of -1e30");
    }
}

// The split-KV decode: every split's state starts empty and the last warp's merge takes the sink
// as one more split, so 1, 23 or 47 splits give the same softmax.
TEST(CudaSinksOnCpu, StandardSplitDecodeCountsTheSinkOnce) {
  auto cpu = make_kernels(KernelPolicy::Standard, nullptr);
  std::mt19937 rng(42);
  const AttnCase cases[] = {
      {"fp32 hd64 gqa", DType::F32, DType::F32, 64, 4, 2, 0, 1, 0, false},
      {"fp16 hd128", DType::F16, DType::F16, 128, 2, 2, 0, 1, 0, false},  // the whole-row path
      {"bf16 hd32 gqa window 300", DType::BF16, DType::BF16, 32, 4, 1, 0, 1, 300, false},
  };
  for (const AttnCase& base : cases)
    for (bool flat : {false, true}) {
      std::vector<SinkSlice> slices;
      slices.reserve(3);  // their params point into their own buffers
      for (int pos : {700, 5, 1500}) {
        AttnCase c = base;
        c.start_pos = pos;
        slices.emplace_back(c, rng, flat);
      }
      std::vector<AttentionParams> ps;
      for (const SinkSlice& s : slices) ps.push_back(s.p);
      const int n = int(ps.size());
      const cuda::AttentionPlan plan = cuda::plan_standard_attention(ps.data(), n, 128);
      ASSERT_EQ(plan.steps.size(), size_t(n));
      ASSERT_GT(plan.steps[0].n_splits, 8) << base.name;
      ASSERT_EQ(plan.steps[1].n_splits, 1) << base.name;
      auto run = [&](const float* sk) {
        std::vector<float> parts(size_t(n) * base.heads * plan.splits * (base.hd + 2), NAN);
        std::vector<unsigned> counts(size_t(n) * base.heads, 0u);
        for (SinkSlice& s : slices) std::fill(s.got.begin(), s.got.end(), NAN);
        cuda::attn_decode::decode(HostLaunch{}, plan.steps.data(), n, plan.splits, slices[0].shape(sk), parts.data(),
                                  counts.data(), {});
        EXPECT_EQ(counts, std::vector<unsigned>(counts.size(), 0u)) << base.name;
      };
      run(slices[0].sinks.data());
      for (int i = 0; i < n; ++i) {
        const SinkSlice& s = slices[size_t(i)];
        const std::string what = std::string(base.name) + " at " + std::to_string(s.c.start_pos) + " (" +
                                 std::to_string(plan.steps[size_t(i)].n_splits) + " splits)";
        expect_softmax_with_sink(s, s.got, what);
        EXPECT_LE(test::max_abs_diff(s.got, s.cpu(*cpu, s.sinks.data())), sink_tolerance(base.act, flat)) << what;
      }
      run(nullptr);
      std::vector<std::vector<float>> none;
      for (const SinkSlice& s : slices) none.push_back(s.got);
      run(kLowSinks.data());
      for (int i = 0; i < n; ++i)
        EXPECT_SAME_BITS(slices[size_t(i)].got, none[size_t(i)], std::string(base.name) + ": -1e30");
    }
}

// `standard`'s fp16/bf16 prefill on tensor cores (one running state, Mode::Whole).
TEST(CudaSinksOnCpu, TensorCorePrefillStartsAtTheSink) {
  auto cpu = make_kernels(KernelPolicy::Standard, nullptr);
  std::mt19937 rng(43);
  const AttnCase cases[] = {
      {"fp16 hd64 gqa", DType::F16, DType::F16, 64, 4, 2, 0, 90, 0, false},
      {"bf16 hd32 window 40, cached prefix", DType::BF16, DType::BF16, 32, 2, 1, 20, 80, 40, false},
  };
  for (const AttnCase& c : cases)
    for (bool flat : {false, true}) {
      SinkSlice s(c, rng, flat);
      const cuda::AttnDesc d = s.desc();
      ASSERT_TRUE(cuda::attn_mma::prefill(HostLaunch{}, &d, 1, c.rows, s.shape(s.sinks.data())));
      expect_softmax_with_sink(s, s.got, c.name);
      EXPECT_LE(test::max_abs_diff(s.got, s.cpu(*cpu, s.sinks.data())), sink_tolerance(c.act, flat)) << c.name;
      ASSERT_TRUE(cuda::attn_mma::prefill(HostLaunch{}, &d, 1, c.rows, s.shape(nullptr)));
      const std::vector<float> none = s.got;
      ASSERT_TRUE(cuda::attn_mma::prefill(HostLaunch{}, &d, 1, c.rows, s.shape(kLowSinks.data())));
      EXPECT_SAME_BITS(s.got, none, std::string(c.name) + ": a sink of -1e30");
    }
}

// Slices (first position, rows) of `whole`'s rows (a prefill from position 0) as the invariant
// policy cuts them (cuda_attention_plan.h): one-row slices through the chunked decode, merged by
// the last chunk's block, the others through the chunked tensor-core prefill.
std::vector<std::vector<float>> invariant_rows(const SinkSlice& whole, const float* sk,
                                               const std::vector<std::pair<int, int>>& cuts) {
  const size_t row = size_t(whole.c.heads) * whole.c.hd;
  std::vector<std::vector<float>> outs;
  for (auto [pos, n] : cuts) outs.emplace_back(size_t(n) * row, NAN);
  std::vector<AttentionParams> ps;
  for (size_t i = 0; i < cuts.size(); ++i) {
    AttentionParams a = whole.p;
    a.q = whole.q.data() + cuts[i].first * row;
    a.out = outs[i].data();
    a.start_pos = cuts[i].first;
    a.n_rows = cuts[i].second;
    ps.push_back(a);
  }
  const cuda::AttentionPlan plan = cuda::plan_fixed_order_attention(ps.data(), int(ps.size()), true);
  const cuda::AttnShape sh = whole.shape(sk);
  if (!plan.rows.empty()) {
    EXPECT_TRUE(
        cuda::attn_mma::prefill(HostLaunch{}, plan.rows.data(), int(plan.rows.size()), plan.max_rows, sh, 2, true));
  }
  if (!plan.steps.empty()) {
    const int slots = cuda::attn_mma::split_slots(plan.max_pos);
    std::vector<float> parts(plan.steps.size() * whole.c.heads * slots * (whole.c.hd + 2), NAN);
    std::vector<unsigned> counts(plan.steps.size() * whole.c.heads, 0u);
    EXPECT_TRUE(cuda::attn_mma::split_decode(HostLaunch{}, plan.steps.data(), int(plan.steps.size()), sh, parts.data(),
                                             slots, counts.data()));
    EXPECT_EQ(counts, std::vector<unsigned>(counts.size(), 0u));
  }
  return outs;
}

// `invariant` on tensor cores: the running state starts at the sink, in the chunked prefill and in
// the decode step's merge of its chunks alike, so a row keeps its bits however it is cut.
TEST(CudaSinksOnCpu, InvariantRowKeepsItsBitsWithSinks) {
  auto cpu = make_kernels(KernelPolicy::Invariant, nullptr);
  std::mt19937 rng(44);
  const AttnCase cases[] = {
      {"fp16 hd32 260 rows", DType::F16, DType::F16, 32, 2, 1, 0, 260, 0, false},
      {"bf16 hd64 gqa window 100", DType::BF16, DType::BF16, 64, 4, 2, 0, 140, 100, false},
  };
  for (const AttnCase& c : cases)
    for (bool flat : {false, true}) {
      const SinkSlice whole(c, rng, flat);
      const std::string name = std::string(c.name) + (flat ? " (flat)" : "");
      const std::vector<float> all = invariant_rows(whole, whole.sinks.data(), {{0, c.rows}})[0];
      expect_softmax_with_sink(whole, all, name);
      EXPECT_LE(test::max_abs_diff(all, whole.cpu(*cpu, whole.sinks.data())), sink_tolerance(c.act, flat)) << name;
      const size_t row = size_t(c.heads) * c.hd;
      auto part = [&](int pos, int n) {
        return std::vector<float>(all.begin() + long(pos * row), all.begin() + long((pos + n) * row));
      };
      for (int pos : {0, 5, 63, 64, 127, 128, 129, 200, 259}) {
        if (pos >= c.rows) continue;
        const std::string at = name + " position " + std::to_string(pos);
        EXPECT_SAME_BITS(invariant_rows(whole, whole.sinks.data(), {{pos, 1}})[0], part(pos, 1), at + " (decode step)");
        const int n = std::min(7, c.rows - pos);
        EXPECT_SAME_BITS(invariant_rows(whole, whole.sinks.data(), {{pos, n}})[0], part(pos, n), at + " (chunk)");
      }
      const auto batch = invariant_rows(whole, whole.sinks.data(), {{c.rows - 1, 1}, {10, 60}, {129, 1}, {70, 3}});
      EXPECT_SAME_BITS(batch[0], part(c.rows - 1, 1), name + " batch: decode at the end");
      EXPECT_SAME_BITS(batch[1], part(10, 60), name + " batch: chunk 10..69");
      EXPECT_SAME_BITS(batch[2], part(129, 1), name + " batch: decode at 129");
      EXPECT_SAME_BITS(batch[3], part(70, 3), name + " batch: chunk 70..72");
      // A sink of -1e30: the sink-free bits, decode steps (their chunks merged) included.
      const std::vector<std::pair<int, int>> cuts = {{0, c.rows}, {c.rows - 1, 1}, {128, 1}};
      const auto low = invariant_rows(whole, kLowSinks.data(), cuts), none = invariant_rows(whole, nullptr, cuts);
      for (size_t i = 0; i < cuts.size(); ++i)
        EXPECT_SAME_BITS(low[i], none[i], name + ": -1e30, cut " + std::to_string(i));
    }
}

// `portable`: the CPU portable kernels' bits with sinks, prefill rows and decode steps alike.
TEST(CudaSinksOnCpu, PortableAttentionWithSinksIsTheCpuPortableBits) {
  auto cpu = make_kernels(KernelPolicy::Portable, nullptr);
  std::mt19937 rng(45);
  const AttnCase cases[] = {
      {"fp16 hd16 gqa prefill", DType::F16, DType::F16, 16, 4, 2, 0, 70, 0, false},
      {"bf16 hd40 decode window 50", DType::BF16, DType::BF16, 40, 2, 1, 130, 1, 50, false},
      {"fp32 hd64 gqa cached prefix", DType::F32, DType::F32, 64, 4, 1, 60, 9, 0, false},
      {"fp32 hd128 fp16 kv decode", DType::F32, DType::F16, 128, 2, 1, 150, 1, 0, false},
  };
  for (const AttnCase& c : cases)
    for (bool flat : {false, true}) {
      SinkSlice s(c, rng, flat);
      if (c.hd == 64) s.p.score_divisor = 1.0f, s.p.score_scale = 0.125f;  // GPT-OSS's order
      const cuda::AttnDesc d = s.desc();
      const std::string name = std::string(c.name) + (flat ? " (flat)" : "");
      cuda::portable::attention(HostLaunch{}, &d, 1, c.rows, s.shape(s.sinks.data()));
      EXPECT_SAME_BITS(s.got, s.cpu(*cpu, s.sinks.data()), name);
      expect_softmax_with_sink(s, s.got, name);
      cuda::portable::attention(HostLaunch{}, &d, 1, c.rows, s.shape(kLowSinks.data()));
      EXPECT_SAME_BITS(s.got, s.cpu(*cpu, nullptr), name + ": a sink of -1e30");
    }
  // A decode row beside a prefill in one launch, each its own CPU bits.
  SinkSlice a({"decode", DType::BF16, DType::BF16, 32, 2, 1, 100, 1, 0, false}, rng, false);
  SinkSlice b({"prefill", DType::BF16, DType::BF16, 32, 2, 1, 0, 40, 0, false}, rng, false);
  const cuda::AttnDesc descs[] = {a.desc(), b.desc()};
  cuda::portable::attention(HostLaunch{}, descs, 2, 40, a.shape(a.sinks.data()));
  EXPECT_SAME_BITS(a.got, a.cpu(*cpu, a.sinks.data()), "batch: decode slice");
  EXPECT_SAME_BITS(b.got, b.cpu(*cpu, b.sinks.data()), "batch: prefill slice");
}

}  // namespace
}  // namespace kvp
