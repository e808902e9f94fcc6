#include "model/synthetic.h"

#include <fmt/ranges.h>

#include <cmath>
#include <map>
#include <thread>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/moe_names.h"
#include "runtime/rng.h"

namespace kvp {

namespace {

// Each preset and the architecture it belongs to ("" for "tiny", which exists for every family).
struct Preset {
  const char* name;
  const char* arch;
};
constexpr Preset kPresets[] = {
    {"tiny", ""},
    {"tinyllama-1.1b", "llama"},    {"llama2-7b", "llama"},
    {"mistral-7b", "mistral"},      {"gemma2-2b", "gemma2"},
    {"qwen2.5-0.5b", "qwen2"},      {"qwen3-0.6b", "qwen3"},
    {"gemma3-1b", "gemma3"},        {"olmo2-1b", "olmo2"},
    {"olmo2-7b", "olmo2"},          {"mixtral-8x7b", "mixtral"},
    {"qwen1.5-moe-a2.7b", "qwen2_moe"}, {"qwen3-30b-a3b", "qwen3_moe"},
    {"olmoe-1b-7b", "olmoe"},       {"smollm3-3b", "llama"},
    {"olmo3-7b", "olmo3"},          {"ministral3-8b", "mistral"},
    {"gpt-oss-20b", "gpt_oss"},     {"phi-4-mini", "mistral"},
};

// OLMo-3's published RoPE: YaRN x8 over an original 8192-position context, its attention factor
// transformers' default 0.1 ln 8 + 1 written out, on the full-attention layers only.
void olmo3_yarn(ModelConfig& c, int original_context) {
  c.rope_scaling = ModelConfig::RopeScaling::Yarn;
  c.rope_factor = 8.0f;
  c.rope_original_max_pos = original_context;
  c.rope_attention_factor = 0.1 * std::log(8.0) + 1.0;
  c.rope_local_theta = c.rope_theta;
}

// GPT-OSS's published attention and RoPE: biases, sinks, a window on the even layers, YaRN x32
// (untruncated, transformers' default attention factor 0.1 ln 32 + 1) on every layer over
// `original_context` positions; its experts' clamped SwiGLU and top-k-then-softmax routing.
void gpt_oss_features(ModelConfig& c, int window, int original_context) {
  c.qkv_bias = c.o_bias = c.attention_sinks = true;
  c.sliding_window = window;
  c.sliding_window_period = 2;
  c.rope_theta = 150000.0f;
  c.rope_scaling = ModelConfig::RopeScaling::Yarn;
  c.rope_factor = 32.0f;
  c.rope_original_max_pos = original_context;
  c.rope_yarn_truncate = false;
  c.rope_attention_factor = 0.1 * std::log(32.0) + 1.0;
  c.moe.routing = MoeConfig::Routing::TopKThenSoftmax;
  c.moe.swiglu_limit = 7.0f;
  c.moe.norm_topk_prob = false;
}

std::string preset_arch(const std::string& preset) {
  for (const Preset& p : kPresets)
    if (preset == p.name) return p.arch;
  fail_usage("synth: unknown preset '{}' (expected one of {})", preset, fmt::join(synthetic_presets(), ", "));
}

}  // namespace

std::vector<std::string> synthetic_presets() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.emplace_back(p.name);
  return names;
}

