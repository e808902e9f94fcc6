// llama2.c and GGUF "llama" files keep each head's q/k rows as adjacent RoPE pairs. kvparity runs
// them in place (no permuted copy of wq/wk) and applies RoPE to the pairs where they sit; the
// results must be bitwise those of the same model with its rows moved to the halves layout, which
// is what loading did before (and what an HF checkpoint of the model computes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "checking_build.h"
#include "core/aligned_allocator.h"
#include "io/checkpoint.h"
#include "kernels/elementwise.h"
#include "model/checkpoint_export.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

// The test's own statement of the layouts: pair i of a head is rows (2i, 2i+1) in the file and
// rows (i, i + head_dim/2) in the halves layout.
Checkpoint moved_to_halves(const Checkpoint& ck, std::vector<std::shared_ptr<AlignedBuffer>>& keep) {
  Checkpoint out = ck;
  out.qk_layout = RopeLayout::Halves;
  const ModelConfig& c = ck.config;
  for (auto& [name, t] : out.tensors) {
    const bool q = name.find("q_proj") != std::string::npos, k = name.find("k_proj") != std::string::npos;
    if (!q && !k) continue;
    const int heads = q ? c.n_heads : c.n_kv_heads, hd = c.head_dim;
    const size_t rb = t.shape.size() == 2 ? t.row_bytes() : dtype_size(t.dtype);
    auto buf = std::make_shared<AlignedBuffer>(t.nbytes());
    keep.push_back(buf);
    const auto* src = static_cast<const uint8_t*>(t.data);
    auto* dst = static_cast<uint8_t*>(buf->data());
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < hd / 2; ++i)
        for (int member = 0; member < 2; ++member)
          std::memcpy(dst + size_t(h * hd + member * (hd / 2) + i) * rb, src + size_t(h * hd + 2 * i + member) * rb, rb);
    t.data = buf->data();
  }
  return out;
}

// Prefill (M >= 16: the blocked/packed paths) with every position's logits, then two decode
// steps (the GEMV paths), K/V through the cache as usual.
std::vector<float> run(const std::shared_ptr<Model>& m, KernelPolicy pol, int threads, const std::vector<int>& tokens) {
  EngineOptions eo;
  eo.kernels = pol;
  eo.threads = threads;
  Engine e(m, eo);
  const int V = m->config.vocab_size, P = int(tokens.size()) - 2;
  ForwardOptions all;
  all.all_logits = true;
  const float* l = e.forward(tokens.data(), P, 0, all);
  std::vector<float> out(l, l + size_t(P) * V);
  for (int s = P; s < int(tokens.size()); ++s) {
    l = e.forward(tokens.data() + s, 1, s, ForwardOptions{});
    out.insert(out.end(), l, l + V);
  }
  return out;
}

void expect_layouts_agree(const Checkpoint& file, DType dt, const std::vector<int>& tokens) {
  ASSERT_EQ(file.qk_layout, RopeLayout::Interleaved);
  std::vector<std::shared_ptr<AlignedBuffer>> keep;
  const Checkpoint halves = moved_to_halves(file, keep);
  auto in_place = Model::from_checkpoint(file, dt);
  auto moved = Model::from_checkpoint(halves, dt);
  for (KernelPolicy pol : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant}) {
    for (int threads : {1, 2}) {
      if (pol == KernelPolicy::Reference && threads > 1) continue;
      SCOPED_TRACE(std::string(policy_name(pol)) + " threads " + std::to_string(threads));
      const auto a = run(in_place, pol, threads, tokens), b = run(moved, pol, threads, tokens);
      ASSERT_EQ(a.size(), b.size());
      size_t diff = 0;
      for (size_t i = 0; i < a.size(); ++i) diff += f32_bits(a[i]) != f32_bits(b[i]);
      EXPECT_EQ(diff, 0u) << "of " << a.size() << " logits";
    }
  }
}

