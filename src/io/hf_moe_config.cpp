#include "io/hf_moe_config.h"

#include <algorithm>

#include "core/error.h"

namespace kvp {

using nlohmann::json;

namespace {

struct MoeFamily {
  const char* model_type;
  const char* class_name;
  Arch arch;
};
const MoeFamily kFamilies[] = {
    {"mixtral", "MixtralForCausalLM", Arch::Mistral},
    {"qwen2_moe", "Qwen2MoeForCausalLM", Arch::Qwen2},
    {"qwen3_moe", "Qwen3MoeForCausalLM", Arch::Qwen3},
    {"olmoe", "OlmoeForCausalLM", Arch::Olmoe},
    {"gpt_oss", "GptOssForCausalLM", Arch::GptOss},
};

const MoeFamily& family_of(const ModelConfig& c) {
  if (c.mixtral_names()) return kFamilies[0];
  if (c.arch == Arch::Olmoe) return kFamilies[3];
  if (c.arch == Arch::GptOss) return kFamilies[4];
  return c.arch == Arch::Qwen2 ? kFamilies[1] : kFamilies[2];
}

bool present(const json& j, const char* k) { return j.contains(k) && !j.at(k).is_null(); }

int get_int(const json& j, const char* k, int dflt, const std::string& src) {
  if (!present(j, k)) return dflt;
  const json& v = j.at(k);
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (int64_t(1) << 30))
    fail("{}: field '{}' must be a non-negative integer, got {}", src, k, v.dump());
  return int(v.get<int64_t>());
}

// The expert count under either name: transformers v5's attribute maps write Mixtral's as
// num_local_experts and Qwen3-MoE's as num_local_experts too (v4.51: num_experts), OLMoE's as
// num_experts; a file that gives both must agree.
int expert_count(const json& j, const char* name, const char* alias, int dflt, const std::string& src) {
  const int a = get_int(j, name, -1, src), b = get_int(j, alias, -1, src);
  if (a >= 0 && b >= 0 && a != b)
    fail("{}: fields '{}' = {} and '{}' = {} disagree on the number of experts", src, name, a, alias, b);
  return a >= 0 ? a : b >= 0 ? b : dflt;
}

// norm_topk_prob: false where absent (Qwen-MoE's and OLMoE's class default).
bool norm_topk_prob(const json& j, const std::string& src) {
  if (present(j, "norm_topk_prob") && !j["norm_topk_prob"].is_boolean())
    fail("{}: field 'norm_topk_prob' must be true or false, got {}", src, j["norm_topk_prob"].dump());
  return present(j, "norm_topk_prob") && j["norm_topk_prob"].get<bool>();
}

}  // namespace

std::optional<Arch> hf_moe_family(const json& j) {
  const bool typed = j.contains("model_type") && j["model_type"].is_string();
  for (const MoeFamily& f : kFamilies) {
    if (typed && j["model_type"] == f.model_type) return f.arch;
    if (!typed && j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
        j["architectures"][0] == f.class_name)
      return f.arch;
  }
  return std::nullopt;
}

const char* hf_moe_class_name(const ModelConfig& c) { return family_of(c).class_name; }
std::string hf_moe_model_type(const ModelConfig& c) { return family_of(c).model_type; }