ModelConfig synthetic_config(const std::string& arch_in, const std::string& preset) {
  const std::string owner = preset_arch(preset);
  const std::string arch_s = arch_in.empty() ? (owner.empty() ? "llama" : owner) : arch_in;
  // The mixtures of experts by transformers' names, over their attention's family.
  const bool moe = arch_s == "mixtral" || arch_s == "qwen2_moe" || arch_s == "qwen3_moe" || arch_s == "olmoe" ||
                   arch_s == "gpt_oss";
  ModelConfig c;
  c.arch = parse_arch(arch_s == "mixtral"                        ? "mistral"
                      : arch_s == "olmoe" || arch_s == "gpt_oss" ? arch_s
                      : moe                                      ? arch_s.substr(0, 5)
                                                                 : arch_s);
  if (!owner.empty() && owner != arch_s)
    fail_usage("synth: preset '{}' is a {} model, not {} (use --arch {} or --preset tiny)", preset, owner, arch_s,
               owner);
  c.rope_theta = 10000.0f;
  c.norm_eps = 1e-5f;
  c.tied_embeddings = false;
  c.bos_id = 1;
  c.eos_id = 2;
  if (preset == "tiny") {
    c.dim = 128; c.hidden_dim = 352; c.n_layers = 4; c.n_heads = 8; c.n_kv_heads = 4;
    c.vocab_size = 512; c.max_seq_len = 512;
    switch (c.arch) {
      case Arch::Llama: break;
      case Arch::Mistral: c.sliding_window = 16; break;  // short, so tests run past it
      case Arch::Gemma2:
        // head_dim (48) independent of dim / heads (32), query_pre_attn_scalar different from both.
        c.n_heads = 4; c.n_kv_heads = 2; c.head_dim = 48; c.query_pre_attn_scalar = 40.0f;
        c.attn_logit_softcapping = 50.0f; c.final_logit_softcapping = 30.0f;
        c.sliding_window = 16; c.sliding_window_period = 2; c.norm_eps = 1e-6f; c.tied_embeddings = true;
        c.bos_id = 2; c.eos_id = 1;
        break;
      case Arch::Qwen2:
        c.n_kv_heads = 2; c.qkv_bias = true; c.tied_embeddings = true; c.norm_eps = 1e-6f;
        c.bos_id = -1; c.eos_id = 2;  // no BOS, as Qwen2's tokenizer
        break;
      case Arch::Qwen3:
        // head_dim (32) independent of dim / heads (16), as Qwen3's 128 is.
        c.n_kv_heads = 2; c.head_dim = 32; c.tied_embeddings = true;
        c.norm_eps = 1e-6f; c.bos_id = -1; c.eos_id = 2;
        break;
      case Arch::Gemma3:
        // Six layers, every third global (so both kinds, and a pattern that is not Gemma-2's), the
        // local RoPE unscaled and the global one at another base, linearly scaled, as 4B and up.
        c.n_layers = 6; c.n_heads = 4; c.n_kv_heads = 2; c.head_dim = 48; c.query_pre_attn_scalar = 40.0f;
        c.sliding_window = 16; c.sliding_window_period = 3; c.rope_local_theta = 10000.0f;
        c.rope_theta = 1000000.0f; c.rope_scaling = ModelConfig::RopeScaling::Linear; c.rope_factor = 8.0f;
        c.norm_eps = 1e-6f; c.tied_embeddings = true; c.bos_id = 2; c.eos_id = 1;
        break;
      case Arch::Olmo2:
      case Arch::Olmoe:
        c.n_kv_heads = 2; c.norm_eps = 1e-6f; c.bos_id = -1; c.eos_id = 2;  // no BOS, as OLMo's tokenizers
        break;
      case Arch::Olmo3:
        // Layers 0-2 windowed (short, so tests run past it) and rotating unscaled, layer 3 full with
        // YaRN over an original context of 64, so a test's positions cross the ramp's range.
        c.n_kv_heads = 2; c.norm_eps = 1e-6f; c.bos_id = -1; c.eos_id = 2;
        c.sliding_window = 16; c.sliding_window_period = 4; c.rope_theta = 500000.0f;
        olmo3_yarn(c, 64);
        break;
      case Arch::Exaone4:
        // EXAONE 4.0's hybrid: layers 0-2 windowed and rotating, layer 3 global without RoPE.
        c.n_heads = 4; c.n_kv_heads = 2; c.head_dim = 32; c.rope_theta = 1000000.0f;
        c.sliding_window = 16; c.sliding_window_period = 4; c.nope_layers = {3};
        break;
      case Arch::GptOss:
        // A window of 16 on layers 0 and 2 (so tests run past it), YaRN over an original context of
        // 64, so a test's positions cross the ramp's range.
        c.n_kv_heads = 2; c.bos_id = -1; c.eos_id = 2;
        gpt_oss_features(c, 16, 64);
        break;
    }
  } else if (preset == "tinyllama-1.1b") {
    c.dim = 2048; c.hidden_dim = 5632; c.n_layers = 22; c.n_heads = 32; c.n_kv_heads = 4;
    c.vocab_size = 32000; c.max_seq_len = 2048;
  } else if (preset == "smollm3-3b") {  // HuggingFaceTB/SmolLM3-3B: every 4th layer without RoPE
    c.dim = 2048; c.hidden_dim = 11008; c.n_layers = 36; c.n_heads = 16; c.n_kv_heads = 4;
    c.vocab_size = 128256; c.max_seq_len = 65536; c.rope_theta = 5000000.0f; c.norm_eps = 1e-6f;
    c.tied_embeddings = true; c.bos_id = -1; c.eos_id = 128012;
    for (int l = 3; l < c.n_layers; l += 4) c.nope_layers.push_back(l);
  } else if (preset == "llama2-7b") {  // meta-llama/Llama-2-7b-hf
    c.dim = 4096; c.hidden_dim = 11008; c.n_layers = 32; c.n_heads = 32; c.n_kv_heads = 32;
    c.vocab_size = 32000; c.max_seq_len = 4096;
  } else if (preset == "mistral-7b") {  // mistralai/Mistral-7B-v0.3: no sliding window
    c.dim = 4096; c.hidden_dim = 14336; c.n_layers = 32; c.n_heads = 32; c.n_kv_heads = 8;
    c.vocab_size = 32768; c.max_seq_len = 32768; c.rope_theta = 1000000.0f;
  } else if (preset == "gemma2-2b") {  // google/gemma-2-2b
    c.dim = 2304; c.hidden_dim = 9216; c.n_layers = 26; c.n_heads = 8; c.n_kv_heads = 4; c.head_dim = 256;
    c.vocab_size = 256000; c.max_seq_len = 8192; c.norm_eps = 1e-6f; c.tied_embeddings = true;
    c.query_pre_attn_scalar = 256.0f; c.attn_logit_softcapping = 50.0f; c.final_logit_softcapping = 30.0f;
    c.sliding_window = 4096; c.sliding_window_period = 2; c.bos_id = 2; c.eos_id = 1;
  } else if (preset == "gemma3-1b") {  // google/gemma-3-1b-pt
    c.dim = 1152; c.hidden_dim = 6912; c.n_layers = 26; c.n_heads = 4; c.n_kv_heads = 1; c.head_dim = 256;
    c.vocab_size = 262144; c.max_seq_len = 32768; c.norm_eps = 1e-6f; c.tied_embeddings = true;
    c.query_pre_attn_scalar = 256.0f; c.sliding_window = 512; c.sliding_window_period = 6;
    c.rope_theta = 1000000.0f; c.rope_local_theta = 10000.0f; c.bos_id = 2; c.eos_id = 1;
  } else if (preset == "qwen3-0.6b") {  // Qwen/Qwen3-0.6B
    c.dim = 1024; c.hidden_dim = 3072; c.n_layers = 28; c.n_heads = 16; c.n_kv_heads = 8; c.head_dim = 128;
    c.vocab_size = 151936; c.max_seq_len = 40960; c.rope_theta = 1000000.0f; c.norm_eps = 1e-6f;
    c.tied_embeddings = true; c.bos_id = -1; c.eos_id = 151645;
  } else if (preset == "olmo2-1b" || preset == "olmo2-7b") {  // allenai/OLMo-2-0425-1B, allenai/OLMo-2-1124-7B
    const bool b1 = preset == "olmo2-1b";
    c.dim = b1 ? 2048 : 4096; c.hidden_dim = b1 ? 8192 : 11008; c.n_layers = b1 ? 16 : 32;
    c.n_heads = b1 ? 16 : 32; c.n_kv_heads = c.n_heads;
    c.vocab_size = 100352; c.max_seq_len = 4096; c.rope_theta = 500000.0f; c.norm_eps = 1e-6f;
    c.bos_id = -1; c.eos_id = 100257;
  } else if (preset == "olmo3-7b") {  // allenai/Olmo-3-1025-7B
    c.dim = 4096; c.hidden_dim = 11008; c.n_layers = 32; c.n_heads = 32; c.n_kv_heads = 32;
    c.vocab_size = 100278; c.max_seq_len = 65536; c.rope_theta = 500000.0f; c.norm_eps = 1e-6f;
    c.sliding_window = 4096; c.sliding_window_period = 4; c.bos_id = -1; c.eos_id = 100257;
    olmo3_yarn(c, 8192);
  } else if (preset == "ministral3-8b") {  // mistralai/Ministral-3-8B-Base-2512: Ministral3Config's defaults
    c.dim = 4096; c.hidden_dim = 14336; c.n_layers = 34; c.n_heads = 32; c.n_kv_heads = 8; c.head_dim = 128;
    c.vocab_size = 131072; c.max_seq_len = 262144; c.rope_theta = 1000000.0f; c.norm_eps = 1e-5f;
    c.rope_scaling = ModelConfig::RopeScaling::Yarn; c.rope_factor = 16.0f; c.rope_original_max_pos = 16384;
    c.rope_attention_factor = 1.0;  // mscale / mscale_all_dim, both 1
    c.query_temperature_beta = 0.1f; c.query_temperature_context = 16384;
  } else if (preset == "mixtral-8x7b") {  // mistralai/Mixtral-8x7B-v0.1: no sliding window
    c.dim = 4096; c.hidden_dim = 14336; c.n_layers = 32; c.n_heads = 32; c.n_kv_heads = 8;
    c.vocab_size = 32000; c.max_seq_len = 32768; c.rope_theta = 1000000.0f;
    c.moe.n_experts = 8; c.moe.n_used = 2; c.moe.expert_hidden_dim = 14336; c.moe.norm_topk_prob = true;
  } else if (preset == "qwen1.5-moe-a2.7b") {  // Qwen/Qwen1.5-MoE-A2.7B
    c.dim = 2048; c.hidden_dim = 5632; c.n_layers = 24; c.n_heads = 16; c.n_kv_heads = 16;
    c.vocab_size = 151936; c.max_seq_len = 8192; c.rope_theta = 1000000.0f; c.norm_eps = 1e-6f;
    c.qkv_bias = true; c.bos_id = -1; c.eos_id = 151643;
    c.moe.n_experts = 60; c.moe.n_used = 4; c.moe.expert_hidden_dim = 1408; c.moe.shared_hidden_dim = 5632;
    c.moe.norm_topk_prob = false;
  } else if (preset == "qwen3-30b-a3b") {  // Qwen/Qwen3-30B-A3B
    c.dim = 2048; c.hidden_dim = 6144; c.n_layers = 48; c.n_heads = 32; c.n_kv_heads = 4; c.head_dim = 128;
    c.vocab_size = 151936; c.max_seq_len = 40960; c.rope_theta = 1000000.0f; c.norm_eps = 1e-6f;
    c.bos_id = -1; c.eos_id = 151645;
    c.moe.n_experts = 128; c.moe.n_used = 8; c.moe.expert_hidden_dim = 768; c.moe.norm_topk_prob = true;
  } else if (preset == "olmoe-1b-7b") {  // allenai/OLMoE-1B-7B-0924
    c.dim = 2048; c.hidden_dim = 1024; c.n_layers = 16; c.n_heads = 16; c.n_kv_heads = 16;
    c.vocab_size = 50304; c.max_seq_len = 4096; c.bos_id = -1; c.eos_id = 50279;
    c.moe.n_experts = 64; c.moe.n_used = 8; c.moe.expert_hidden_dim = 1024; c.moe.norm_topk_prob = false;
  } else if (preset == "phi-4-mini") {  // microsoft/Phi-4-mini-instruct (Phi3ForCausalLM; its window past the context)
    c.dim = 3072; c.hidden_dim = 8192; c.n_layers = 32; c.n_heads = 24; c.n_kv_heads = 8; c.head_dim = 128;
    c.vocab_size = 200064; c.max_seq_len = 131072; c.tied_embeddings = true; c.bos_id = 199999; c.eos_id = 199999;
    c.sliding_window = 262144; c.rotary_dim = 96;
    // LongRoPE x32 over 4096 positions, transformers' attention factor; the 48 + 48 factors are
    // stand-ins of the published lists' size and range (short about 1, long rising to about 40).
    c.rope_scaling = ModelConfig::RopeScaling::LongRope;
    c.rope_original_max_pos = 4096;
    c.rope_factor = 32.0f;
    c.rope_attention_factor = std::sqrt(1.0 + std::log(32.0) / std::log(4096.0));
    for (int i = 0; i < 48; ++i) {
      const double t = i / 47.0;
      c.rope_short_factors.push_back(float(1.0 + 0.05 * t));
      c.rope_long_factors.push_back(float(1.0 + 39.0 * t * t));
    }
  } else if (preset == "gpt-oss-20b") {  // openai/gpt-oss-20b, its experts dequantised
    c.dim = 2880; c.hidden_dim = 2880; c.n_layers = 24; c.n_heads = 64; c.n_kv_heads = 8; c.head_dim = 64;
    c.vocab_size = 201088; c.max_seq_len = 131072; c.bos_id = -1; c.eos_id = 200002;
    c.moe.n_experts = 32; c.moe.n_used = 4; c.moe.expert_hidden_dim = 2880;
    gpt_oss_features(c, 128, 4096);
  } else {  // qwen2.5-0.5b: Qwen/Qwen2.5-0.5B
    c.dim = 896; c.hidden_dim = 4864; c.n_layers = 24; c.n_heads = 14; c.n_kv_heads = 2;
    c.vocab_size = 151936; c.max_seq_len = 32768; c.rope_theta = 1000000.0f; c.norm_eps = 1e-6f;
    c.tied_embeddings = true; c.qkv_bias = true; c.bos_id = -1; c.eos_id = 151643;
  }
  if (moe && preset == "tiny") {
    // Few experts, so every one is chosen in a short test; Qwen2-MoE's shared expert and both
    // Qwen's dense layers (mlp_only_layers) and renormalisation settings differ.
    c.hidden_dim = 192;
    c.moe.n_experts = arch_s == "mixtral" ? 4 : 8;
    c.moe.n_used = arch_s == "qwen3_moe" ? 3 : 2;
    c.moe.expert_hidden_dim = arch_s == "mixtral" ? c.hidden_dim : 96;
    c.moe.norm_topk_prob = arch_s != "qwen2_moe";
    if (arch_s == "qwen2_moe") {
      c.moe.shared_hidden_dim = 192;
      c.moe.dense_layers = {1};
      c.tied_embeddings = false;
    }
    if (arch_s == "qwen3_moe") c.moe.dense_layers = {2};
    if (arch_s == "olmoe" || arch_s == "gpt_oss") {  // every layer sparse, the experts intermediate_size wide
      c.moe.n_used = 3;
      c.moe.norm_topk_prob = false;
      c.hidden_dim = c.moe.expert_hidden_dim;
    }
  }
  if (c.head_dim == 0) c.head_dim = c.dim / c.n_heads;
  c.source = "synthetic:" + arch_s + "/" + preset;
  c.validate();
  return c;
}

