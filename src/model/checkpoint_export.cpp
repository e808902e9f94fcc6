#include "model/checkpoint_export.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/mxfp4_repack.h"
#include "core/quantize.h"
#include "core/thread_pool.h"
#include "io/gguf.h"
#include "io/hf_config.h"
#include "io/hf_gpt_oss_experts.h"
#include "io/hf_text_model.h"
#include "io/model_writer.h"
#include "model/moe_names.h"
#include "model/quant_recipe.h"
#include "model/weights.h"

namespace kvp {
namespace {

// Moves whole rows between the RoPE layouts of a [n_heads*head_dim, ...] tensor: within each head,
// row r of the interleaved layout (pair r/2, member r%2) is row (r%2)*(head_dim/2) + r/2 of the
// halves layout. Exact; quantised rows carry their blocks.
void permute_qk_rows(const void* src, void* dst, size_t row_bytes, int n_heads, int head_dim, bool to_halves) {
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  const int half = head_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    for (int r = 0; r < head_dim; ++r) {
      const size_t inter = size_t(h) * head_dim + r;
      const size_t halv = size_t(h) * head_dim + size_t((r % 2) * half + r / 2);
      if (to_halves)
        std::memcpy(d + halv * row_bytes, s + inter * row_bytes, row_bytes);
      else
        std::memcpy(d + inter * row_bytes, s + halv * row_bytes, row_bytes);
    }
  }
}

// The row of the source that row `dst` of the result comes from, under permute_qk_rows's mapping
// (rows of a head are numbered within the tensor; head_dim even).
size_t source_row(size_t dst, int head_dim, bool to_halves) {
  const size_t hd = size_t(head_dim), half = hd / 2, head = dst / hd * hd, j = dst % hd;
  if (to_halves) return head + 2 * (j % half) + j / half;  // dst is the halves row of inter row r
  return head + (j % 2) * half + j / 2;                    // dst is the inter row of halves row
}

bool is_qk(const std::string& name, int* heads, const ModelConfig& c) {
  if (name.find("self_attn.q_proj.") != std::string::npos) { *heads = c.n_heads; return true; }
  if (name.find("self_attn.k_proj.") != std::string::npos) { *heads = c.n_kv_heads; return true; }
  return false;
}

// A copy of `t` in `dtype` (or in quantised format `quant` when not None) with q/k rows moved from
// layout `from` to `to`. `norm_shift` is added to RMSNorm gains: Gemma-2 GGUF files store (1 + w)
// where HF stores w.
TensorView prepare(const TensorView& t, DType dtype, QuantType quant, RopeLayout from, RopeLayout to,
                   const ModelConfig& c, float norm_shift, std::vector<std::shared_ptr<AlignedBuffer>>& keep,
                   ThreadPool& pool) {
  int heads = 0;
  const bool permute = from != to && is_qk(t.name, &heads, c);
  const bool is_norm = t.name.size() > 11 && t.name.compare(t.name.size() - 11, 11, "norm.weight") == 0;
  const float shift = is_norm ? norm_shift : 0.0f;
  const bool same_type = t.quant == quant && (quant != QuantType::None || t.dtype == dtype);
  if (same_type && !permute && shift == 0.0f) return t;
  TensorView out = t;
  out.dtype = quant != QuantType::None ? DType::F32 : dtype;
  out.quant = quant;
  const size_t n = size_t(t.numel());
  const int head_dim = permute ? int(t.shape[0] / heads) : 0;
  auto result = std::make_shared<AlignedBuffer>(out.nbytes());
  keep.push_back(result);
  out.data = result->data();
  if (same_type && shift == 0.0f) {
    // Only rows move: bytes (blocks included) are carried over untouched.
    const size_t rb = t.shape.size() == 2 ? t.row_bytes() : dtype_size(t.dtype);  // a bias moves element-wise
    permute_qk_rows(t.data, result->data(), rb, heads, head_dim, to == RopeLayout::Halves);
    return out;
  }
  // Row by row, each row a function of its source row alone: rows split across threads freely, and
  // no fp32 copy of the whole tensor is made (a 7B model's K-quants took minutes on one core, and
  // its fp32 copies 27 GB of page faults). A 1-D q/k bias moves element by element.
  const bool to_halves = to == RopeLayout::Halves;
  const size_t rows = t.shape.size() == 2 ? size_t(t.shape[0]) : permute ? n : 1, width = n / rows;
  const size_t out_row = quant != QuantType::None ? quant_row_bytes(quant, width) : width * dtype_size(dtype);
  std::mutex mu;
  size_t bad_at = n;  // the first non-finite element a quantised format cannot hold
  float bad_value = 0.0f;
  pool.parallel_pieces(long(rows), pool.piece_for(long(rows), 4, 1), [&](long b, long e, int) {
    std::vector<float> row(width);
    for (size_t r = size_t(b); r < size_t(e); ++r) {
      const size_t src = permute ? source_row(r, head_dim, to_halves) : r;
      view_to_f32(t, src * width, width, row.data());
      if (shift != 0.0f)
        for (float& v : row) v += shift;
      uint8_t* dst = static_cast<uint8_t*>(result->data()) + r * out_row;
      if (quant == QuantType::None) {
        from_f32(dtype, row.data(), dst, width);
        continue;
      }
      // A non-finite row is reported, not quantised: its block scale would be NaN or inf, which
      // the block's integer rounding cannot take (undefined behaviour, caught by UBSan).
      bool finite = true;
      for (size_t i = 0; i < width && finite; ++i)
        if (!std::isfinite(row[i])) {
          finite = false;
          std::lock_guard<std::mutex> lock(mu);
          if (r * width + i < bad_at) {
            bad_at = r * width + i;
            bad_value = row[i];
          }
        }
      if (finite) quantize_row(quant, row.data(), width, dst);
    }
  });
  if (bad_at < n)
    fail("tensor '{}': element {} is {}; quantised formats hold finite values only", t.name, bad_at, bad_value);
  return out;
}

std::string torch_dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
  }
  return "float32";
}