// Each matrix the compute dtype can use as stored is the file's own bytes.
void expect_zero_copy(const Checkpoint& file, DType dt) {
  const ModelWeights w = build_weights(file, dt);
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
    const TensorView& q = file.tensors.at(p + "q_proj.weight");
    const TensorView& k = file.tensors.at(p + "k_proj.weight");
    if (q.quantized() || q.dtype == dt) EXPECT_EQ(w.layers[l].wq.data, q.data) << "layer " << l << " wq was copied";
    if (k.quantized() || k.dtype == dt) EXPECT_EQ(w.layers[l].wk.data, k.data) << "layer " << l << " wk was copied";
  }
  EXPECT_EQ(w.qk_layout, RopeLayout::Interleaved);
}

ModelConfig gqa_config(const char* arch) {
  ModelConfig c = synthetic_config(arch, "tiny");
  c.dim = 256;
  c.hidden_dim = 384;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 64;
  c.vocab_size = 320;
  c.max_seq_len = 64;
  return c;
}

TEST(RopeLayout, AdjacentPairsInPlaceEqualTheHalvesLayoutBitwise) {
  test::TempDir tmp;
  std::vector<int> tokens;
  for (int i = 0; i < 20; ++i) tokens.push_back((i * 53 + 11) % 320);
  const char* const archs[] = {"llama", "mistral"};
  const char* const forms[] = {"F32", "F16", "Q8_0", "Q4_K_M"};
  for (size_t ai = 0; ai < std::size(archs); ++ai) {
    const char* arch = archs[ai];
    const Checkpoint src = synthesize_checkpoint(gqa_config(arch), DType::F32, 7);
    for (size_t fi = 0; fi < std::size(forms); ++fi) {
      if (!test::runs_grid_point(ai, fi, 2)) continue;  // sanitizer build: each form in one family
      const char* form = forms[fi];
      SCOPED_TRACE(std::string(arch) + " " + form);
      const std::string path = tmp.file(std::string(arch) + form + ".gguf");
      ExportOptions eo;
      if (std::string(form) == "F32") eo.dtype = DType::F32;
      else if (std::string(form) == "F16") eo.dtype = DType::F16;
      else eo.quant = form;
      export_checkpoint(src, "gguf", path, eo);
      const Checkpoint file = open_checkpoint(path);
      for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
        SCOPED_TRACE(dtype_name(dt));
        expect_zero_copy(file, dt);
        expect_layouts_agree(file, dt, tokens);
      }
    }
  }
}

TEST(RopeLayout, Llama2cFileRunsInPlaceAndEqualsItsRowsMovedToHalves) {
  KVP_REQUIRE_SHARED(bin, "models/stories260K/stories260K.bin");
  const Checkpoint file = open_checkpoint(bin);
  const std::vector<int> tokens{1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 300, 41, 500, 7, 99, 260, 1, 2};
  for (DType dt : {DType::F32, DType::F16}) {
    SCOPED_TRACE(dtype_name(dt));
    expect_zero_copy(file, dt);
    expect_layouts_agree(file, dt, tokens);
  }
}

// The kernel-level statement: rotating adjacent pairs gives, in the halves layout, the bits of
// rotating the same pairs already moved there.
TEST(RopeLayout, ApplyRopeReadsAdjacentPairsAndWritesHalves) {
  const int hd = 8, heads = 3, M = 4, start = 5;
  const RopeTable table(hd, 16, 10000.0f);
  std::vector<float> adj(size_t(M * heads * hd)), halves(adj.size());
  for (size_t i = 0; i < adj.size(); ++i) adj[i] = float(int(i * 7919 % 61) - 30) / 7.0f;
  for (int r = 0; r < M * heads; ++r)
    for (int i = 0; i < hd / 2; ++i) {
      halves[size_t(r * hd + i)] = adj[size_t(r * hd + 2 * i)];
      halves[size_t(r * hd + hd / 2 + i)] = adj[size_t(r * hd + 2 * i + 1)];
    }
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    auto a = adj, h = halves;
    apply_rope(a.data(), M, heads, start, table, dt, RopePairs::AdjacentPairs);
    apply_rope(h.data(), M, heads, start, table, dt, RopePairs::Halves);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(f32_bits(a[i]), f32_bits(h[i])) << dtype_name(dt) << " element " << i;
    // And the rotation happened: at position 5 no pair is left as it was.
    EXPECT_NE(0, std::memcmp(h.data(), halves.data(), h.size() * 4));
  }
}