void read_hf_moe_fields(const json& j, ModelConfig& c, const std::string& source) {
  MoeConfig& m = c.moe;
  if (c.mixtral_names()) {
    // MixtralConfig: num_local_experts 8, num_experts_per_tok 2; every layer sparse, its experts
    // intermediate_size wide, their probabilities always renormalised.
    m.n_experts = expert_count(j, "num_local_experts", "num_experts", 8, source);
    m.n_used = get_int(j, "num_experts_per_tok", 2, source);
    m.expert_hidden_dim = c.hidden_dim;
    m.norm_topk_prob = true;
  } else if (c.arch == Arch::GptOss) {
    // GptOssConfig: 128 experts, 4 a token (the original config's experts_per_token), each
    // intermediate_size wide, every layer sparse; a softmax over the top-k router logits, and the
    // experts' SwiGLU clamped at swiglu_limit (7.0).
    m.n_experts = expert_count(j, "num_local_experts", "num_experts", 128, source);
    m.n_used = get_int(j, "num_experts_per_tok", get_int(j, "experts_per_token", 4, source), source);
    if (present(j, "experts_per_token") && get_int(j, "experts_per_token", 0, source) != m.n_used)
      fail("{}: fields 'num_experts_per_tok' = {} and 'experts_per_token' = {} disagree", source, m.n_used,
           j["experts_per_token"].dump());
    m.expert_hidden_dim = c.hidden_dim;
    m.norm_topk_prob = false;
    m.routing = MoeConfig::Routing::TopKThenSoftmax;
    const json limit = present(j, "swiglu_limit") ? j["swiglu_limit"] : json(7.0);
    if (!limit.is_number() || !(limit.get<double>() > 0.0) || limit.get<double>() > 1e30)
      fail("{}: field 'swiglu_limit' must be a positive number, got {}", source, limit.dump());
    m.swiglu_limit = float(limit.get<double>());
  } else if (c.arch == Arch::Olmoe) {
    // OlmoeConfig (v4.51): 64 experts, 8 a token, intermediate_size wide, every layer sparse, not
    // renormalised.
    m.n_experts = expert_count(j, "num_experts", "num_local_experts", 64, source);
    m.n_used = get_int(j, "num_experts_per_tok", 8, source);
    m.expert_hidden_dim = c.hidden_dim;
    m.norm_topk_prob = norm_topk_prob(j, source);
    // clip_qkv clamps q, k and v (OLMoE-1B-7B has none): kvparity has no clamp to apply.
    if (present(j, "clip_qkv"))
      fail("{}: clipped q/k/v are not supported (config.json field clip_qkv = {})", source, j["clip_qkv"].dump());
  } else {
    // Qwen2MoeConfig (60 experts, 4 a token, 1408 wide, shared 5632) and Qwen3MoeConfig (128, 8,
    // 768, none); neither renormalises by default.
    const bool qwen2 = c.arch == Arch::Qwen2;
    m.n_experts = expert_count(j, "num_experts", "num_local_experts", qwen2 ? 60 : 128, source);
    m.n_used = get_int(j, "num_experts_per_tok", qwen2 ? 4 : 8, source);
    m.expert_hidden_dim = get_int(j, "moe_intermediate_size", qwen2 ? 1408 : 768, source);
    m.norm_topk_prob = norm_topk_prob(j, source);
    m.shared_hidden_dim = qwen2 ? get_int(j, "shared_expert_intermediate_size", 5632, source) : 0;
    // Qwen2MoeConfig's qkv_bias (default true) is the biases kvparity's Qwen2 attention always has.
    if (qwen2 && present(j, "qkv_bias") && j["qkv_bias"] != true)
      fail("{}: Qwen2-MoE without q/k/v biases is not supported (config.json field qkv_bias = {})", source,
           j["qkv_bias"].dump());
    if (!qwen2 && get_int(j, "shared_expert_intermediate_size", 0, source) > 0)
      fail("{}: Qwen3-MoE has no shared expert (config.json field shared_expert_intermediate_size)", source);
    m.sparse_step = get_int(j, "decoder_sparse_step", 1, source);
    if (m.sparse_step < 1) fail("{}: field 'decoder_sparse_step' must be at least 1", source);
    if (present(j, "mlp_only_layers")) {
      const json& d = j["mlp_only_layers"];
      if (!d.is_array()) fail("{}: field 'mlp_only_layers' must be a list of layer indices", source);
      for (const json& l : d) {
        if (!l.is_number_integer() || l.get<int64_t>() < 0 || l.get<int64_t>() >= c.n_layers)
          fail("{}: field 'mlp_only_layers' holds {}, not a layer index (0..{})", source, l.dump(), c.n_layers - 1);
        m.dense_layers.push_back(int(l.get<int64_t>()));
      }
      std::sort(m.dense_layers.begin(), m.dense_layers.end());
      m.dense_layers.erase(std::unique(m.dense_layers.begin(), m.dense_layers.end()), m.dense_layers.end());
    }
  }
  // (router_jitter_noise is left unread: only training adds the noise.)
  if (m.n_experts == 0) fail("{}: a mixture of experts with no experts (num_experts = 0)", source);
}