// One tensor of the output: what its header says, and the source tensors its bytes come from
// (several for a GGUF's stacked experts, expert order), each converted to the header's type.
struct Planned {
  TensorView header;  // name, dtype/quant and shape as written; no data
  std::vector<const TensorView*> parts;
  // How the parts make the tensor: one after another, or (an HF gpt_oss directory) fused and
  // transposed as GptOssExperts holds them: parts gate0, up0, gate1, ... (GateUp, GateUpBias) or
  // down0, down1, ... (Down) (io/hf_gpt_oss_experts.h); or, for GPT-OSS's published MXFP4 form, the
  // ggml MXFP4 parts' codes (Blocks) or exponents (Scales) in HF's layout, gate_up's rows
  // interleaved (gate j, up j) as the parts are, written as raw U8 (core/mxfp4_repack.h).
  enum class Layout { Concat, GateUp, GateUpBias, Down, Mxfp4Blocks, Mxfp4Scales } layout = Layout::Concat;
  bool u8() const { return layout == Layout::Mxfp4Blocks || layout == Layout::Mxfp4Scales; }
};

using PlanIndex = std::map<std::string, const Planned*>;

// Expert 0..E-1's tensors name_of(e), which must agree in type and shape (a layer's experts become
// one tensor): expert 0's header and every expert's source, in expert order; each name joins `taken`.
template <class NameOf>
Planned experts_of(const PlanIndex& by_name, int n_experts, NameOf name_of, std::set<std::string>& taken) {
  Planned s;
  for (int e = 0; e < n_experts; ++e) {
    const std::string n = name_of(e);
    auto it = by_name.find(n);
    if (it == by_name.end()) fail("export: missing tensor '{}'", n);
    const TensorView& h = it->second->header;
    if (!s.parts.empty() && (h.shape != s.header.shape || h.dtype != s.header.dtype || h.quant != s.header.quant))
      fail("export: tensor '{}' differs in type or shape from expert 0's; a layer's experts are written as one tensor",
           n);
    if (s.parts.empty()) s.header = h;
    s.parts.push_back(it->second->parts[0]);
    taken.insert(n);
  }
  return s;
}

