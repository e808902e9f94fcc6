// The `portable` policy on the GPU (issue 15): the same bits as the CPU's portable kernels, which
// are the same bits on AVX-512, AVX2 and the scalar fallback (tests/test_portable.cpp). Checked
// kernel by kernel against the CPU on the same inputs (the direct and tiled GEMMs, their tails and
// a -0 chain, quantised weights, RMSNorm, the activations, RoPE, attention over poisoned static
// caches and batches of slices), then end to end against the digests the CPU suite pins, and at a
// width where cuBLAS and the split-KV decode would differ: cache ON = OFF and batch = solo, bit
// for bit, and equal to the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <list>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/quant.h"
#include "core/quantize.h"
#include "cuda/cuda_test_util.h"
#include "kernels/elementwise.h"
#include "kernels/kernels.h"
#include "model/synthetic.h"
#include "attention_cases.h"
#include "portable_golden.h"
#include "test_util.h"

namespace kvp {
namespace {

using test::normals;
using test::same_bits;
using test::Trace;
using test::trace;

constexpr DType kAllTypes[] = {DType::F32, DType::F16, DType::BF16};

// A device copy of host floats (or bytes), read back after the kernels ran.
struct Dev {
  DeviceBuffer buf;
  Dev(const void* host, size_t bytes) : buf(Device::Cuda, bytes) {
    host_to_device(Device::Cuda, buf.data(), host, bytes);
  }
  explicit Dev(const std::vector<float>& v) : Dev(v.data(), v.size() * sizeof(float)) {}
  float* f() { return buf.as<float>(); }
  std::vector<float> read(Kernels& k, size_t n) {
    std::vector<float> out(n);
    k.to_host(out.data(), buf.data(), n * sizeof(float));
    return out;
  }
};

// The GPU kernels keep a device copy of each weight and gain keyed by its host address, for their
// whole life (a model outlives its engine): every host buffer a test hands them is kept here, so
// that no later buffer reuses a freed one's address.
struct Pair {
  std::unique_ptr<Kernels> cpu = make_kernels(KernelPolicy::Portable, nullptr, Device::Cpu);
  std::unique_ptr<Kernels> gpu = make_kernels(KernelPolicy::Portable, nullptr, Device::Cuda);
  std::list<std::vector<uint8_t>> bytes;
  std::list<std::vector<float>> floats;
  const std::vector<uint8_t>& hold(std::vector<uint8_t> v) { return bytes.emplace_back(std::move(v)); }
  const std::vector<float>& hold(std::vector<float> v) { return floats.emplace_back(std::move(v)); }
};

std::vector<float> gpu_matmul(Kernels& g, const std::vector<float>& x, int M, const TensorView& W, DType act,
                              size_t x_offset = 0) {
  std::vector<float> xs(x_offset + x.size());
  std::copy(x.begin(), x.end(), xs.begin() + long(x_offset));
  Dev dx(xs), dy(std::vector<float>(size_t(M) * W.rows(), NAN));
  g.matmul(dx.f() + x_offset, M, W, act, dy.f());
  return dy.read(g, size_t(M) * W.rows());
}

TEST(CudaPortable, MatmulIsTheCpuPortableKernelsBits) {
  KVP_REQUIRE_GPU();
  Pair k;
  std::mt19937 rng(5);
  struct Shape {
    int M, N, K;
  };
  // The direct GEMM (M < 16: one row, a few rows, rows past a multiple of 4) and the tiled one
  // (tiles past M, N and K; K not a multiple of 16 or of the 64-k stage).
  const Shape shapes[] = {{1, 45, 77}, {1, 300, 4096}, {3, 37, 1500}, {7, 64, 2048}, {15, 33, 16},
                          {16, 50, 100}, {40, 33, 1040}, {100, 70, 512}, {33, 129, 2816}};
  for (DType wt : kAllTypes)
    for (const Shape& s : shapes) {
      const auto wf = normals(size_t(s.N) * s.K, rng, wt);
      std::vector<uint8_t> wn(wf.size() * dtype_size(wt));
      from_f32(wt, wf.data(), wn.data(), wf.size());
      const TensorView W = test::weight_view(k.hold(std::move(wn)), wt, s.N, s.K);
      for (DType act : {DType::F32, wt}) {
        const auto x = normals(size_t(s.M) * s.K, rng, act);
        std::vector<float> want(size_t(s.M) * s.N);
        k.cpu->matmul(x.data(), s.M, W, act, want.data());
        const std::string what = std::string(dtype_name(wt)) + " W, act " + std::string(dtype_name(act)) + ", M " +
                                 std::to_string(s.M) + " N " + std::to_string(s.N) + " K " + std::to_string(s.K);
        EXPECT_SAME_BITS(gpu_matmul(*k.gpu, x, s.M, W, act), want, what);
        if (s.M < 16) EXPECT_SAME_BITS(gpu_matmul(*k.gpu, x, s.M, W, act, 1), want, what + " (unaligned x)");
      }
    }
  // GGUF blocks: uploaded as their exact fp32 values, the CPU's dequantised rows.
  for (QuantType qt : {QuantType::Q8_0, QuantType::Q4_K}) {
    const int N = 19, K = 512;
    const auto wf = normals(size_t(N) * K, rng);
    const auto& wb = k.hold(test::quantized_rows(qt, wf, N, K));
    TensorView W = test::weight_view(wb, DType::F32, N, K);
    W.quant = qt;
    for (int M : {1, 20}) {
      const auto x = normals(size_t(M) * K, rng, DType::F16);
      std::vector<float> want(size_t(M) * N);
      k.cpu->matmul(x.data(), M, W, DType::F16, want.data());
      EXPECT_SAME_BITS(gpu_matmul(*k.gpu, x, M, W, DType::F16), want,
                       std::string(quant_name(qt)) + " M " + std::to_string(M));
    }
  }
  // Chains that round to -0 keep their sign only if no all-zero group is added past the padded one.
  for (int K : {16, 20})
    for (int M : {1, 20}) {
      const int N = 3;
      const std::vector<float> x(size_t(M) * K, -1e-30f), wf(size_t(N) * K, 1e-30f);
      std::vector<uint8_t> wn(wf.size() * 4);
      std::memcpy(wn.data(), wf.data(), wn.size());
      const auto& wb = k.hold(std::move(wn));
      std::vector<float> want(size_t(M) * N);
      k.cpu->matmul(x.data(), M, test::weight_view(wb, DType::F32, N, K), DType::F32, want.data());
      EXPECT_SAME_BITS(gpu_matmul(*k.gpu, x, M, test::weight_view(wb, DType::F32, N, K), DType::F32), want,
                       "-0 chains, K " + std::to_string(K) + " M " + std::to_string(M));
    }
}

TEST(CudaPortable, NormsActivationsAndRopeAreTheCpuPortableKernelsBits) {
  KVP_REQUIRE_GPU();
  Pair k;
  std::mt19937 rng(6);
  for (DType act : kAllTypes) {
    const std::string a(dtype_name(act));
    for (int dim : {16, 50, 2048, 4096})
      for (int M : {1, 5}) {
        const auto x = normals(size_t(M) * dim, rng, act, 3.0f);
        const auto& w = k.hold(normals(size_t(dim), rng));
        std::vector<float> want(x.size()), want32(x.size());
        k.cpu->rmsnorm(x.data(), M, dim, w.data(), 1e-5f, act, want.data());
        k.cpu->rmsnorm_fp32_gain(x.data(), M, dim, w.data(), 1e-6f, act, want32.data());
        Dev dx(x), dy(std::vector<float>(x.size())), dy32(std::vector<float>(x.size()));
        k.gpu->rmsnorm(dx.f(), M, dim, w.data(), 1e-5f, act, dy.f());
        k.gpu->rmsnorm_fp32_gain(dx.f(), M, dim, w.data(), 1e-6f, act, dy32.f());
        EXPECT_SAME_BITS(dy.read(*k.gpu, x.size()), want, a + " rmsnorm dim " + std::to_string(dim));
        EXPECT_SAME_BITS(dy32.read(*k.gpu, x.size()), want32, a + " rmsnorm (fp32 gain) dim " + std::to_string(dim));
      }
    const size_t n = 10007;
    const auto g = normals(n, rng, act, 6.0f), u = normals(n, rng, act, 2.0f);
    std::vector<float> silu = g, gelu = g, cap = g;
    k.cpu->silu_mul(silu.data(), u.data(), n, act);
    k.cpu->gelu_tanh_mul(gelu.data(), u.data(), n, act);
    k.cpu->softcap(cap.data(), n, 30.0f, act);
    Dev ds(g), dg(g), dc(g), du(u);
    k.gpu->silu_mul(ds.f(), du.f(), n, act);
    k.gpu->gelu_tanh_mul(dg.f(), du.f(), n, act);
    k.gpu->softcap(dc.f(), n, 30.0f, act);
    EXPECT_SAME_BITS(ds.read(*k.gpu, n), silu, a + " silu");
    EXPECT_SAME_BITS(dg.read(*k.gpu, n), gelu, a + " gelu-tanh");
    EXPECT_SAME_BITS(dc.read(*k.gpu, n), cap, a + " softcap");
    // RoPE from the libm-free table, both pair layouts, positions far into the table.
    const RopeTable table(128, 8192, 500000.0f);
    const int M = 6, heads = 4;
    const std::vector<int> pos{0, 1, 77, 1000, 4095, 8191};
    for (RopePairs pairs : {RopePairs::Halves, RopePairs::AdjacentPairs}) {
      const auto x = normals(size_t(M) * heads * 128, rng, act, 2.0f);
      std::vector<float> want = x;
      k.cpu->rope(want.data(), M, heads, pos.data(), table, act, pairs);
      Dev dx(x);
      k.gpu->rope(dx.f(), M, heads, pos.data(), table, act, pairs);
      EXPECT_SAME_BITS(dx.read(*k.gpu, x.size()), want, a + " rope");
    }
  }
}

using test::AttnCase;

AttentionParams params(const AttnCase& c) { return test::attn_params(c, 37); }  // 37 slots never written: NaN

TEST(CudaPortable, AttentionIsTheCpuPortableKernelsBits) {
  KVP_REQUIRE_GPU();
  Pair k;
  std::mt19937 rng(8);
  const AttnCase cases[] = {
      {"fp16 hd128 gqa prefill", DType::F16, DType::F16, 128, 8, 2, 0, 200, 0, false},
      {"bf16 hd64 cached prefix, window", DType::BF16, DType::BF16, 64, 4, 4, 70, 90, 40, false},
      {"fp16 hd256 gemma", DType::F16, DType::F16, 256, 4, 2, 5, 130, 0, true},
      {"fp32 hd40 fp16 kv", DType::F32, DType::F16, 40, 4, 2, 3, 80, 0, false},
      {"fp16 hd128 decode", DType::F16, DType::F16, 128, 8, 2, 700, 1, 0, false},
      {"bf16 hd64 decode window", DType::BF16, DType::BF16, 64, 4, 4, 300, 1, 100, false},
      {"fp32 hd16 decode", DType::F32, DType::F32, 16, 2, 1, 2000, 1, 0, false},
  };
  for (const AttnCase& c : cases) {
    AttentionParams p = params(c);
    const int written = c.start_pos + c.rows;
    const size_t cn = size_t(c.kv_heads) * p.capacity * c.hd;
    std::vector<float> kf(cn, NAN), vf(cn, NAN);
    for (int h = 0; h < c.kv_heads; ++h)
      for (int j = 0; j < written; ++j)
        for (int e = 0; e < c.hd; ++e) {
          const size_t i = (size_t(h) * p.capacity + j) * c.hd + e;
          kf[i] = normals(1, rng, c.kv, 2.0f)[0];
          vf[i] = normals(1, rng, c.kv)[0];
        }
    std::vector<uint8_t> kb(cn * dtype_size(c.kv)), vb(kb.size());
    from_f32(c.kv, kf.data(), kb.data(), cn);
    from_f32(c.kv, vf.data(), vb.data(), cn);
    const auto q = normals(size_t(c.rows) * c.heads * c.hd, rng, c.act, 2.0f);
    std::vector<float> want(q.size());
    AttentionParams pc = p;
    pc.q = q.data();
    pc.k_cache = kb.data();
    pc.v_cache = vb.data();
    pc.out = want.data();
    k.cpu->attention(pc);
    Dev dq(q), dk(kb.data(), kb.size()), dv(vb.data(), vb.size()), dout(std::vector<float>(q.size(), NAN));
    AttentionParams pg = p;
    pg.q = dq.f();
    pg.k_cache = dk.buf.data();
    pg.v_cache = dv.buf.data();
    pg.out = dout.f();
    k.gpu->attention(pg);
    EXPECT_SAME_BITS(dout.read(*k.gpu, q.size()), want, c.name);
  }
}

// A batch's slices in one call (a decode row, a prefill, another decode row at another length)
// give each slice the bits it gets alone on the CPU.
TEST(CudaPortable, AttentionBatchSlicesAreEachTheCpuBits) {
  KVP_REQUIRE_GPU();
  Pair k;
  std::mt19937 rng(9);
  const AttnCase slices[] = {{"decode", DType::F16, DType::F16, 128, 8, 2, 300, 1, 0, false},
                             {"prefill", DType::F16, DType::F16, 128, 8, 2, 0, 70, 0, false},
                             {"decode 2", DType::F16, DType::F16, 128, 8, 2, 64, 1, 0, false}};
  std::vector<AttentionParams> pg;
  std::vector<std::vector<float>> want;
  std::vector<std::unique_ptr<Dev>> keep;
  for (const AttnCase& c : slices) {
    AttentionParams p = params(c);
    const size_t cn = size_t(c.kv_heads) * p.capacity * c.hd;
    const auto kf = normals(cn, rng, c.kv, 2.0f), vf = normals(cn, rng, c.kv);
    std::vector<uint8_t> kb(cn * 2), vb(cn * 2);
    from_f32(c.kv, kf.data(), kb.data(), cn);
    from_f32(c.kv, vf.data(), vb.data(), cn);
    const auto q = normals(size_t(c.rows) * c.heads * c.hd, rng, c.act, 2.0f);
    want.emplace_back(q.size());
    AttentionParams pc = p;
    pc.q = q.data();
    pc.k_cache = kb.data();
    pc.v_cache = vb.data();
    pc.out = want.back().data();
    k.cpu->attention(pc);
    keep.push_back(std::make_unique<Dev>(q));
    p.q = keep.back()->f();
    keep.push_back(std::make_unique<Dev>(kb.data(), kb.size()));
    p.k_cache = keep.back()->buf.data();
    keep.push_back(std::make_unique<Dev>(vb.data(), vb.size()));
    p.v_cache = keep.back()->buf.data();
    keep.push_back(std::make_unique<Dev>(std::vector<float>(q.size(), NAN)));
    p.out = keep.back()->f();
    pg.push_back(p);
  }
  k.gpu->attention_batch(pg.data(), int(pg.size()));
  for (size_t i = 0; i < pg.size(); ++i)
    EXPECT_SAME_BITS(keep[4 * i + 3]->read(*k.gpu, want[i].size()), want[i], slices[i].name);
}

// The digests tests/test_portable.cpp pins for every CPU target: the GPU gives them too, on both
// cache paths.
TEST(CudaPortable, GoldenDigestsAreTheCpuOnes) {
  KVP_REQUIRE_GPU();
  for (const char* arch :
       {"llama", "mistral", "gemma2", "qwen2", "qwen3", "gemma3", "olmo2", "mixtral", "qwen2_moe", "qwen3_moe", "olmoe",
        "olmo3", "exaone4"})
    for (DType dt : kAllTypes) {
      const std::string key = std::string(arch) + " " + std::string(dtype_name(dt));
      auto model = Model::from_checkpoint(synthesize_checkpoint(synthetic_config(arch, "tiny"), dt), dt);
      for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
        const std::string got = test::run_digest(model, SimdTarget::Auto, mode, 1, Device::Cuda);
        std::printf("[ measured ] cuda portable %s cache %s: %s\n", key.c_str(), mode == CacheMode::On ? "on" : "off",
                    got.c_str());
        EXPECT_EQ(got, test::kPortableGolden.at(key)) << key << (mode == CacheMode::On ? " cache ON" : " cache OFF");
      }
    }
}

// At a width where the standard GPU path differs between cache ON and OFF (cuBLAS's shape-dependent
// kernels, the split-KV decode; CudaBackend.HalfPrecisionStandardKernelsMakeCacheOnAndOffDiffer):
// portable gives bitwise equal logits at every step on both paths, in a batch of mixed-length
// sequences as alone, over a NaN-poisoned static cache, and equal to the CPU's.
TEST(CudaPortable, CacheOnEqualsOffAndBatchEqualsSoloAtWidth) {
  KVP_REQUIRE_GPU();
  ModelConfig c;
  const Checkpoint ck = test::wide_llama(&c);
  const std::vector<int> prompt = test::wide_prompt(c);
  for (DType dt : {DType::F16, DType::BF16}) {
    const std::string d(dtype_name(dt));
    auto model = Model::from_checkpoint(ck, dt);
    EngineOptions gpu;
    gpu.device = Device::Cuda;
    gpu.kernels = KernelPolicy::Portable;
    gpu.kv_dtype = KvType::of(dt);
    EngineOptions cpu = gpu;
    cpu.device = Device::Cpu;
    cpu.threads = 2;
    const Trace on = trace(model, gpu, prompt, CacheMode::On, 24, true);
    const Trace off = trace(model, gpu, prompt, CacheMode::Off, 24);
    EXPECT_TRUE(same_bits(on, off)) << d << ": cache ON and OFF differ on the GPU";
    EXPECT_TRUE(same_bits(on, trace(model, cpu, prompt, CacheMode::On, 24))) << d << ": GPU and CPU differ";
    const std::vector<std::vector<int>> prompts{{1, 5, 9}, std::vector<int>(prompt.begin(), prompt.begin() + 90), {1},
                                                {1, 40, 41, 42, 43}};
    Engine batch(model, gpu);
    GenerationConfig g;
    g.max_new_tokens = 16;
    g.stop_at_eos = false;
    std::vector<Trace> got(prompts.size());
    batch.generate_batch(prompts, g, nullptr, [&](int b, const StepInfo& s) {
      got[size_t(b)].logits.emplace_back(s.logits, s.logits + s.vocab);
    });
    for (size_t b = 0; b < prompts.size(); ++b) {
      EngineOptions solo = gpu;
      GenerationConfig gs = g;
      gs.sequence_id = b;
      Engine e(model, solo);
      Trace want;
      e.generate(prompts[b], gs, nullptr,
                 [&](const StepInfo& s) { want.logits.emplace_back(s.logits, s.logits + s.vocab); });
      EXPECT_TRUE(same_bits(got[b], want)) << d << ": sequence " << b << " in a batch of 4 differs from alone";
    }
  }
}

}  // namespace
}  // namespace kvp