namespace {

// Uniform(-a, a) draws (standard deviation a/sqrt(3)) of tensor `index` into n elements of `dst`.
// Values are a function of (seed, index, position) only, so the fill splits across threads
// freely (a 7B model is 6.7e9 draws) and any tensor can be made alone.
void fill_uniform(DType dtype, uint64_t seed, uint64_t index, float mean, float stddev, size_t n, uint8_t* dst) {
  const float a = stddev * std::sqrt(3.0f);
  auto fill = [&](size_t begin, size_t end) {
    std::vector<float> chunk(4096);
    for (size_t i = begin; i < end; i += chunk.size()) {
      const size_t c = std::min(chunk.size(), end - i);
      for (size_t j = 0; j < c; j += 4) {
        const uint64_t ctr = (i + j) / 4;
        const auto r = philox4x32({uint32_t(ctr), uint32_t(ctr >> 32), uint32_t(index), 0x5eedu},
                                  {uint32_t(seed), uint32_t(seed >> 32)});
        for (size_t k = 0; k < 4 && j + k < c; ++k) {
          const float u = float(r[k] >> 8) * (1.0f / 16777216.0f);  // [0, 1)
          chunk[j + k] = mean + a * (2.0f * u - 1.0f);
        }
      }
      from_f32(dtype, chunk.data(), dst + i * dtype_size(dtype), c);
    }
  };
  const size_t threads = n < (size_t(1) << 22) ? 1 : size_t(cores_here(16));
  if (threads == 1) {
    fill(0, n);
    return;
  }
  std::vector<std::thread> pool;
  const size_t per = (n / threads + 4095) / 4096 * 4096;  // whole chunks, so each draw stays where it was
  for (size_t t = 0; t < threads; ++t) {
    const size_t b = std::min(n, t * per), e = t + 1 == threads ? n : std::min(n, (t + 1) * per);
    if (b < e) pool.emplace_back(fill, b, e);
  }
  for (auto& th : pool) th.join();
}

struct Draw {
  uint64_t index;
  float mean, stddev;
};

struct Filler {
  DType dtype;
  uint64_t seed;
  std::vector<std::shared_ptr<const void>>* keep;
  bool shapes_only = false;  // synthetic_shapes: every view points at one shared byte
  std::map<std::string, Draw>* draws = nullptr;  // where shapes-only views record how they are made