PlanIndex index_of(const std::vector<Planned>& in) {
  PlanIndex by_name;
  for (const Planned& t : in) by_name[t.header.name] = &t;
  return by_name;
}

// Phi3ForCausalLM's fused projections (an HF phi3 directory, llama.cpp's phi3 GGUF): each layer's
// q/k/v rows one after another as self_attn.qkv_proj, gate's and up's as mlp.gate_up_proj, which
// must share a type unless `retype` (a quantisation recipe's) gives the fused matrix its own, as
// llama.cpp's recipes type attn_qkv.
template <class Retype>
std::vector<Planned> fused_phi3_projections(const std::vector<Planned>& in, const ModelConfig& c, Retype retype) {
  const PlanIndex by_name = index_of(in);
  std::set<std::string> taken;
  std::vector<Planned> out;
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const auto& [fused, parts] :
         {std::pair<std::string, std::vector<std::string>>{"self_attn.qkv_proj.weight",
                                                           {"self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                                            "self_attn.v_proj.weight"}},
          {"mlp.gate_up_proj.weight", {"mlp.gate_proj.weight", "mlp.up_proj.weight"}}}) {
      Planned f;
      for (const std::string& part : parts) {
        auto it = by_name.find(p + part);
        if (it == by_name.end()) fail("export: missing tensor '{}'", p + part);
        const TensorView& h = it->second->header;
        if (!f.parts.empty() && (h.shape[1] != f.header.shape[1] ||
                                 (!retype && (h.dtype != f.header.dtype || h.quant != f.header.quant))))
          fail("export: tensor '{}' differs in type or width from '{}'; Phi-3 holds them as one '{}'", p + part,
               p + parts[0], p + fused);
        if (f.parts.empty()) {
          f.header = h;
          f.header.shape[0] = 0;
        }
        f.header.shape[0] += h.shape[0];
        f.parts.push_back(it->second->parts[0]);
        taken.insert(p + part);
      }
      f.header.name = p + fused;
      if (retype) retype(f.header);
      out.push_back(std::move(f));
    }
  }
  for (const Planned& t : in)
    if (!taken.count(t.header.name)) out.push_back(t);
  return out;
}