// The table computes rows on first use; whichever order and thread asks first, every row holds
// fp32(cos/sin(double(fp32(p * inv_freq[i])))), and positions outside the context are refused.
TEST(RopeLayout, TableRowsComputedOnDemandAreTheSameInAnyOrder) {
  const int hd = 64, half = hd / 2, n = 1000;
  const std::vector<float> inv = rope_inv_freq(hd, 10000.0f, {});
  const RopeTable forward(hd, n, 10000.0f), backward(hd, n, 10000.0f);
  for (int p = 0; p < n; ++p) (void)forward.cos_row(p);
  std::thread other([&] {
    for (int p = n - 1; p >= 0; p -= 3) (void)backward.sin_row(p);
  });
  for (int p = n - 1; p >= 0; --p) (void)backward.cos_row(p);
  other.join();
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < half; ++i) {
      const double a = double(float(p) * inv[size_t(i)]);
      ASSERT_EQ(f32_bits(forward.cos_row(p)[i]), f32_bits(float(std::cos(a)))) << p << " " << i;
      ASSERT_EQ(f32_bits(forward.sin_row(p)[i]), f32_bits(float(std::sin(a)))) << p << " " << i;
      ASSERT_EQ(f32_bits(backward.cos_row(p)[i]), f32_bits(forward.cos_row(p)[i]));
      ASSERT_EQ(f32_bits(backward.sin_row(p)[i]), f32_bits(forward.sin_row(p)[i]));
    }
  EXPECT_THROW(forward.cos_row(n), std::out_of_range);
  EXPECT_THROW(forward.sin_row(-1), std::out_of_range);
}

// Export moves q/k rows between the layouts while it converts a tensor row by row, in parallel.
// Conversion is element-wise, so it commutes with moving rows: a converting export must equal the
// plain export (rows moved as bytes) converted afterwards, both ways between the layouts.
TEST(RopeLayout, ExportMovesRowsWhileConvertingAsWhenOnlyMoving) {
  test::TempDir tmp;
  auto converted = [](const TensorView& t, DType d) {
    std::vector<float> f(size_t(t.numel()));
    view_to_f32(t, 0, f.size(), f.data());
    std::vector<uint8_t> bytes(f.size() * dtype_size(d));
    from_f32(d, f.data(), bytes.data(), f.size());
    return bytes;
  };
  auto expect_converted = [&](const std::string& plain_path, const std::string& conv_path, DType d, bool gguf) {
    const Checkpoint plain = open_checkpoint(plain_path), conv = open_checkpoint(conv_path);
    ASSERT_EQ(plain.tensors.size(), conv.tensors.size());
    for (const auto& [name, t] : conv.tensors) {
      const TensorView& p = plain.tensors.at(name);
      const DType want = t.shape.size() == 2 || !gguf ? d : DType::F32;  // GGUF keeps vectors in F32
      ASSERT_EQ(t.dtype, want) << name;
      const std::vector<uint8_t> expect = converted(p, want);
      EXPECT_EQ(std::memcmp(t.data, expect.data(), expect.size()), 0) << name;
    }
  };
  for (const char* arch : {"llama", "mistral"}) {
    SCOPED_TRACE(arch);
    const Checkpoint hf = synthesize_checkpoint(synthetic_config(arch, "tiny"), DType::F32, 11);
    const std::string a = tmp.file(std::string(arch) + "_plain.gguf"), b = tmp.file(std::string(arch) + "_f16.gguf");
    export_checkpoint(hf, "gguf", a);  // halves -> adjacent pairs, bytes moved
    ExportOptions to_f16;
    to_f16.dtype = DType::F16;
    export_checkpoint(hf, "gguf", b, to_f16);  // moved and converted row by row
    expect_converted(a, b, DType::F16, true);
    const Checkpoint pairs = open_checkpoint(a);
    ASSERT_EQ(pairs.qk_layout, RopeLayout::Interleaved);
    const std::string c = tmp.file(std::string(arch) + "_plain"), d = tmp.file(std::string(arch) + "_bf16");
    export_checkpoint(pairs, "hf", c);  // adjacent pairs -> halves
    ExportOptions to_bf16;
    to_bf16.dtype = DType::BF16;
    export_checkpoint(pairs, "hf", d, to_bf16);
    expect_converted(c, d, DType::BF16, false);
  }
}

}  // namespace
}  // namespace kvp