  TensorView uniform(const std::string& name, std::vector<int64_t> shape, uint64_t index, float mean, float stddev) {
    TensorView t;
    t.name = name;
    t.dtype = dtype;
    t.shape = std::move(shape);
    if (shapes_only) {
      static const uint8_t no_data = 0;
      t.data = &no_data;
      if (draws != nullptr) (*draws)[name] = {index, mean, stddev};
      return t;
    }
    auto buf = std::make_shared<AlignedBuffer>(t.nbytes());
    fill_uniform(dtype, seed, index, mean, stddev, size_t(t.numel()), static_cast<uint8_t*>(buf->data()));
    t.data = buf->data();
    keep->push_back(buf);
    return t;
  }
};

}  // namespace

namespace {

Checkpoint build_synthetic(const ModelConfig& cfg, DType dtype, uint64_t seed, float final_gain,
                           const Progress& progress, bool shapes_only, std::map<std::string, Draw>* draws = nullptr) {
  cfg.validate();
  Checkpoint ck;
  ck.path = cfg.source.empty() ? "synthetic" : cfg.source;
  ck.format = "synthetic";
  ck.config = cfg;
  ck.qk_layout = RopeLayout::Halves;
  Filler f{dtype, seed, &ck.keepalive, shapes_only, draws};
  uint64_t index = 0;
  auto add = [&](TensorView t) { ck.tensors[t.name] = std::move(t); };
  const int64_t dim = cfg.dim, q = cfg.q_dim(), kv = cfg.kv_dim(), hid = cfg.hidden_dim, vocab = cfg.vocab_size;
  const float w_dim = 1.0f / std::sqrt(float(dim)), w_q = 1.0f / std::sqrt(float(q)),
              w_hid = 1.0f / std::sqrt(float(hid));
  const bool gemma = cfg.gemma_family();
  // Gemma-2 stores w where the gain is (1 + w); the other families store the gain itself.
  const float norm_mean = gemma ? 0.0f : 1.0f;
  // A tied table is also the output head, so it gets the head's scale (Gemma-2 multiplies the
  // embeddings by sqrt(hidden) again on input).
  const float embed_std = cfg.tied_embeddings || gemma ? w_dim : 1.0f;
  add(f.uniform("model.embed_tokens.weight", {vocab, dim}, index++, 0.0f, embed_std));
  for (int l = 0; l < cfg.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const uint64_t input_norm = index++;  // OLMo-2 has none; the other tensors keep their draws
    if (cfg.pre_norms()) add(f.uniform(p + "input_layernorm.weight", {dim}, input_norm, norm_mean, 0.1f));
    add(f.uniform(p + "self_attn.q_proj.weight", {q, dim}, index++, 0.0f, 2.5f * w_dim));
    add(f.uniform(p + "self_attn.k_proj.weight", {kv, dim}, index++, 0.0f, 2.5f * w_dim));
    add(f.uniform(p + "self_attn.v_proj.weight", {kv, dim}, index++, 0.0f, w_dim));
    add(f.uniform(p + "self_attn.o_proj.weight", {dim, q}, index++, 0.0f, w_q));
    add(f.uniform(p + "post_attention_layernorm.weight", {dim}, index++, norm_mean, 0.1f));
    if (!cfg.moe_layer(l)) {
      add(f.uniform(p + "mlp.gate_proj.weight", {hid, dim}, index++, 0.0f, w_dim));
      add(f.uniform(p + "mlp.up_proj.weight", {hid, dim}, index++, 0.0f, w_dim));
      add(f.uniform(p + "mlp.down_proj.weight", {dim, hid}, index++, 0.0f, w_hid));
    } else {
      // Experts draw from their own index range, keyed by (layer, expert, matrix).
      const int64_t eh = cfg.moe.expert_hidden_dim, sh = cfg.moe.shared_hidden_dim;
      const uint64_t base = 2000000 + uint64_t(l) * 100000;
      add(f.uniform(moe_router_name(cfg, l), {cfg.moe.n_experts, dim}, base, 0.0f, 2.0f * w_dim));
      auto swiglu = [&](auto name, int64_t h, uint64_t at) {
        const float w_h = 1.0f / std::sqrt(float(h));
        add(f.uniform(name(ExpertMatrix::Gate), {h, dim}, at, 0.0f, w_dim));
        add(f.uniform(name(ExpertMatrix::Up), {h, dim}, at + 1, 0.0f, w_dim));
        add(f.uniform(name(ExpertMatrix::Down), {dim, h}, at + 2, 0.0f, w_h));
      };
      for (int e = 0; e < cfg.moe.n_experts; ++e)
        swiglu([&](ExpertMatrix m) { return expert_matrix_name(cfg, l, e, m); }, eh, base + 1 + 3 * uint64_t(e));
      if (sh > 0) {
        swiglu([&](ExpertMatrix m) { return shared_expert_name(l, m); }, sh, base + 90000);
        add(f.uniform(shared_expert_gate_name(l), {1, dim}, base + 90003, 0.0f, w_dim));
      }
    }
    // Family extras draw later indices, so a Llama model's tensors do not depend on them.
    if (cfg.qkv_bias) {
      add(f.uniform(p + "self_attn.q_proj.bias", {q}, 1000000 + index++, 0.0f, 0.5f));
      add(f.uniform(p + "self_attn.k_proj.bias", {kv}, 1000000 + index++, 0.0f, 0.5f));
      add(f.uniform(p + "self_attn.v_proj.bias", {kv}, 1000000 + index++, 0.0f, 0.1f));
    }
    if (cfg.qk_norm()) {
      const bool per_head = cfg.qk_norm_per_head();
      add(f.uniform(p + "self_attn.q_norm.weight", {per_head ? cfg.head_dim : q}, 1000000 + index++, norm_mean, 0.1f));
      add(f.uniform(p + "self_attn.k_norm.weight", {per_head ? cfg.head_dim : kv}, 1000000 + index++, norm_mean,
                    0.1f));
    }
    if (!cfg.pre_norms())  // OLMo-2's post-norms (post_attention_layernorm is drawn above)
      add(f.uniform(p + "post_feedforward_layernorm.weight", {dim}, 1000000 + index++, norm_mean, 0.1f));
    if (gemma) {
      add(f.uniform(p + "pre_feedforward_layernorm.weight", {dim}, 1000000 + index++, 0.0f, 0.1f));
      add(f.uniform(p + "post_feedforward_layernorm.weight", {dim}, 1000000 + index++, 0.0f, 0.1f));
    }
    if (cfg.o_bias) add(f.uniform(p + "self_attn.o_proj.bias", {dim}, 1000000 + index++, 0.0f, 0.1f));
    if (cfg.attention_sinks) add(f.uniform(p + "self_attn.sinks", {cfg.n_heads}, 1000000 + index++, 0.0f, 1.0f));
    if (cfg.arch == Arch::GptOss) {
      // Biases wide enough that some gate/up values pass the clamp (swiglu_limit 7).
      const uint64_t base = 3000000 + uint64_t(l) * 100000;
      const int64_t eh = cfg.moe.expert_hidden_dim;
      add(f.uniform(moe_router_bias_name(cfg, l), {cfg.moe.n_experts}, base, 0.0f, 0.5f));
      for (int e = 0; e < cfg.moe.n_experts; ++e) {
        const uint64_t at = base + 1 + 3 * uint64_t(e);
        add(f.uniform(expert_bias_name(cfg, l, e, ExpertMatrix::Gate), {eh}, at, 0.0f, 4.0f));
        add(f.uniform(expert_bias_name(cfg, l, e, ExpertMatrix::Up), {eh}, at + 1, 0.0f, 4.0f));
        add(f.uniform(expert_bias_name(cfg, l, e, ExpertMatrix::Down), {dim}, at + 2, 0.0f, 0.1f));
      }
    }
    if (progress) progress(size_t(l) + 1, size_t(cfg.n_layers));
  }
  add(f.uniform("model.norm.weight", {dim}, index++, final_gain - (gemma ? 1.0f : 0.0f), 0.1f * final_gain));
  if (!cfg.tied_embeddings) add(f.uniform("lm_head.weight", {vocab, dim}, index++, 0.0f, w_dim));
  return ck;
}

}  // namespace