// An HF gpt_oss directory's experts: each layer's per-expert matrices and biases fused back into
// mlp.experts.gate_up_proj [E, H, 2I], gate_up_proj_bias [E, 2I], down_proj [E, I, H] and
// down_proj_bias [E, H], in the experts' dtype (a quantised source's already resolved); or, with
// `mxfp4`, the matrices as the published checkpoints hold them: gate_up_proj_blocks [E, 2I, H/32,
// 16], gate_up_proj_scales [E, 2I, H/32], down_proj_blocks [E, H, I/32, 16], down_proj_scales [E, H,
// I/32], beside the same biases.
std::vector<Planned> fused_gpt_oss_experts(const std::vector<Planned>& in, const ModelConfig& c, bool mxfp4) {
  const PlanIndex by_name = index_of(in);
  std::set<std::string> taken;
  std::vector<Planned> out;
  const int E = c.moe.n_experts;
  const int64_t I = c.moe.expert_hidden_dim, H = c.dim;
  using L = Planned::Layout;
  using M = ExpertMatrix;
  for (int l = 0; l < c.n_layers; ++l) {
    auto matrices = [&](M m) { return experts_of(by_name, E, [&](int e) { return expert_matrix_name(c, l, e, m); }, taken); };
    auto biases = [&](M m) { return experts_of(by_name, E, [&](int e) { return expert_bias_name(c, l, e, m); }, taken); };
    // gate_up's parts: gate 0, up 0, gate 1, ...
    auto interleaved = [](Planned g, const Planned& u) {
      if (g.header.dtype != u.header.dtype) fail("export: '{}' and '{}' differ in dtype", g.header.name, u.header.name);
      std::vector<const TensorView*> both;
      for (size_t e = 0; e < g.parts.size(); ++e) both.insert(both.end(), {g.parts[e], u.parts[e]});
      g.parts = std::move(both);
      return g;
    };
    const std::string p = moe_layer_prefix(c, l) + "experts.";
    using Shape = std::vector<int64_t>;
    using Part = std::tuple<Planned, const char*, Shape, L>;
    std::vector<Part> parts;
    const Planned gate_up = interleaved(matrices(M::Gate), matrices(M::Up)), down = matrices(M::Down);
    if (mxfp4)
      parts = {Part{gate_up, "gate_up_proj_blocks", Shape{E, 2 * I, H / 32, 16}, L::Mxfp4Blocks},
               Part{gate_up, "gate_up_proj_scales", Shape{E, 2 * I, H / 32}, L::Mxfp4Scales}};
    else
      parts = {Part{gate_up, "gate_up_proj", Shape{E, H, 2 * I}, L::GateUp}};
    parts.push_back(Part{interleaved(biases(M::Gate), biases(M::Up)), "gate_up_proj_bias", Shape{E, 2 * I}, L::GateUpBias});
    if (mxfp4) {
      parts.push_back(Part{down, "down_proj_blocks", Shape{E, H, I / 32, 16}, L::Mxfp4Blocks});
      parts.push_back(Part{down, "down_proj_scales", Shape{E, H, I / 32}, L::Mxfp4Scales});
    } else {
      parts.push_back(Part{down, "down_proj", Shape{E, I, H}, L::Down});
    }
    parts.push_back(Part{biases(M::Down), "down_proj_bias", Shape{E, H}, L::Concat});
    for (auto [t, name, shape, layout] : parts) {
      t.header.name = p + name;
      t.header.shape = shape;
      t.header.quant = QuantType::None;
      t.layout = layout;
      out.push_back(std::move(t));
    }
  }
  for (const Planned& t : in)
    if (!taken.count(t.header.name)) out.push_back(t);
  return out;
}

// GGUF's layout of a mixture: each matrix of a layer's experts stacked into one [experts, rows,
// cols] tensor (stacked_experts_name, which the GGUF names map to ffn_*_exps), GPT-OSS's expert
// biases into [experts, rows] (ffn_*_exps.bias, F32 as llama.cpp's converter writes them),
// Qwen2-MoE's shared expert gate as llama.cpp's [dim] vector.
std::vector<Planned> stacked_experts(const std::vector<Planned>& in, const ModelConfig& c) {
  const PlanIndex by_name = index_of(in);
  std::set<std::string> stacked;
  std::vector<Planned> out;
  const int E = c.moe.n_experts;
  for (int l = 0; l < c.n_layers; ++l) {
    if (!c.moe_layer(l)) continue;
    for (ExpertMatrix m : {ExpertMatrix::Gate, ExpertMatrix::Up, ExpertMatrix::Down}) {
      Planned s = experts_of(by_name, E, [&](int e) { return expert_matrix_name(c, l, e, m); }, stacked);
      s.header.name = stacked_experts_name(c, l, m);
      s.header.shape = {E, s.header.shape[0], s.header.shape[1]};
      out.push_back(std::move(s));
      if (c.arch != Arch::GptOss) continue;
      Planned b = experts_of(by_name, E, [&](int e) { return expert_bias_name(c, l, e, m); }, stacked);
      if (b.header.shape.size() != 1) fail("export: tensor '{}' is not a vector", expert_bias_name(c, l, 0, m));
      b.header.name = stacked_expert_biases_name(c, l, m);
      b.header.shape = {E, b.header.shape[0]};
      out.push_back(std::move(b));
    }
  }
  for (const Planned& t : in) {
    if (stacked.count(t.header.name)) continue;
    Planned v = t;
    long l;
    std::string rest;
    if (split_layer_name(t.header.name, "model.layers.", &l, &rest) && t.header.name == shared_expert_gate_name(int(l)))
      v.header.shape = {t.header.shape.back()};
    out.push_back(std::move(v));
  }
  return out;
}

