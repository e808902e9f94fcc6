// The Python module `kvparity._kvparity` (re-exported by kvparity/__init__.py): a model as a
// Python object handing logits and activations over as numpy arrays, generation with the CLI's
// --json keys, and the lab's compare returning its summary. It talks only to the runtime and lab
// APIs the command-line tool uses, so both give the same numbers.
//
// Model work runs with the GIL released; the generation loops check for Ctrl-C once per step
// (runtime/interrupt.h), which surfaces as KeyboardInterrupt.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>

#include "core/build_info.h"
#include "core/error.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "lab/prompt_set.h"
#include "model/model.h"
#include "python_arguments.h"
#include "runtime/chat_for_model.h"
#include "runtime/generator.h"
#include "runtime/interrupt.h"
#include "runtime/sampler.h"
#include "runtime/tokenizer_for_model.h"
#include "study_calls.h"

namespace py = pybind11;

namespace kvp::python {
namespace {

// A vector handed to numpy without a copy: the array owns it through a capsule.
py::array_t<float> to_numpy(std::vector<float>&& v, std::vector<py::ssize_t> shape) {
  auto* owned = new std::vector<float>(std::move(v));
  py::capsule free_when_done(owned, [](void* p) { delete static_cast<std::vector<float>*>(p); });
  return py::array_t<float>(shape, owned->data(), free_when_done);
}

// Ctrl-C between steps: Python's handler sets a flag the interpreter checks here.
void check_python_signals() {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

// The TransformerLens name of a hook point of a layer, or "" for points that have none.
std::string tl_name(HookPoint p, int layer) {
  const std::string b = "blocks." + std::to_string(layer) + ".";
  switch (p) {
    case HookPoint::Embed: return "hook_embed";
    case HookPoint::ResidPre: return b + "hook_resid_pre";
    case HookPoint::AttnOut: return b + "hook_attn_out";
    case HookPoint::ResidMid: return b + "hook_resid_mid";
    case HookPoint::MlpOut: return b + "hook_mlp_out";
    case HookPoint::ResidPost: return b + "hook_resid_post";
    case HookPoint::QPre: return b + "attn.hook_q";
    case HookPoint::KPre: return b + "attn.hook_k";
    case HookPoint::Q: return b + "attn.hook_rot_q";
    case HookPoint::K: return b + "attn.hook_rot_k";
    case HookPoint::V: return b + "attn.hook_v";
    case HookPoint::FinalNorm: return "ln_final.hook_normalized";
    case HookPoint::Logits: return "";
    // No TransformerLens name for a router's logits; kvparity's own, beside the MLP's.
    case HookPoint::RouterLogits: return b + "mlp.hook_router_logits";
  }
  return "";
}

struct NamedHook {
  HookPoint point;
  int layer;  // -1 for the model's own points (embedding, final norm)
  std::string name;
};

// Every hook point of the model that has a TransformerLens name, in the order the pass reaches
// them (the enum's order is not the pass's): the embedding, each layer's, the final norm.
std::vector<NamedHook> named_hooks(const ModelConfig& c) {
  static constexpr HookPoint kLayerOrder[] = {HookPoint::ResidPre, HookPoint::QPre,         HookPoint::KPre,
                                              HookPoint::Q,        HookPoint::K,            HookPoint::V,
                                              HookPoint::AttnOut,  HookPoint::ResidMid,     HookPoint::RouterLogits,
                                              HookPoint::MlpOut,   HookPoint::ResidPost};
  std::vector<NamedHook> out{{HookPoint::Embed, -1, tl_name(HookPoint::Embed, -1)}};
  for (int l = 0; l < c.n_layers; ++l)
    for (const HookPoint point : kLayerOrder)
      if (point != HookPoint::RouterLogits || c.moe_layer(l)) out.push_back({point, l, tl_name(point, l)});
  out.push_back({HookPoint::FinalNorm, -1, tl_name(HookPoint::FinalNorm, -1)});
  return out;
}

// Keeps the rows of the points whose names pass `keep` (decided once per name, with the GIL); the
// dict lists them in the pass's order, as TransformerLens's cache does.
class Capture final : public ForwardHooks {
 public:
  Capture(const ModelConfig& c, const std::vector<NamedHook>& hooks,
          const std::function<bool(const std::string&)>& keep)
      : c_(c) {
    py::gil_scoped_acquire gil;
    for (const auto& h : hooks)
      if (keep(h.name)) {
        wanted_[{int(h.point), h.layer}] = h.name;
        order_.push_back(h.name);
      }
  }
  bool wants(HookPoint p, int layer) const override { return wanted_.count({int(p), layer}) > 0; }
  bool writes(HookPoint, int) const override { return false; }
  void on(const HookSite& s, float* d) override {
    auto it = wanted_.find({int(s.point), s.layer});
    if (it == wanted_.end()) return;
    auto& out = rows_[it->second];
    out.insert(out.end(), d, d + size_t(s.rows) * s.width);
    widths_[it->second] = s.width;
  }
  py::dict take(int T) {
    py::dict d;
    for (const std::string& name : order_) {
      const auto it = rows_.find(name);
      if (it == rows_.end()) continue;
      std::vector<float>& rows = it->second;
      const int w = widths_[name];
      const bool per_head = name.find(".attn.") != std::string::npos;
      std::vector<py::ssize_t> shape{T, w};
      if (per_head) shape = {T, w / c_.head_dim, c_.head_dim};
      d[py::str(name)] = to_numpy(std::move(rows), shape);
    }
    return d;
  }

 private:
  const ModelConfig& c_;
  std::map<std::pair<int, int>, std::string> wanted_;
  std::vector<std::string> order_;  // the wanted names in the pass's order
  std::map<std::string, std::vector<float>> rows_;
  std::map<std::string, int> widths_;
};

class PyModel {
 public:
  PyModel(const std::string& path, const std::optional<std::string>& tokenizer, const std::string& dtype,
          const std::optional<std::string>& kv_dtype, const std::string& kernels, int threads, const std::string& device,
          const std::string& simd) {
    if (dtype != "fp32" && dtype != "fp16" && dtype != "bf16")
      fail_usage("dtype='{}': expected 'fp32', 'fp16' or 'bf16'", dtype);
    if (kernels != "reference" && kernels != "standard" && kernels != "invariant" && kernels != "portable")
      fail_usage("kernels='{}': expected 'reference', 'standard', 'invariant' or 'portable'", kernels);
    if (threads < 0 || threads > 256) fail_usage("threads={}: expected 0 (every core) to 256", threads);
    opts_.kernels = parse_policy(kernels);
    opts_.device = parse_device(device, "device");
    require_device(opts_.device, "device");
    opts_.simd = parse_simd(simd, "simd");
    require_simd(opts_.simd, "simd");
    opts_.threads = threads > 0 ? threads : cores_here(256);
    if (opts_.kernels == KernelPolicy::Reference) opts_.threads = 1;
    const DType dt = parse_dtype(dtype);
    if (kv_dtype) {
      const auto kv = parse_kv_type(*kv_dtype);
      if (!kv) fail_usage("kv_dtype='{}': expected fp32, fp16, bf16, q8_0, q4_0, fp8_e4m3 or fp8_e5m2", *kv_dtype);
      opts_.kv_dtype = *kv;
    } else {
      opts_.kv_dtype = KvType::of(dt);
    }
    py::gil_scoped_release release;
    model_ = Model::load(path, dt);
    // A model without a tokenizer still runs on token ids; text needs one.
    tokenizer_given_ = tokenizer.value_or("");
    try {
      tok_ = tokenizer_for_model(*model_, tokenizer_given_);
    } catch (const Error& e) {
      if (tokenizer) throw;
      tok_error_ = e.what();
    }
    engine_ = std::make_unique<Engine>(model_, opts_);
  }

  // An fp32 field as the shortest decimal that reads back to it (1e-05, not 9.999999747e-06): what
  // config.json said, and float(x) in numpy gives the engine's value back.
  static double shortest(float f) { return std::stod(fmt::format("{}", f)); }

  py::dict config() const {
    const ModelConfig& c = model_->config;
    py::dict d;
    d["arch"] = arch_name(c.arch);
    d["family"] = family_name(c);
    d["n_experts"] = c.moe.n_experts;
    d["experts_per_token"] = c.moe.n_used;
    d["n_layers"] = c.n_layers;
    d["hidden_size"] = c.dim;
    d["intermediate_size"] = c.hidden_dim;
    d["n_heads"] = c.n_heads;
    d["n_kv_heads"] = c.n_kv_heads;
    d["head_dim"] = c.head_dim;
    d["vocab_size"] = c.vocab_size;
    d["context_length"] = c.max_seq_len;
    d["rope_theta"] = shortest(c.rope_theta);
    d["norm_eps"] = shortest(c.norm_eps);
    d["sliding_window"] = c.sliding_window;
    d["tied_embeddings"] = c.tied_embeddings;
    d["bos_id"] = c.bos_id;
    d["eos_id"] = c.eos_id;
    d["more_eos_ids"] = c.more_eos_ids;
    d["format"] = model_->format;
    d["dtype"] = std::string(dtype_name(model_->dtype));
    d["kv_dtype"] = opts_.kv_dtype.name();
    d["kernels"] = policy_name(opts_.kernels);
    d["threads"] = opts_.threads;
    d["device"] = device_name(opts_.device);
    d["simd"] = simd_name(opts_.simd);
    return d;
  }

  std::vector<int> tokenize(const std::string& text, bool bos) const { return tokenizer().encode(text, bos); }
  // messages: a str (one user turn) or a list of {"role", "content"} dicts, as transformers takes them.
  py::object apply_chat_template(const py::object& messages, const py::object& chat_template, bool tokenize,
                                 const py::object& enable_thinking) const {
    if (chat_template.is_none()) fail_usage("chat_template=None: give 'auto' or a format's name");
    const std::optional<ChatEncoder> chat = chat_encoder(chat_template, py::none(), enable_thinking);
    std::vector<ChatMessage> m;
    if (py::isinstance<py::str>(messages)) {
      m.push_back({"user", messages.cast<std::string>()});
    } else {
      if (!py::isinstance<py::sequence>(messages))
        throw_type_error("messages", "a str or a list of {'role': ..., 'content': ...} dicts", messages);
      const auto seq = py::reinterpret_borrow<py::sequence>(messages);
      for (size_t i = 0; i < seq.size(); ++i) {
        const std::string what = fmt::format("messages[{}]", i);
        if (!py::isinstance<py::dict>(seq[i])) throw_type_error(what, "a dict with 'role' and 'content'", seq[i]);
        const auto d = py::reinterpret_borrow<py::dict>(seq[i]);
        for (const char* k : {"role", "content"})
          if (!d.contains(k)) fail_usage("{}: no '{}' key", what, k);
        m.push_back({cast_arg<std::string>(d["role"], what + "['role']", "a str"),
                     cast_arg<std::string>(d["content"], what + "['content']", "a str")});
      }
    }
    if (!tokenize) return py::str(chat->render(m));
    return py::cast(chat->encode(m));
  }
  std::string detokenize(const std::vector<int>& ids) const {
    check_ids(ids);
    return tokenizer().decode(ids);
  }

  py::array_t<float> forward(const std::vector<int>& ids) {
    return run_with_cache(ids, py::list(), false, std::nullopt).first;
  }

  // cache=False: one cache-free pass over ids. cache=True: the cache-ON path, ids[:prefill] in one
  // pass (prefill default: all but the last token), then one row per step, every row's
  // activations kept as the steps compute them.
  std::pair<py::array_t<float>, py::dict> run_with_cache(const std::vector<int>& ids, const py::object& names,
                                                         bool cache, std::optional<int> prefill) {
    check_ids(ids);
    if (ids.empty()) fail_usage("ids: give at least one token");
    const int T = int(ids.size()), V = model_->config.vocab_size;
    const int P = prefill.value_or(std::max(1, T - 1));
    if (cache && (P < 1 || P > T)) fail_usage("prefill={}: expected 1 to len(ids) = {}", P, T);
    if (!cache && prefill) fail_usage("prefill: only with cache=True (the cache-free pass has no prefill)");
    if (T > engine_->cache().capacity())
      fail_usage("ids: {} tokens do not fit the context ({} positions)", T, engine_->cache().capacity());
    const std::vector<NamedHook> hooks = named_hooks(model_->config);
    std::vector<std::string> hook_names;
    for (const auto& h : hooks) hook_names.push_back(h.name);
    Capture cap(model_->config, hooks, read_hook_filter(names, hook_names, model_->config.n_layers));
    std::vector<float> logits(size_t(T) * V);
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(busy_);
      ForwardOptions fo;
      fo.all_logits = true;
      fo.hooks = &cap;
      if (!cache) {
        const float* l = engine_->forward_uncached(ids.data(), T, fo);
        std::copy(l, l + logits.size(), logits.begin());
      } else {
        engine_->cache().clear();
        const float* l = engine_->forward(ids.data(), P, 0, fo);
        std::copy(l, l + size_t(P) * V, logits.begin());
        for (int p = P; p < T; ++p) {
          check_interrupt();
          l = engine_->forward(ids.data() + p, 1, p, fo);
          std::copy(l, l + V, logits.begin() + std::ptrdiff_t(p) * V);
        }
      }
    }
    return {to_numpy(std::move(logits), {T, V}), cap.take(T)};
  }

  py::dict generate(const py::object& prompt, int max_new_tokens, bool cache, const SamplingArgs& sampling,
                    const py::object& stop, bool return_logits, bool ignore_eos, const py::object& chat_template,
                    const py::object& system, const py::object& enable_thinking) {
    const std::optional<ChatEncoder> chat = chat_encoder(chat_template, system, enable_thinking);
    const std::vector<int> ids = prompt_ids(prompt, "prompt", chat);
    GenerationConfig g = generation_config(max_new_tokens, cache, sampling, stop, ignore_eos);
    if (chat) g.turn_end_ids = chat->turn_end_ids();
    std::vector<float> logits;
    std::vector<int> experts;
    GenerationResult r;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(busy_);
      const int V = model_->config.vocab_size;
      r = engine_->generate(ids, g, tok_.get(), [&](const StepInfo& s) {
        if (return_logits) logits.insert(logits.end(), s.logits, s.logits + V);
        experts.insert(experts.end(), s.experts, s.experts + s.experts_size);
      });
    }
    return result_dict(r, g, return_logits, std::move(logits), std::move(experts));
  }