Checkpoint synthesize_checkpoint(const ModelConfig& cfg, DType dtype, uint64_t seed, float final_gain,
                                 const Progress& progress) {
  return build_synthetic(cfg, dtype, seed, final_gain, progress, false);
}

Checkpoint synthetic_shapes(const ModelConfig& cfg, DType dtype) {
  Checkpoint ck = build_synthetic(cfg, dtype, 0, kSynthFinalGain, {}, true);
  ck.path = "shapes-only:" + ck.path;
  return ck;
}

DeferredSynthetic synthesize_deferred(const ModelConfig& cfg, DType dtype, uint64_t seed, float final_gain) {
  auto draws = std::make_shared<std::map<std::string, Draw>>();
  DeferredSynthetic d;
  d.shapes = build_synthetic(cfg, dtype, seed, final_gain, {}, true, draws.get());
  d.make = [draws, dtype, seed](const TensorView& shape, std::vector<std::shared_ptr<AlignedBuffer>>& keep) {
    const auto it = draws->find(shape.name);
    if (it == draws->end()) fail("synthetic: no tensor '{}'", shape.name);
    TensorView t = shape;
    auto buf = std::make_shared<AlignedBuffer>(t.nbytes());
    fill_uniform(dtype, seed, it->second.index, it->second.mean, it->second.stddev, size_t(t.numel()),
                 static_cast<uint8_t*>(buf->data()));
    t.data = buf->data();
    keep.push_back(std::move(buf));
    return t;
  };
  return d;
}

}  // namespace kvp