// Whether every expert matrix of a gpt_oss checkpoint is ggml MXFP4 (the published form's).
bool all_experts_mxfp4(const Checkpoint& ck) {
  const ModelConfig& c = ck.config;
  for (int l = 0; l < c.n_layers; ++l)
    for (int e = 0; e < c.moe.n_experts; ++e)
      for (ExpertMatrix m : {ExpertMatrix::Gate, ExpertMatrix::Up, ExpertMatrix::Down}) {
        const auto it = ck.tensors.find(expert_matrix_name(c, l, e, m));
        if (it == ck.tensors.end() || it->second.quant != QuantType::MXFP4) return false;
      }
  return c.n_layers > 0 && c.moe.n_experts > 0;
}

// config.json's quantization_config of GPT-OSS's published checkpoints: the experts in MXFP4, the
// rest as they are.
std::string with_mxfp4_quantization_config(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text);
  j["quantization_config"] = {
      {"quant_method", "mxfp4"},
      {"modules_to_not_convert", {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}}};
  return j.dump(2) + "\n";
}

// An MXFP4 Blocks or Scales tensor of `p` (parts: gate0, up0, gate1, ... or down0, down1, ...,
// each ggml MXFP4 [rows, cols]) into dst: HF's rows in order, gate_up's interleaved gate j, up j.
template <class Source>
void mxfp4_to_hf(const Planned& p, const TensorView& header, Source source, uint8_t* dst) {
  const bool blocks = p.layout == Planned::Layout::Mxfp4Blocks;
  const bool gate_up = header.name.find("gate_up_proj") != std::string::npos;
  const size_t n_experts = gate_up ? p.parts.size() / 2 : p.parts.size();
  const size_t per_value = blocks ? 2 : 32;  // values a byte of the tensor stands for
  size_t at = 0;
  for (size_t e = 0; e < n_experts; ++e) {
    TensorView m[2];
    for (size_t h = 0; h < (gate_up ? 2u : 1u); ++h) {
      m[h] = source(p.parts[gate_up ? 2 * e + h : e]);
      if (m[h].quant != QuantType::MXFP4 || m[h].shape.size() != 2)
        fail("export: tensor '{}' is not an MXFP4 matrix; '{}' takes MXFP4 experts only", m[h].name, header.name);
    }
    const size_t rows = size_t(m[0].rows()), cols = size_t(m[0].cols()), row = cols / per_value;
    for (size_t r = 0; r < rows; ++r)
      for (size_t h = 0; h < (gate_up ? 2u : 1u); ++h) {
        const uint8_t* src = static_cast<const uint8_t*>(m[h].data) + r * m[h].row_bytes();
        repack_ggml_mxfp4_to_hf(src, 1, cols, blocks ? dst + at : nullptr, blocks ? nullptr : dst + at, header.name);
        at += row;
      }
  }
  if (at != size_t(header.numel())) fail("export: '{}' takes {} bytes, its experts gave {}", header.name, header.numel(), at);
}

}  // namespace