  // Every prompt in one batch, in lockstep (the CLI's generate --batch-size): sequence b draws under
  // sequence id b; with the invariant kernels each comes out bitwise as if generated alone.
  py::list generate_batch(const py::object& prompts, int max_new_tokens, bool cache, const SamplingArgs& sampling,
                          const py::object& stop, bool return_logits, bool ignore_eos, const py::object& chat_template,
                          const py::object& system, const py::object& enable_thinking) {
    const std::optional<ChatEncoder> chat = chat_encoder(chat_template, system, enable_thinking);
    if (py::isinstance<py::str>(prompts) || !py::isinstance<py::sequence>(prompts))
      throw_type_error("prompts", "a list of prompts (each a str or a list of token ids)", prompts);
    const auto seq = py::reinterpret_borrow<py::sequence>(prompts);
    if (seq.size() == 0) fail_usage("prompts: give at least one prompt");
    std::vector<std::vector<int>> ids;
    for (size_t i = 0; i < seq.size(); ++i) ids.push_back(prompt_ids(seq[i], fmt::format("prompts[{}]", i), chat));
    GenerationConfig g = generation_config(max_new_tokens, cache, sampling, stop, ignore_eos);
    if (chat) g.turn_end_ids = chat->turn_end_ids();
    std::vector<std::vector<float>> logits(ids.size());
    std::vector<std::vector<int>> experts(ids.size());
    std::vector<GenerationResult> results;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(busy_);
      const int V = model_->config.vocab_size;
      results = engine_->generate_batch(ids, g, tok_.get(), [&](int b, const StepInfo& s) {
        if (return_logits) logits[size_t(b)].insert(logits[size_t(b)].end(), s.logits, s.logits + V);
        experts[size_t(b)].insert(experts[size_t(b)].end(), s.experts, s.experts + s.experts_size);
      });
    }
    py::list out;
    for (size_t b = 0; b < results.size(); ++b) {
      py::dict d = result_dict(results[b], g, return_logits, std::move(logits[b]), std::move(experts[b]));
      d["sequence"] = b;
      out.append(d);
    }
    return out;
  }