void write_hf_moe_fields(json& j, const ModelConfig& c, const std::string& path) {
  const MoeConfig& m = c.moe;
  j["architectures"] = json::array({hf_moe_class_name(c)});
  j["model_type"] = hf_moe_model_type(c);
  j["num_experts_per_tok"] = m.n_used;
  j["output_router_logits"] = false;
  if (c.mixtral_names()) {
    if (m.expert_hidden_dim != c.hidden_dim || !m.dense_layers.empty() || m.sparse_step != 1 || !m.norm_topk_prob)
      fail("{}: Mixtral's experts are intermediate_size wide, every layer sparse and renormalised; this model "
           "has no MixtralConfig form",
           path);
    if (c.rope_scaling != ModelConfig::RopeScaling::None)
      fail("{}: MixtralConfig takes no rope_scaling; this model's scaled RoPE has no config.json form", path);
    j["num_local_experts"] = m.n_experts;
    j["router_aux_loss_coef"] = 0.02;
    j["router_jitter_noise"] = 0.0;
    j.erase("rope_scaling");
    j.erase("attention_bias");
    j.erase("mlp_bias");
    j.erase("pretraining_tp");
    return;
  }
  if (c.arch == Arch::GptOss) {
    if (m.expert_hidden_dim != c.hidden_dim || !m.dense_layers.empty() || m.sparse_step != 1 ||
        m.routing != MoeConfig::Routing::TopKThenSoftmax || m.swiglu_alpha != 1.702f || !(m.swiglu_limit > 0.0f))
      fail("{}: GPT-OSS's experts are intermediate_size wide, in every layer, routed by a softmax over the top k, "
           "their SwiGLU clamped (alpha 1.702); this model has no GptOssConfig form",
           path);
    j["num_local_experts"] = m.n_experts;
    j["experts_per_token"] = m.n_used;
    j["swiglu_limit"] = m.swiglu_limit;
    j["router_aux_loss_coef"] = 0.9;
    return;
  }
  j["num_experts"] = m.n_experts;
  if (c.arch == Arch::Olmoe) {
    if (m.expert_hidden_dim != c.hidden_dim || !m.dense_layers.empty() || m.sparse_step != 1 || m.shared_hidden_dim > 0)
      fail("{}: OLMoE's experts are intermediate_size wide, every layer sparse, none shared; this model has no "
           "OlmoeConfig form",
           path);
    j["norm_topk_prob"] = m.norm_topk_prob;
    j["clip_qkv"] = nullptr;
    j["router_aux_loss_coef"] = 0.01;
    return;
  }
  j["moe_intermediate_size"] = m.expert_hidden_dim;
  j["norm_topk_prob"] = m.norm_topk_prob;
  j["decoder_sparse_step"] = m.sparse_step;
  j["mlp_only_layers"] = m.dense_layers;
  j["router_aux_loss_coef"] = 0.001;
  if (c.arch == Arch::Qwen2) {
    if (m.shared_hidden_dim <= 0)
      fail("{}: Qwen2-MoE always has a shared expert; this model has none (no Qwen2MoeConfig form)", path);
    j["shared_expert_intermediate_size"] = m.shared_hidden_dim;
  }
}

}  // namespace kvp