void export_checkpoint(const Checkpoint& ckpt, const std::string& format, const std::string& out,
                       const ExportOptions& opts) {
  const ModelConfig& c = ckpt.config;
  c.validate();
  RopeLayout target;
  if (format == "hf") {
    target = RopeLayout::Halves;
  } else if (format == "gguf") {
    // llama.cpp's "llama" arch (also used for Mistral) expects adjacent pairs; the others use halves.
    // (smollm3 and granite, Llama's files under another name, too; phi3's rope type is NEOX: halves)
    target = (c.arch == Arch::Llama || c.arch == Arch::Mistral) && !c.phi3_rope() ? RopeLayout::Interleaved
                                                                                 : RopeLayout::Halves;
  } else {
    fail_usage("unknown output format '{}' (expected hf or gguf)", format);
  }
  if (format == "hf" && c.rope_scaling == ModelConfig::RopeScaling::FreqFactors)
    fail("{}: this model's RoPE frequency factors (GGUF rope_freqs.weight) have no config.json form; export to "
         "gguf instead",
         out);
  // Gemma-2's hyper-parameters come from the config (the source of truth); extras only carry them.
  std::map<std::string, double> extras = ckpt.extras;
  if (c.arch == Arch::Gemma2) {
    extras["query_pre_attn_scalar"] = c.query_pre_attn_scalar;
    extras["attn_logit_softcapping"] = c.attn_logit_softcapping;
    extras["final_logit_softcapping"] = c.final_logit_softcapping;
  }
  float norm_shift = 0.0f;
  if (c.gemma_family()) {
    if (format == "gguf" && !ckpt.norm_weights_include_one) norm_shift = 1.0f;
    if (format == "hf" && ckpt.norm_weights_include_one) norm_shift = -1.0f;
  }
  std::vector<std::shared_ptr<AlignedBuffer>> keep;  // the bytes of the tensor being written
  DType common = DType::F32;
  bool first = true;
  std::optional<QuantRecipe> recipe;
  if (!opts.quant.empty()) {
    if (format != "gguf") fail_usage("--quant {} needs --to gguf (safetensors holds no ggml blocks)", opts.quant);
    if (opts.dtype) fail_usage("--quant {} and --dtype exclude each other (quantised blocks have no dtype)", opts.quant);
    recipe = parse_quant_recipe(opts.quant, opts.quant_pure);
    if (!recipe) fail_usage("unknown --quant '{}' (one of {})", opts.quant, fmt::join(quant_recipe_names(), ", "));
  }
  // llama.cpp keeps a mixture's routers (ffn_gate_inp) unquantised.
  auto router = [&c](const std::string& name) {
    long l;
    std::string rest;
    return c.is_moe() && split_layer_name(name, "model.layers.", &l, &rest) &&
           (name == moe_router_name(c, int(l)) || name == shared_expert_gate_name(int(l)));
  };
  auto is_shared_gate = [](const std::string& name) {
    long l;
    std::string rest;
    return split_layer_name(name, "model.layers.", &l, &rest) && name == shared_expert_gate_name(int(l));
  };
  const QuantShape shape{c.n_layers, c.n_heads / std::max(1, c.n_kv_heads), !ckpt.tensors.count("lm_head.weight")};
  // A vision-language checkpoint is written as its text model: the vision tower is not this model.
  auto written = [&ckpt](const std::string& name) { return ckpt.text_model_of.empty() || is_text_model_tensor(name); };
  // The plan first (types and shapes only, so bad input fails before a file is made); each
  // tensor's bytes are made when the writer reaches it and dropped after, so a conversion holds
  // one tensor, not the model (a 7B model's quantised copy was 4-7 GB on top of the source).
  std::vector<Planned> plan;
  for (const auto& [name, t] : ckpt.tensors) {
    if (!written(name)) continue;
    // llama.cpp keeps 1-D tensors (norm gains, biases) in F32 whatever the matrices' type; the
    // upcast is exact, and the loader rounds them to the compute dtype again.
    // Qwen2-MoE's shared_expert_gate ([1, hidden] in HF) is such a vector in llama.cpp's layout.
    const bool vec = t.shape.size() == 1 || (format == "gguf" && c.is_moe() && is_shared_gate(name));
    QuantType q = QuantType::None;
    if (recipe && !vec && !router(name))
      q = quant_for_tensor(*recipe, name, shape, long(t.cols()));
    else if (format == "gguf" && t.quantized() && !opts.dtype && !recipe)
      q = t.quant;  // a quantised GGUF stays quantised unless a dtype or another format is asked for
    // Safetensors has no block types: quantised sources are dequantised (fp32 unless --dtype).
    const DType d = (format == "gguf" && vec) ? DType::F32
                    : t.quantized()           ? opts.dtype.value_or(DType::F32)
                                              : opts.dtype.value_or(t.dtype);
    TensorView h = t;
    h.dtype = q != QuantType::None ? DType::F32 : d;
    h.quant = q;
    h.data = nullptr;
    plan.push_back({h, {&t}});
    if (t.shape.size() == 2 && first) {
      common = d;
      first = false;
    }
  }
  // Refused before a byte is written, so no half-written model is left behind.
  if (format == "gguf" && c.is_moe()) plan = stacked_experts(plan, c);
  // GPT-OSS whose every expert matrix is MXFP4 (its published checkpoints, or llama.cpp's GGUF of
  // them) is written in that published form, bit for bit, unless a dtype is asked for.
  const bool mxfp4_experts = format == "hf" && c.arch == Arch::GptOss && !opts.dtype && all_experts_mxfp4(ckpt);
  if (format == "hf" && c.arch == Arch::GptOss) plan = fused_gpt_oss_experts(plan, c, mxfp4_experts);
  if (c.phi3_rope()) {  // written as Phi3ForCausalLM / llama.cpp's phi3
    std::function<void(TensorView&)> retype;
    if (recipe)
      retype = [&](TensorView& h) {
        h.quant = quant_for_tensor(*recipe, h.name, shape, long(h.cols()));
        h.dtype = h.quant != QuantType::None ? DType::F32 : opts.dtype.value_or(h.dtype);
      };
    plan = fused_phi3_projections(plan, c, retype);
  }
  std::string config_text =
      format == "hf" ? hf_config_text(out + "/config.json", c, torch_dtype_name(common), extras) : std::string();
  if (mxfp4_experts) config_text = with_mxfp4_quantization_config(config_text);
  ThreadPool pool(cores_here(64));
  std::vector<TensorView> tensors;
  for (const Planned& p : plan) tensors.push_back(p.header);
  TensorBytes bytes = [&](size_t i, const TensorView& header) -> const void* {
    keep.clear();
    const Planned& p = plan[i];
    auto converted = [&](const TensorView* src) {
      const TensorView in = opts.source ? opts.source(*src, keep) : *src;
      return prepare(in, header.dtype, header.quant, ckpt.qk_layout, target, c, norm_shift, keep, pool);
    };
    if (p.u8()) {
      auto all = std::make_shared<AlignedBuffer>(size_t(header.numel()));
      mxfp4_to_hf(p, header, [&](const TensorView* src) { return opts.source ? opts.source(*src, keep) : *src; },
                  all->as<uint8_t>());
      keep.push_back(all);
      return all->data();
    }
    if (p.parts.size() == 1) return converted(p.parts[0]).data;
    auto all = std::make_shared<AlignedBuffer>(header.nbytes());
    auto* dst = static_cast<uint8_t*>(all->data());
    const size_t el = dtype_size(header.dtype), I = size_t(c.moe.expert_hidden_dim), H = size_t(c.dim);
    auto bytes_of = [](const TensorView& v) { return static_cast<const uint8_t*>(v.data); };
    using L = Planned::Layout;
    if (p.layout == L::GateUp || p.layout == L::GateUpBias) {
      const size_t each = header.nbytes() / (p.parts.size() / 2);  // one expert's slice
      for (size_t e = 0; e < p.parts.size() / 2; ++e) {
        const TensorView g = converted(p.parts[2 * e]), u = converted(p.parts[2 * e + 1]);
        if (p.layout == L::GateUp)
          fuse_gate_up(bytes_of(g), bytes_of(u), I, H, el, dst + e * each);
        else
          fuse_gate_up_bias(bytes_of(g), bytes_of(u), I, el, dst + e * each);
        keep.resize(0);
      }
    } else if (p.layout == L::Down) {
      const size_t each = header.nbytes() / p.parts.size();
      for (size_t e = 0; e < p.parts.size(); ++e) {
        fuse_down(bytes_of(converted(p.parts[e])), H, I, el, dst + e * each);
        keep.resize(0);
      }
    } else {  // one after another: stacked experts, or Phi-3's q/k/v (of their own sizes)
      size_t at = 0;
      for (const TensorView* part : p.parts) {
        const TensorView v = converted(part);
        if (at + v.nbytes() > header.nbytes()) fail("export: '{}' overflows its {} bytes", header.name, header.nbytes());
        std::memcpy(dst + at, v.data, v.nbytes());
        at += v.nbytes();
        keep.resize(0);
      }
      if (at != header.nbytes()) fail("export: '{}' takes {} bytes, its parts gave {}", header.name, header.nbytes(), at);
    }
    keep.push_back(all);
    return all->data();
  };
  Progress writing;
  if (opts.progress) writing = [&opts](size_t done, size_t total) { opts.progress("writing", done, total); };
  namespace fs = std::filesystem;
  if (format == "hf") {
    std::error_code ec;
    fs::create_directories(out, ec);
    if (ec) fail("{}: cannot create output directory: {}", out, ec.message());
    std::vector<bool> u8;
    for (const Planned& p : plan) u8.push_back(p.u8());
    write_safetensors(out + "/model.safetensors", tensors, {{"format", "pt"}}, writing, bytes, u8);
    write_file_atomic(out + "/config.json", config_text);
    if (!opts.tokenizer_json_text.empty()) {
      write_file_atomic(out + "/tokenizer.json", opts.tokenizer_json_text);
      if (!opts.tokenizer_config_text.empty()) {
        std::string text = opts.tokenizer_config_text;
        if (!opts.chat_template.empty()) {
          nlohmann::json j = nlohmann::json::parse(text);
          j["chat_template"] = opts.chat_template;
          text = j.dump(2) + "\n";
        }
        write_file_atomic(out + "/tokenizer_config.json", text);
      }
    } else if (!opts.tokenizer_json.empty()) {
      fs::copy_file(opts.tokenizer_json, out + "/tokenizer.json", fs::copy_options::overwrite_existing, ec);
      if (ec) fail("{}: cannot copy tokenizer.json into {}: {}", opts.tokenizer_json, out, ec.message());
      // Special tokens, add_bos_token and chat template live there, not in tokenizer.json.
      const fs::path config = fs::path(opts.tokenizer_json).parent_path() / "tokenizer_config.json";
      if (fs::is_regular_file(config, ec)) {
        fs::copy_file(config, out + "/tokenizer_config.json", fs::copy_options::overwrite_existing, ec);
        if (ec) fail("{}: cannot copy tokenizer_config.json into {}: {}", config.string(), out, ec.message());
      }
      // transformers reads a chat_template.jinja beside it before the config's template.
      const fs::path jinja = fs::path(opts.tokenizer_json).parent_path() / "chat_template.jinja";
      if (fs::is_regular_file(jinja, ec)) {
        fs::copy_file(jinja, out + "/chat_template.jinja", fs::copy_options::overwrite_existing, ec);
        if (ec) fail("{}: cannot copy chat_template.jinja into {}: {}", jinja.string(), out, ec.message());
      }
    }
  } else {
    if (fs::path(out).has_parent_path()) {
      std::error_code ec;
      fs::create_directories(fs::path(out).parent_path(), ec);
    }
    GgufWriteOptions go;
    go.extras = extras;
    if (recipe) go.file_type = recipe->file_type;
    go.progress = writing;
    go.bytes = bytes;
    if (!opts.chat_template.empty()) go.extra_kv["tokenizer.chat_template"] = GgufValue::of_str(opts.chat_template);
    write_gguf(out, c, tensors, opts.vocab, go);
  }
}

}  // namespace kvp