  // A weight by its canonical (Hugging Face) name, as fp32 values of the compute dtype.
  py::array_t<float> weight(const std::string& name) const {
    const ModelWeights& W = model_->weights;
    const TensorView* t = name == "model.norm.weight"          ? &W.final_norm
                          : name == "lm_head.weight"           ? &W.lm_head
                          : name == "model.embed_tokens.weight" ? &W.embed
                                                                : nullptr;
    if (t == nullptr)
      fail_usage("weight '{}': available are model.embed_tokens.weight, model.norm.weight, lm_head.weight", name);
    std::vector<float> v(size_t(t->numel()));
    if (t->quantized())
      dequantize_blocks(t->quant, t->data, v.size() / block_elems(t->quant), v.data());
    else
      to_f32(t->dtype, t->data, v.data(), v.size());
    std::vector<py::ssize_t> shape(t->shape.begin(), t->shape.end());
    return to_numpy(std::move(v), shape);
  }

 private:
  const Tokenizer& tokenizer() const {
    if (tok_ == nullptr) fail("{}", tok_error_);
    return *tok_;
  }
  // A prompt as text (encoded with the model's BOS rule; ids past the embedding mean another
  // model's tokenizer, an error) or as token ids (each one a token of the model, else ValueError).
  // With a chat template, text is one user turn.
  std::vector<int> prompt_ids(const py::handle& prompt, const std::string& what,
                              const std::optional<ChatEncoder>& chat) const {
    std::vector<int> ids;
    if (py::isinstance<py::str>(prompt)) {
      const std::string text = prompt.cast<std::string>();
      ids = chat ? chat->encode({{"user", text}}) : tokenizer().encode(text, tokenizer().default_add_bos());
      require_embedding_rows(ids, model_->config.vocab_size, what, model_->path);
    } else {
      ids = cast_arg<std::vector<int>>(prompt, what, "a str or a list of token ids");
      check_ids(ids);
    }
    return ids;
  }
  // chat_template= of generate and apply_chat_template: None (none), 'auto' or a format's name;
  // system=: None, or a system message for it.
  static bool thinking_arg(const py::object& v) {
    if (!py::isinstance<py::bool_>(v)) throw_type_error("enable_thinking", "a bool or None", v);
    return v.cast<bool>();
  }
  std::optional<ChatEncoder> chat_encoder(const py::object& choice, const py::object& system,
                                          const py::object& enable_thinking) const {
    const ChatChoice c = chat_choice(
        choice.is_none() ? "none" : cast_arg<std::string>(choice, "chat_template", "a str"),
        system.is_none() ? std::nullopt : std::optional<std::string>(cast_arg<std::string>(system, "system", "a str")),
        enable_thinking.is_none() ? std::nullopt : std::optional<bool>(thinking_arg(enable_thinking)));
    return ChatEncoder::of(chat_template_for(*model_, tokenizer_given_, c), tokenizer(), model_->path);
  }
  static GenerationConfig generation_config(int max_new_tokens, bool cache, const SamplingArgs& sampling,
                                            const py::object& stop, bool ignore_eos) {
    if (max_new_tokens < 0) fail_usage("max_new_tokens={}: expected 0 or more", max_new_tokens);
    const Sampling s = read_sampling(sampling, /*many=*/false);
    GenerationConfig g;
    g.max_new_tokens = max_new_tokens;
    g.cache = cache ? CacheMode::On : CacheMode::Off;
    g.sampler = s.samplers.front();
    g.seed = s.seed;
    g.stop_at_eos = !ignore_eos;
    g.stop_strings = read_stop_strings(stop);
    return g;
  }
  // The CLI's --json keys (and `logits` [steps, vocab] when asked; a mixture of experts' routing
  // `experts` [steps, layers, k], -1 in dense layers).
  py::dict result_dict(const GenerationResult& r, const GenerationConfig& g, bool return_logits,
                       std::vector<float>&& logits, std::vector<int>&& experts) const {
    py::dict d;
    d["prompt_ids"] = r.prompt_ids;
    d["output_ids"] = r.output_ids;
    d["text"] = r.text;
    d["stop_reason"] = r.stop_reason;
    if (r.stop_reason == "stop_string") d["stop_string"] = r.stop_string;
    d["dropped_ids"] = r.dropped_ids;
    d["dtype"] = std::string(dtype_name(model_->dtype));
    d["kv_dtype"] = opts_.kv_dtype.name();
    d["kernels"] = policy_name(opts_.kernels);
    d["cache"] = g.cache == CacheMode::On ? "on" : "off";
    d["sampler"] = g.sampler.describe();
    d["seed"] = g.seed;
    if (return_logits) {
      const py::ssize_t steps = py::ssize_t(logits.size() / size_t(model_->config.vocab_size));
      d["logits"] = to_numpy(std::move(logits), {steps, model_->config.vocab_size});
    }
    if (const ModelConfig& c = model_->config; c.is_moe()) {
      const py::ssize_t L = c.n_layers, k = c.moe.n_used;
      py::array_t<int32_t> e({py::ssize_t(experts.size()) / (L * k), L, k});
      std::copy(experts.begin(), experts.end(), e.mutable_data());
      d["experts"] = e;
    }
    return d;
  }
  void check_ids(const std::vector<int>& ids) const {
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] < 0 || ids[i] >= model_->config.vocab_size)
        fail_usage("ids[{}] = {} is not a token of this model (vocabulary {})", i, ids[i], model_->config.vocab_size);
  }

  EngineOptions opts_;
  std::shared_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
  std::string tok_error_;        // why there is no tokenizer
  std::string tokenizer_given_;  // the tokenizer= path, where auto looks for tokenizer_config.json first
  std::unique_ptr<Engine> engine_;
  // The engine's cache and buffers serve one call at a time; with the GIL released, two Python
  // threads could otherwise share them.
  std::mutex busy_;
};

}  // namespace
}  // namespace kvp::python

