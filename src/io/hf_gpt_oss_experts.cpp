#include "io/hf_gpt_oss_experts.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>

#include "core/error.h"
#include "core/mxfp4_repack.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "model/moe_names.h"

namespace kvp {

namespace {

const TensorView& fused(const Checkpoint& ck, const std::string& name, std::vector<int64_t> shape) {
  const auto it = ck.tensors.find(name);
  if (it == ck.tensors.end()) fail("{}: missing tensor '{}' (gpt_oss's experts come as four tensors)", ck.path, name);
  const TensorView& t = it->second;
  if (t.shape != shape)
    fail("{}: tensor '{}' has shape [{}]; the config's experts make it [{}]", ck.path, name, fmt::join(t.shape, ", "),
         fmt::join(shape, ", "));
  if (t.quantized() || (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16))
    fail("{}: tensor '{}' must be F32, F16 or BF16", ck.path, name);
  return t;
}

// A view `name` into `data`, held by the checkpoint under that name.
void add_view(Checkpoint& ck, const std::string& name, DType dt, QuantType q, std::vector<int64_t> shape,
              const void* data) {
  TensorView v;
  v.name = name;
  v.dtype = dt;
  v.quant = q;
  v.shape = std::move(shape);
  v.data = data;
  ck.tensors[name] = std::move(v);
}

// dst[c][r] = src[r * src_stride + c * step] for r < rows, c < cols: columns `step` apart of a
// row-major matrix become rows, in tiles so that both sides stay in cache.
void transpose_columns(const uint8_t* src, size_t src_stride, size_t step, size_t rows, size_t cols, size_t elem,
                       uint8_t* dst) {
  constexpr size_t kTile = 32;
  for (size_t r0 = 0; r0 < rows; r0 += kTile)
    for (size_t c0 = 0; c0 < cols; c0 += kTile)
      for (size_t c = c0; c < std::min(cols, c0 + kTile); ++c)
        for (size_t r = r0; r < std::min(rows, r0 + kTile); ++r)
          std::memcpy(dst + (c * rows + r) * elem, src + (r * src_stride + c * step) * elem, elem);
}

// Every expert's biases of layer l as views: gate's and up's (interleaved in gate_up_proj_bias
// [experts, 2 x intermediate], even entries gate) copied into `dst` [experts][gate, up][intermediate],
// down's slices of down_proj_bias in place.
void add_expert_biases(Checkpoint& ck, int l, const TensorView& gu_b, const TensorView& down_b, uint8_t* dst) {
  const ModelConfig& c = ck.config;
  const int64_t E = c.moe.n_experts, I = c.moe.expert_hidden_dim, H = c.dim;
  const size_t eb = dtype_size(gu_b.dtype);
  const auto* src = static_cast<const uint8_t*>(gu_b.data);
  for (int e = 0; e < E; ++e) {
    for (int half = 0; half < 2; ++half) {
      uint8_t* b = dst + (size_t(e) * 2 + size_t(half)) * size_t(I) * eb;
      for (int64_t i = 0; i < I; ++i)
        std::memcpy(b + size_t(i) * eb, src + (size_t(e) * 2 * size_t(I) + 2 * size_t(i) + size_t(half)) * eb, eb);
      add_view(ck, expert_bias_name(c, l, e, half == 0 ? ExpertMatrix::Gate : ExpertMatrix::Up), gu_b.dtype,
               QuantType::None, {I}, b);
    }
    TensorView db = row_slice(down_b, e, 1, expert_bias_name(c, l, e, ExpertMatrix::Down));
    db.shape = {H};
    ck.tensors[db.name] = std::move(db);
  }
}

const ByteTensor& packed(const Checkpoint& ck, const std::string& name, std::vector<int64_t> shape) {
  const auto it = ck.byte_tensors.find(name);
  if (it == ck.byte_tensors.end())
    fail("{}: missing tensor '{}' (gpt_oss's MXFP4 experts come as blocks, scales and biases)", ck.path, name);
  if (it->second.shape != shape)
    fail("{}: tensor '{}' has shape [{}]; the config's experts make it [{}]", ck.path, name,
         fmt::join(it->second.shape, ", "), fmt::join(shape, ", "));
  return it->second;
}

// A per-expert matrix or bias beside the fused ones would be overwritten by the unpacking: refused.
void refuse_per_expert_tensors(const Checkpoint& ck, int l, const std::string& fused_name) {
  const ModelConfig& c = ck.config;
  for (int e = 0; e < c.moe.n_experts; ++e)
    for (ExpertMatrix m : {ExpertMatrix::Gate, ExpertMatrix::Up, ExpertMatrix::Down})
      for (const std::string& n : {expert_matrix_name(c, l, e, m), expert_bias_name(c, l, e, m)})
        if (ck.tensors.count(n)) fail("{}: layer {} has both '{}' and '{}'", ck.path, l, fused_name, n);
}

// The MXFP4 form (quantization_config quant_method mxfp4): per matrix `*_blocks` [experts, rows,
// cols / 32, 16] and `*_scales` [experts, rows, cols / 32] in the [out, in] row order of kvparity's
// matmuls already (gate_up's rows interleaved gate, up), repacked row by row into ggml's MXFP4
// blocks (core/mxfp4_repack.h: no value changes), so the experts stay 4.25 bits a weight.
void repack_mxfp4_layer(Checkpoint& ck, int l, const TensorView& gu_b, const TensorView& down_b,
                        std::optional<ThreadPool>& pool) {
  const ModelConfig& c = ck.config;
  const int64_t E = c.moe.n_experts, I = c.moe.expert_hidden_dim, H = c.dim;
  const std::string p = moe_layer_prefix(c, l) + "experts.";
  if (H % 32 != 0 || I % 32 != 0)
    fail("{}: MXFP4 experts need hidden_size ({}) and intermediate_size ({}) to be multiples of 32", ck.path, H, I);
  const ByteTensor& gb = packed(ck, p + "gate_up_proj_blocks", {E, 2 * I, H / 32, 16});
  const ByteTensor& gs = packed(ck, p + "gate_up_proj_scales", {E, 2 * I, H / 32});
  const ByteTensor& db = packed(ck, p + "down_proj_blocks", {E, H, I / 32, 16});
  const ByteTensor& ds = packed(ck, p + "down_proj_scales", {E, H, I / 32});
  const size_t g_row = quant_row_bytes(QuantType::MXFP4, size_t(H)), d_row = quant_row_bytes(QuantType::MXFP4, size_t(I));
  const size_t expert_bytes = 2 * size_t(I) * g_row + size_t(H) * d_row;
  const size_t eb = dtype_size(gu_b.dtype);
  auto buf = std::make_shared<AlignedBuffer>(size_t(E) * expert_bytes + size_t(E) * 2 * size_t(I) * eb);
  uint8_t* const out = buf->as<uint8_t>();
  if (!pool) pool.emplace(cores_here(64));
  pool->parallel_pieces(long(E), 1, [&](long b, long en, int) {
    for (long e = b; e < en; ++e) {
      uint8_t* const x = out + size_t(e) * expert_bytes;
      for (int64_t r = 0; r < 2 * I; ++r) {  // row 2j: gate j, row 2j + 1: up j
        const size_t src = size_t(e) * 2 * size_t(I) + size_t(r);
        uint8_t* dst = x + (size_t(r % 2) * size_t(I) + size_t(r / 2)) * g_row;
        repack_hf_mxfp4(gb.data + src * size_t(H) / 2, gs.data + src * size_t(H) / 32, 1, size_t(H), dst,
                        p + "gate_up_proj_blocks");
      }
      repack_hf_mxfp4(db.data + size_t(e) * size_t(H) * size_t(I) / 2, ds.data + size_t(e) * size_t(H) * size_t(I) / 32,
                      size_t(H), size_t(I), x + 2 * size_t(I) * g_row, p + "down_proj_blocks");
    }
  });
  const QuantType mx = QuantType::MXFP4;
  for (int e = 0; e < E; ++e) {
    const uint8_t* x = out + size_t(e) * expert_bytes;
    add_view(ck, expert_matrix_name(c, l, e, ExpertMatrix::Gate), DType::F32, mx, {I, H}, x);
    add_view(ck, expert_matrix_name(c, l, e, ExpertMatrix::Up), DType::F32, mx, {I, H}, x + size_t(I) * g_row);
    add_view(ck, expert_matrix_name(c, l, e, ExpertMatrix::Down), DType::F32, mx, {H, I}, x + 2 * size_t(I) * g_row);
  }
  add_expert_biases(ck, l, gu_b, down_b, out + size_t(E) * expert_bytes);
  for (const char* k : {"gate_up_proj_blocks", "gate_up_proj_scales", "down_proj_blocks", "down_proj_scales"})
    ck.byte_tensors.erase(p + k);
  for (const char* k : {"gate_up_proj_bias", "down_proj_bias"}) ck.tensors.erase(p + k);
  ck.keepalive.push_back(std::move(buf));
}

}  // namespace

void fuse_gate_up(const uint8_t* gate, const uint8_t* up, size_t I, size_t H, size_t elem, uint8_t* dst) {
  // dst[h][2j + half] = (half ? up : gate)[j][h]: each source's columns become every other column.
  for (int half = 0; half < 2; ++half) {
    const uint8_t* src = half == 0 ? gate : up;
    constexpr size_t kTile = 32;
    for (size_t j0 = 0; j0 < I; j0 += kTile)
      for (size_t h0 = 0; h0 < H; h0 += kTile)
        for (size_t j = j0; j < std::min(I, j0 + kTile); ++j)
          for (size_t h = h0; h < std::min(H, h0 + kTile); ++h)
            std::memcpy(dst + (h * 2 * I + 2 * j + size_t(half)) * elem, src + (j * H + h) * elem, elem);
  }
}

void fuse_down(const uint8_t* down, size_t H, size_t I, size_t elem, uint8_t* dst) {
  transpose_columns(down, I, 1, H, I, elem, dst);  // dst[i][h] = down[h][i]
}

void fuse_gate_up_bias(const uint8_t* gate_b, const uint8_t* up_b, size_t I, size_t elem, uint8_t* dst) {
  for (size_t j = 0; j < I; ++j) {
    std::memcpy(dst + 2 * j * elem, gate_b + j * elem, elem);
    std::memcpy(dst + (2 * j + 1) * elem, up_b + j * elem, elem);
  }
}

void unpack_gpt_oss_experts(Checkpoint& ck) {
  const ModelConfig& c = ck.config;
  if (c.arch != Arch::GptOss) return;
  const int64_t E = c.moe.n_experts, I = c.moe.expert_hidden_dim, H = c.dim;
  std::optional<ThreadPool> pool;
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = moe_layer_prefix(c, l) + "experts.";
    if (ck.byte_tensors.count(p + "gate_up_proj_blocks") || ck.byte_tensors.count(p + "down_proj_blocks")) {
      if (ck.tensors.count(p + "gate_up_proj") || ck.tensors.count(p + "down_proj"))
        fail("{}: layer {} has both MXFP4 blocks and dequantised experts ('{}')", ck.path, l, p + "gate_up_proj");
      refuse_per_expert_tensors(ck, l, p + "gate_up_proj_blocks");
      repack_mxfp4_layer(ck, l, fused(ck, p + "gate_up_proj_bias", {E, 2 * I}), fused(ck, p + "down_proj_bias", {E, H}),
                         pool);
      continue;
    }
    if (!ck.tensors.count(p + "gate_up_proj") && !ck.tensors.count(p + "down_proj")) continue;
    const TensorView& gu = fused(ck, p + "gate_up_proj", {E, H, 2 * I});
    const TensorView& gu_b = fused(ck, p + "gate_up_proj_bias", {E, 2 * I});
    const TensorView& down = fused(ck, p + "down_proj", {E, I, H});
    const TensorView& down_b = fused(ck, p + "down_proj_bias", {E, H});
    refuse_per_expert_tensors(ck, l, gu.name);
    // One buffer per layer: gate, up and down of every expert, then the gate and up biases.
    const size_t el = dtype_size(gu.dtype), eb = dtype_size(gu_b.dtype), ed = dtype_size(down.dtype);
    const size_t mat = size_t(I * H);
    const size_t w_bytes = size_t(E) * (2 * mat * el + mat * ed);
    auto buf = std::make_shared<AlignedBuffer>(w_bytes + size_t(E) * 2 * size_t(I) * eb);
    uint8_t* const out = buf->as<uint8_t>();
    const auto* g_src = static_cast<const uint8_t*>(gu.data);
    const auto* d_src = static_cast<const uint8_t*>(down.data);
    auto gate_at = [&](int64_t e, int half) { return out + size_t(e) * (2 * mat * el + mat * ed) + size_t(half) * mat * el; };
    auto down_at = [&](int64_t e) { return gate_at(e, 2); };
    if (!pool) pool.emplace(cores_here(64));
    pool->parallel_pieces(long(E), 1, [&](long b, long en, int) {
      for (long e = b; e < en; ++e) {
        const uint8_t* g = g_src + size_t(e) * size_t(H) * 2 * size_t(I) * el;
        for (int half = 0; half < 2; ++half)  // gate: the even columns, up: the odd ones
          transpose_columns(g + size_t(half) * el, 2 * size_t(I), 2, size_t(H), size_t(I), el, gate_at(e, half));
        transpose_columns(d_src + size_t(e) * mat * ed, size_t(H), 1, size_t(I), size_t(H), ed, down_at(e));
      }
    });
    const QuantType none = QuantType::None;
    for (int e = 0; e < E; ++e) {
      add_view(ck, expert_matrix_name(c, l, e, ExpertMatrix::Gate), gu.dtype, none, {I, H}, gate_at(e, 0));
      add_view(ck, expert_matrix_name(c, l, e, ExpertMatrix::Up), gu.dtype, none, {I, H}, gate_at(e, 1));
      add_view(ck, expert_matrix_name(c, l, e, ExpertMatrix::Down), down.dtype, none, {H, I}, down_at(e));
    }
    add_expert_biases(ck, l, gu_b, down_b, out + w_bytes);
    for (const char* k : {"gate_up_proj", "gate_up_proj_bias", "down_proj", "down_proj_bias"}) ck.tensors.erase(p + k);
    ck.keepalive.push_back(std::move(buf));
  }
}

}  // namespace kvp