PYBIND11_MODULE(_kvparity, m) {
  using namespace kvp;
  using namespace kvp::python;
  m.doc() = "kvparity's engine and divergence lab (the C++ extension; see the kvparity package).";
  m.attr("__version__") = version_number();
  // What the results folders record in built_by and `kvparity --version` prints.
  m.attr("build") = build_description();
  static py::exception<Error> error(m, "Error");
  error.doc() = "An error kvparity reports (the command-line tool's exit 1); str(e) is the CLI's message.";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::Usage)
        PyErr_SetString(PyExc_ValueError, e.what());
      else
        PyErr_SetString(error.ptr(), e.what());
    }
  });
  set_interrupt_check(&check_python_signals);

  py::class_<PyModel>(m, "Model", "A loaded checkpoint with its tokenizer and an engine (kvparity.load makes one).")
      .def(py::init<const std::string&, const std::optional<std::string>&, const std::string&,
                    const std::optional<std::string>&, const std::string&, int, const std::string&,
                    const std::string&>(),
           py::arg("path"), py::arg("tokenizer") = py::none(), py::arg("dtype") = "fp32",
           py::arg("kv_dtype") = py::none(), py::arg("kernels") = "standard", py::arg("threads") = 0,
           py::arg("device") = "cpu", py::arg("simd") = "auto")
      .def_property_readonly("config", &PyModel::config,
                             "dict: arch, n_layers, hidden_size, intermediate_size, n_heads, n_kv_heads, head_dim, "
                             "vocab_size, context_length, bos_id, eos_id, more_eos_ids (further ids that end a "
                             "generation), ... and the run settings (dtype, kv_dtype, kernels, threads, "
                             "device)")
      .def("tokenize", &PyModel::tokenize, py::arg("text"), py::arg("bos") = true,
           "Token ids of `text` (list[int]), with BOS first when `bos` and the tokenizer has one.")
      .def("apply_chat_template", &PyModel::apply_chat_template, py::arg("messages"), py::arg("chat_template") = "auto",
           py::arg("tokenize") = true, py::arg("enable_thinking") = py::none(),
           "Token ids of a conversation laid out in a chat format, ending with the assistant's turn opened, as\n"
           "transformers' apply_chat_template(messages, add_generation_prompt=True) tokenises it. messages: a str\n"
           "(one user turn) or a list of {'role': 'system'|'user'|'assistant', 'content': str} dicts.\n"
           "chat_template: 'auto' (the template the model ships, in tokenizer_config.json or the GGUF) or\n"
           "'llama2', 'llama3', 'llama3.1', 'mistral', 'gemma', 'chatml', 'gemma3', 'harmony', 'phi3', 'phi4-mini', 'phi4'. tokenize=False: the text\n"
           "instead, special tokens spelled out (the tokenizer's own BOS/EOS pieces). enable_thinking=False:\n"
           "a reasoning template's thinking off, as transformers' argument (Qwen3's; others refuse it).")
      .def("detokenize", &PyModel::detokenize, py::arg("ids"), "The text of token ids (control tokens give none).")
      .def("forward", &PyModel::forward, py::arg("ids"),
           "Logits of one cache-free pass over `ids`: float32 ndarray [T, vocab] (values of the compute dtype).")
      .def("run_with_cache", &PyModel::run_with_cache, py::arg("ids"), py::arg("names") = py::none(),
           py::arg("cache") = false, py::arg("prefill") = py::none(),
           "(logits [T, vocab], activations) of one cache-free pass over ids; with cache=True, of the cache-ON\n"
           "path instead: ids[:prefill] in one pass (default: all but the last token), then one token per\n"
           "step, as generate computes them. activations: dict of float32 ndarrays under\n"
           "TransformerLens names: hook_embed, blocks.{l}.hook_resid_pre / hook_attn_out / hook_resid_mid /\n"
           "hook_mlp_out / hook_resid_post [T, hidden], blocks.{l}.attn.hook_q / hook_k / hook_v (before RoPE)\n"
           "and hook_rot_q / hook_rot_k (after RoPE) [T, heads, head_dim], ln_final.hook_normalized [T, hidden].\n"
           "names: a list of names or a predicate name -> bool keeping only some (memory); None keeps all.")
      .def(
          "generate",
          [](PyModel& m, const py::object& prompt, int max_new_tokens, bool cache, const py::object& sampler,
             const py::object& temperature, const py::object& top_k, const py::object& top_p, const py::object& min_p,
             const py::object& seed, const py::object& stop, bool return_logits, bool ignore_eos,
             const py::object& chat_template, const py::object& system, const py::object& enable_thinking) {
            return m.generate(prompt, max_new_tokens, cache,
                              SamplingArgs{sampler, temperature, top_k, top_p, min_p, seed}, stop, return_logits,
                              ignore_eos, chat_template, system, enable_thinking);
          },
          py::arg("prompt"), py::arg("max_new_tokens") = 64, py::arg("cache") = true, py::arg("sampler") = "greedy",
          py::arg("temperature") = py::none(), py::arg("top_k") = py::none(), py::arg("top_p") = py::none(),
          py::arg("min_p") = py::none(), py::arg("seed") = py::none(), py::arg("stop") = py::none(),
          py::arg("return_logits") = false, py::arg("ignore_eos") = false, py::arg("chat_template") = py::none(),
          py::arg("system") = py::none(), py::arg("enable_thinking") = py::none(),
          "Generates from a prompt (str, encoded with the model's BOS rule) or token ids, cache ON (cache=True)\n"
          "or OFF, with the seeded samplers both paths share: sampler 'greedy', 'temperature', 'top-k', 'top-p'\n"
          "or 'min-p'. Unset, temperature is 1, top_k 40, top_p 0.9, min_p 0.05 and seed 0, as in the CLI; an\n"
          "argument the sampler ignores (temperature or seed with greedy, top_p without 'top-p') raises\n"
          "ValueError. stop: a str or list of str ending the text before it. chat_template: 'auto' or a format\n"
          "('llama2', 'llama3', 'llama3.1', 'mistral', 'gemma', 'chatml', 'gemma3', 'harmony', 'phi3', 'phi4-mini', 'phi4'): a str prompt is one user\n"
          "turn of it (token ids are taken as they are: apply_chat_template makes them), after the system\n"
          "message system= if given (enable_thinking=False: a reasoning template's thinking off), and the\n"
          "format's end of turn stops the run.\n"
          "Returns the CLI's --json keys (prompt_ids, output_ids, text, stop_reason, dtype, kv_dtype, kernels,\n"
          "cache, sampler, seed, plus dropped_ids) and 'logits' [steps, vocab] when return_logits; for a mixture\n"
          "of experts, 'experts' [steps, layers, k] int32: the experts each layer chose for the row each step's\n"
          "token came from, largest weight first (-1 in a dense layer).")
      .def(
          "generate_batch",
          [](PyModel& m, const py::object& prompts, int max_new_tokens, bool cache, const py::object& sampler,
             const py::object& temperature, const py::object& top_k, const py::object& top_p, const py::object& min_p,
             const py::object& seed, const py::object& stop, bool return_logits, bool ignore_eos,
             const py::object& chat_template, const py::object& system, const py::object& enable_thinking) {
            return m.generate_batch(prompts, max_new_tokens, cache,
                                    SamplingArgs{sampler, temperature, top_k, top_p, min_p, seed}, stop, return_logits,
                                    ignore_eos, chat_template, system, enable_thinking);
          },
          py::arg("prompts"), py::arg("max_new_tokens") = 64, py::arg("cache") = true, py::arg("sampler") = "greedy",
          py::arg("temperature") = py::none(), py::arg("top_k") = py::none(), py::arg("top_p") = py::none(),
          py::arg("min_p") = py::none(), py::arg("seed") = py::none(), py::arg("stop") = py::none(),
          py::arg("return_logits") = false, py::arg("ignore_eos") = false, py::arg("chat_template") = py::none(),
          py::arg("system") = py::none(), py::arg("enable_thinking") = py::none(),
          "Generates from every prompt (each a str or token ids) in one batch, in lockstep, as\n"
          "`kvparity generate --batch-size` does: one forward per step over the unfinished sequences, each\n"
          "with its own cache slots. Sequence b samples under sequence id b (generate uses 0). With\n"
          "kernels='invariant' or 'portable' a greedy sequence comes out bitwise as generate gives it alone;\n"
          "with 'standard' the batch can change the numbers. Arguments as generate; returns one generate\n"
          "dict per prompt, in order, each with its 'sequence' index.")
      .def("weight", &PyModel::weight, py::arg("name"),
           "A weight as float32 ndarray: model.embed_tokens.weight, model.norm.weight or lm_head.weight.");

  add_study_calls(m);
}
