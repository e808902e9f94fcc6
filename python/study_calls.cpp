#include "study_calls.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/kv_type.h"
#include "core/nearest_name.h"
#include "core/thread_pool.h"
#include "kernels/simd_target.h"
#include "lab/compare.h"
#include "lab/gsm8k_eval.h"
#include "lab/layer_profile.h"
#include "lab/merge_shards.h"
#include "lab/model_inspection.h"
#include "lab/patching.h"
#include "lab/prompt_set.h"
#include "lab/report.h"
#include "python_arguments.h"

namespace kvp::python {
namespace {

py::object to_python(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return py::none();
    case nlohmann::json::value_t::boolean:
      return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return py::int_(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float:
      return py::float_(j.get<double>());
    case nlohmann::json::value_t::string:
      return py::str(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      py::list l;
      for (const auto& x : j) l.append(to_python(x));
      return l;
    }
    case nlohmann::json::value_t::object: {
      py::dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d[py::str(it.key())] = to_python(it.value());
      return d;
    }
    default:
      return py::none();
  }
}

// One call's keyword options: every name one the call knows, every value read as its type.
// An option given as None counts as not given.
class CallOptions {
 public:
  CallOptions(const std::string& call, const py::kwargs& kwargs, const std::vector<std::string>& known) {
    for (const auto& [k, v] : kwargs) {
      const std::string key = k.cast<std::string>();
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        const std::string near = nearest_name(key, known);
        if (!near.empty()) fail_usage("{}: unknown option '{}'; did you mean '{}'?", call, key, near);
        fail_usage("{}: unknown option '{}' (options: {})", call, key, fmt::join(known, ", "));
      }
      if (!v.is_none()) given_[key] = py::reinterpret_borrow<py::object>(v);
    }
  }
  bool has(const std::string& name) const { return given_.count(name) > 0; }
  py::object get(const std::string& name) const { return has(name) ? given_.at(name) : py::object(py::none()); }
  int integer(const std::string& name, int fallback) const {
    if (!has(name)) return fallback;
    const py::object& v = given_.at(name);
    if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v)) throw_type_error(name, "an int", v);
    return cast_arg<int>(v, name, "an int that fits 32 bits");
  }
  std::string text(const std::string& name, const std::string& fallback) const {
    return has(name) ? cast_arg<std::string>(given_.at(name), name, "a str") : fallback;
  }
  bool flag(const std::string& name, bool fallback) const {
    if (!has(name)) return fallback;
    if (!py::isinstance<py::bool_>(given_.at(name))) throw_type_error(name, "a bool", given_.at(name));
    return given_.at(name).cast<bool>();
  }
  std::vector<std::string> texts(const std::string& name, std::vector<std::string> fallback) const {
    return has(name) ? str_or_list(given_.at(name), name) : std::move(fallback);
  }
  SamplingArgs sampling() const {
    return {get("sampler"), get("temperature"), get("top_k"), get("top_p"), get("min_p"), get("seed")};
  }

 private:
  std::map<std::string, py::object> given_;
};

const std::vector<std::string> kSamplingOptions{"sampler", "temperature", "top_k", "top_p", "min_p", "seed"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

DType read_dtype(const std::string& d) {
  if (d != "fp32" && d != "fp16" && d != "bf16") fail_usage("dtype='{}': expected fp32, fp16 or bf16", d);
  return parse_dtype(d);
}

KernelPolicy read_policy(const std::string& k) {
  if (k != "reference" && k != "standard" && k != "invariant" && k != "portable")
    fail_usage("kernels='{}': expected reference, standard, invariant or portable", k);
  return parse_policy(k);
}

KvType read_kv_type(const std::string& t) {
  const auto kv = parse_kv_type(t);
  if (!kv) fail_usage("kv_dtype='{}': expected fp32, fp16, bf16, q8_0, q4_0, fp8_e4m3 or fp8_e5m2", t);
  return *kv;
}

// threads: 1 by default, as the CLI (the standard kernels' bits follow the thread count); 0 is
// every core.
int read_threads(const CallOptions& o) {
  const int t = o.integer("threads", 1);
  if (t < 0 || t > 256) fail_usage("threads={}: expected 0 (every core) to 256", t);
  return t > 0 ? t : cores_here(256);
}

// The reference kernels run on one thread whatever was asked.
int threads_for(KernelPolicy policy, int threads) { return policy == KernelPolicy::Reference ? 1 : threads; }

Device read_device(const CallOptions& o) {
  const Device d = parse_device(o.text("device", "cpu"), "device");
  require_device(d, "device");
  return d;
}

SimdTarget read_simd(const CallOptions& o) {
  const SimdTarget s = parse_simd(o.text("simd", "auto"), "simd");
  require_simd(s, "simd");
  return s;
}

RunSpec read_spec(const CallOptions& o, const char* side, const RunSpec& fallback) {
  return o.has(side) ? RunSpec::parse(o.text(side, ""), side) : fallback;
}

std::vector<Prompt> read_prompts(const py::object& prompts) {
  std::vector<Prompt> out;
  if (py::isinstance<py::str>(prompts)) {
    const std::string source = prompts.cast<std::string>();
    // One prompt given as a str reads as a file name that is not there: say how to pass it.
    if (source.rfind("builtin:", 0) != 0 && !std::filesystem::exists(source))
      fail("prompts='{}': no such prompts file (.jsonl or .txt); pass prompts as a list, e.g. ['{}']", source, source);
    out = load_prompts(source);
  } else {
    const auto texts = read_str_list(prompts, "prompts", "a list of str, or a prompts file");
    for (size_t i = 0; i < texts.size(); ++i) out.push_back(Prompt{"prompt-" + std::to_string(i), texts[i]});
  }
  if (out.empty()) fail_usage("prompts: give at least one prompt");
  return out;
}

// chat_template: None or 'none', 'auto', or a format's name (as --chat-template); system: a system
// message (as --system); enable_thinking=False: a reasoning template's thinking off (as --no-thinking).
ChatChoice read_chat(const CallOptions& o) {
  return chat_choice(o.text("chat_template", "none"),
                     o.has("system") ? std::optional<std::string>(o.text("system", "")) : std::nullopt,
                     o.has("enable_thinking") ? std::optional<bool>(o.flag("enable_thinking", true)) : std::nullopt);
}

// shard='i/n' (the whole study when not given); a slice needs a folder of its own to be merged from.
ShardSpec read_shard(const CallOptions& o, const std::optional<std::string>& out) {
  if (!o.has("shard")) return {};
  const ShardSpec s = parse_shard(o.text("shard", ""), "shard");
  if (!out)
    fail_usage("shard='{}' needs out= (each shard writes its own folder, and kvparity.merge joins them)", s.text());
  return s;
}

// Runs `work` on its results folder with the GIL released: `out`, or without one a temporary folder
// that goes once the summary is read. Returns the folder's summary.json as a dict.
py::object run_and_report(const char* call, const std::optional<std::string>& out,
                          const std::function<void(const std::string&)>& work) {
  std::filesystem::path tmp;
  std::string dir;
  if (out) {
    dir = *out;
  } else {
    std::string tmpl = (std::filesystem::temp_directory_path() / fmt::format("kvparity-{}-XXXXXX", call)).string();
    if (mkdtemp(tmpl.data()) == nullptr) fail("{}: cannot create a temporary directory under {}", call, tmpl);
    tmp = tmpl;
    dir = tmpl;
  }
  nlohmann::json summary;
  try {
    py::gil_scoped_release release;
    work(dir);
    summary = write_reports(dir);
  } catch (...) {
    if (!tmp.empty()) std::filesystem::remove_all(tmp);
    throw;
  }
  if (!tmp.empty()) std::filesystem::remove_all(tmp);
  return to_python(summary);
}

py::object compare(const std::string& model_path, const py::object& prompts,
                   const std::optional<std::string>& tokenizer, const std::optional<std::string>& out,
                   const py::kwargs& kwargs) {
  const CallOptions o(
      "compare", kwargs,
      with({"dtype", "kernels", "kv_dtype", "threads", "device", "simd", "max_new_tokens", "stop_at_eos", "batch_size",
            "control", "baseline", "candidate", "shard", "chat_template", "system", "enable_thinking", "limit"},
           kSamplingOptions));
  CompareOptions c;
  c.model = model_path;
  c.tokenizer = tokenizer.value_or("");
  c.prompts = read_prompts(prompts);
  c.max_new_tokens = o.integer("max_new_tokens", c.max_new_tokens);
  if (c.max_new_tokens < 1) fail_usage("max_new_tokens={}: expected 1 or more", c.max_new_tokens);
  c.stop_at_eos = o.flag("stop_at_eos", c.stop_at_eos);
  c.chat = read_chat(o);
  c.limit = o.integer("limit", 0);
  if (c.limit < 0) fail_usage("limit={}: expected 0 (every prompt) or more", c.limit);
  c.baseline = read_spec(o, "baseline", c.baseline);
  c.candidate = read_spec(o, "candidate", c.candidate);
  const int batch_size = o.integer("batch_size", 1);
  if (batch_size < 1) fail_usage("batch_size={}: expected 1 or more", batch_size);
  if (batch_size > 1) {
    // As `kvparity compare --batch-size`: each prompt in a batch against its solo cache-ON run.
    if (o.has("baseline") || o.has("candidate"))
      fail_usage("batch_size: it sets the baseline (cache=on) and the candidate; give one or the other");
    if (c.prompts.size() < 2)
      fail_usage("batch_size={}: needs at least two prompts (a batch of one is its solo run)", batch_size);
    c.baseline = RunSpec::parse("cache=on", "batch_size");
    c.candidate = RunSpec::parse(fmt::format("batch-size={}", batch_size), "batch_size");
  }
  const Sampling sampled = read_sampling(o.sampling(), /*many=*/true);
  if (sampled.seed_given) c.seed = sampled.seed;
  std::vector<DType> dtypes;
  for (const auto& d : o.texts("dtype", {"fp16"})) dtypes.push_back(read_dtype(d));
  std::vector<KernelPolicy> policies;
  for (const auto& k : o.texts("kernels", {"standard"})) policies.push_back(read_policy(k));
  const std::optional<KvType> kv =
      o.has("kv_dtype") ? std::optional<KvType>(read_kv_type(o.text("kv_dtype", ""))) : std::nullopt;
  const int threads = read_threads(o);
  const Device device = read_device(o);
  const SimdTarget simd = read_simd(o);
  for (const DType d : dtypes)
    for (const KernelPolicy k : policies)
      for (const auto& sampler : sampled.samplers) {
        RunDefaults point;
        point.dtype = d;
        if (kv) point.kv_dtype = *kv;
        point.kernels = k;
        point.threads = threads_for(k, threads);
        point.device = device;
        point.simd = simd;
        add_condition(c, point, sampler);
      }
  if (o.has("control")) {
    const std::string control = o.text("control", "");
    if (control != "fp32") fail_usage("control='{}': expected 'fp32'", control);
    if (add_fp32_controls(c) == 0)
      fail_usage("control='fp32' needs a half-precision dtype or kv_dtype (every condition already runs in fp32)");
  }
  c.shard = read_shard(o, out);
  c.time_totals = false;  // a notebook's stderr stays quiet; the folder's timing.jsonl has them
  return run_and_report("compare", out, [&](const std::string& dir) {
    c.out_dir = dir;
    run_compare(c);
  });
}

py::object eval_gsm8k(const std::string& data, const py::object& models, const std::optional<std::string>& out,
                      const py::kwargs& kwargs) {
  const CallOptions o("eval_gsm8k", kwargs,
                      {"train",     "tokenizer", "conditions",     "dtype",     "kv_dtype", "kernels",       "baseline",
                       "candidate", "shots",     "max_new_tokens", "limit",     "seed",     "batch_size",    "threads",
                       "device",    "simd",      "shard",          "skip_long", "flips",    "chat_template", "system",
                       "enable_thinking"});
  Gsm8kOptions g;
  g.data = data;
  g.train = o.text("train", "");
  const std::vector<std::string> paths = str_or_list(models, "models");
  const std::vector<std::string> tokenizers = o.texts("tokenizer", {});
  if (!tokenizers.empty() && tokenizers.size() != paths.size())
    fail_usage("tokenizer: give one per model ({} models, {} tokenizers), 'auto' for ones found beside the model",
               paths.size(), tokenizers.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string t = tokenizers.empty() ? "" : tokenizers[i];
    g.models.push_back({paths[i], t == "auto" ? "" : t});
  }
  g.conditions = parse_gsm8k_conditions(fmt::format("{}", fmt::join(o.texts("conditions", {"greedy"}), ",")));
  for (const auto& d : o.texts("dtype", {"fp16"})) g.dtypes.push_back(read_dtype(d));
  for (const auto& k : o.texts("kv_dtype", {})) g.kv_dtypes.push_back(read_kv_type(k));
  for (const auto& k : o.texts("kernels", {"standard"})) g.kernels.push_back(read_policy(k));
  g.baseline = read_spec(o, "baseline", g.baseline);
  g.candidate = read_spec(o, "candidate", g.candidate);
  g.shots = o.integer("shots", g.shots);
  if (g.shots < 0) fail_usage("shots={}: expected 0 or more", g.shots);
  if (o.has("train") && g.shots == 0) fail_usage("train: shots=0 takes no exemplars; give shots=1 or more");
  g.max_new_tokens = o.integer("max_new_tokens", g.max_new_tokens);
  if (g.max_new_tokens < 1) fail_usage("max_new_tokens={}: expected 1 or more", g.max_new_tokens);
  g.limit = o.integer("limit", g.limit);
  if (g.limit < 0) fail_usage("limit={}: expected 0 (every problem) or more", g.limit);
  if (o.has("seed")) {
    if (!any_sampling(g.conditions))
      fail_usage("seed: greedy draws no random numbers; give a sampling condition (temperature:T, ...)");
    g.seed = cast_arg<uint64_t>(o.get("seed"), "seed", "an int in 0 to 2**64 - 1");
  }
  g.batch_size = o.integer("batch_size", g.batch_size);
  if (g.batch_size < 1) fail_usage("batch_size={}: expected 1 or more", g.batch_size);
  // As the CLI: one thread count for every point of the grid; the reference kernels alone run on one.
  const bool threaded =
      std::any_of(g.kernels.begin(), g.kernels.end(), [](KernelPolicy k) { return k != KernelPolicy::Reference; });
  g.threads = threaded ? read_threads(o) : 1;
  g.device = read_device(o);
  g.simd = read_simd(o);
  g.shard = read_shard(o, out);
  g.skip_long = o.flag("skip_long", g.skip_long);
  g.chat = read_chat(o);
  g.flips = o.flag("flips", g.flips);
  g.time_totals = false;
  return run_and_report("eval_gsm8k", out, [&](const std::string& dir) {
    g.out_dir = dir;
    run_gsm8k(g);
  });
}

py::object merge(const py::object& dirs_arg, const std::string& out, bool report) {
  const std::vector<std::string> dirs = read_str_list(dirs_arg, "dirs", "a list of the shards' folders");
  MergeSummary s;
  nlohmann::json summary;
  {
    py::gil_scoped_release release;
    s = merge_shards(dirs, out);
    if (report) summary = write_reports(out);
  }
  if (report) return to_python(summary);
  py::dict d;
  d["kind"] = s.kind;
  d["records"] = s.records;
  d["duplicates"] = s.duplicates;
  d["missing_shards"] = s.missing_shards;
  return d;
}

py::object profile(const std::string& model_path, const std::string& prompt,
                   const std::optional<std::string>& tokenizer, const std::optional<std::string>& out,
                   const py::kwargs& kwargs) {
  const CallOptions o(
      "profile", kwargs,
      {"dtype", "kernels", "threads", "device", "simd", "step", "baseline", "candidate", "chat_template", "system",
       "enable_thinking"});
  ProfileOptions p;
  p.model = model_path;
  p.tokenizer = tokenizer.value_or("");
  p.chat = read_chat(o);
  p.prompt = prompt;
  p.dtypes.clear();
  for (const auto& d : o.texts("dtype", {"fp32", "fp16", "bf16"})) p.dtypes.push_back(read_dtype(d));
  p.kernels = read_policy(o.text("kernels", "standard"));
  p.threads = threads_for(p.kernels, read_threads(o));
  p.device = read_device(o);
  p.simd = read_simd(o);
  p.step = o.integer("step", p.step);
  if (p.step < 1) fail_usage("step={}: expected 1 or more (1 is the first decode step)", p.step);
  p.baseline = read_spec(o, "baseline", p.baseline);
  p.candidate = read_spec(o, "candidate", p.candidate);
  profile_sides(p);  // sides that cannot run are refused before anything is written
  if (out) check_profile_dir(*out, p);
  nlohmann::json j;
  {
    py::gil_scoped_release release;
    j = profile_json(run_profile(p), p);
    if (out) {
      save_profile(*out, j, p);
      write_reports(*out);
    }
  }
  return to_python(j);
}

py::object patch(const std::string& model_path, const std::string& prompt, const std::optional<std::string>& tokenizer,
                 const std::optional<std::string>& out, const py::kwargs& kwargs) {
  const CallOptions o("patch", kwargs,
                      with({"dtype", "kernels", "threads", "device", "simd", "max_new_tokens", "step", "continuation",
                            "kv_positions", "baseline", "candidate", "chat_template", "system", "enable_thinking"},
                           kSamplingOptions));
  PatchOptions p;
  p.model = model_path;
  p.tokenizer = tokenizer.value_or("");
  p.chat = read_chat(o);
  p.prompt = prompt;
  p.dtype = read_dtype(o.text("dtype", "fp16"));
  p.kernels = read_policy(o.text("kernels", "standard"));
  p.threads = threads_for(p.kernels, read_threads(o));
  p.device = read_device(o);
  p.simd = read_simd(o);
  const Sampling s = read_sampling(o.sampling(), /*many=*/false);
  p.sampler = s.samplers.front();
  if (s.seed_given) p.seed = s.seed;
  p.max_new_tokens = o.integer("max_new_tokens", p.max_new_tokens);
  if (p.max_new_tokens < 1) fail_usage("max_new_tokens={}: expected 1 or more", p.max_new_tokens);
  if (o.has("step")) {
    p.step = o.integer("step", p.step);
    if (p.step < 1) fail_usage("step={}: expected 1 or more (step 0 is the prefill, the same on both paths)", p.step);
    if (p.step >= p.max_new_tokens)
      fail_usage("step={} needs max_new_tokens > {} (the free runs must reach the step)", p.step, p.step);
  }
  p.continuation = o.integer("continuation", p.continuation);
  if (p.continuation < 0) fail_usage("continuation={}: expected 0 or more", p.continuation);
  if (o.has("kv_positions")) {
    const auto [begin, end] =
        cast_arg<std::pair<int, int>>(o.get("kv_positions"), "kv_positions", "a (begin, end) pair of ints");
    if (begin < 0 || end <= begin)
      fail_usage("kv_positions=({}, {}): expected (begin, end) with 0 <= begin < end, half-open", begin, end);
    p.kv_begin = begin;
    p.kv_end = end;
  }
  p.baseline = read_spec(o, "baseline", p.baseline);
  p.candidate = read_spec(o, "candidate", p.candidate);
  patch_sides(p);  // sides that cannot run are refused before anything is written
  if (out) check_patch_dir(*out, p);
  nlohmann::json j;
  {
    py::gil_scoped_release release;
    j = patch_json(run_patch(p), p);
    if (out) {
      save_patch(*out, j, p);
      write_reports(*out);
    }
  }
  return to_python(j);
}

py::object inspect(const std::optional<std::string>& model, const std::optional<std::string>& tokenizer,
                   int cache_capacity, int batch_size, const std::optional<std::string>& kv_dtype,
                   const std::optional<std::string>& synth, const std::optional<std::string>& arch) {
  InspectOptions o;
  o.model = model.value_or("");
  o.synth = synth.value_or("");
  o.synth_arch = arch.value_or("");
  o.tokenizer = tokenizer.value_or("");
  o.cache_capacity = cache_capacity;
  o.batch_size = batch_size;
  if (kv_dtype) o.kv = read_kv_type(*kv_dtype);
  return to_python(inspect_model(o));
}

}  // namespace

void add_study_calls(py::module_& m) {
  m.def("inspect", &inspect, py::arg("model_path") = py::none(), py::arg("tokenizer") = py::none(),
        py::arg("cache_capacity") = 0, py::arg("batch_size") = 1, py::arg("kv_dtype") = py::none(),
        py::arg("synth") = py::none(), py::arg("arch") = py::none(),
        "What `kvparity inspect --json` prints, as a dict: family, shape, attention, rope, norm, head, special\n"
        "tokens, parameters, the file's tensor types, the tokenizer a run would take, and per compute dtype\n"
        "the weights' memory, the bytes a decoded token reads and the KV cache's size (cache_capacity\n"
        "positions, 0 the model's context, for batch_size sequences, in kv_dtype or each dtype's own).\n"
        "Nothing is loaded or converted; a checkpoint a run would refuse raises its error. synth (instead\n"
        "of model_path): a `kvparity synth` preset described from its shapes, arch its family, nothing made.");
  m.def("compare", &compare, py::arg("model_path"), py::arg("prompts"), py::arg("tokenizer") = py::none(),
        py::arg("out") = py::none(),
        "Runs `kvparity compare` and returns its summary.json as a dict. prompts: a list of strings (ids\n"
        "prompt-0, prompt-1, ..., which key the samplers' draws), or a source as --prompts takes it (a\n"
        ".jsonl/.txt file, 'builtin:stories'). out: results folder (resumed when it holds results); None uses\n"
        "a temporary one. Options, as the CLI's: dtype (str or list, default 'fp16'), kernels (str or list,\n"
        "default 'standard'), kv_dtype, threads (1; 0 every core), device, simd, max_new_tokens (128),\n"
        "stop_at_eos, sampler (str or list, one condition each; default 'greedy'), temperature, top_k, top_p,\n"
        "min_p and seed (1) as Model.generate takes them, batch_size (each prompt in a batch of that size\n"
        "against its solo run), control='fp32' (every half-precision condition rerun in fp32), and the\n"
        "baseline and candidate SPECs (key=value,... as --baseline takes), and shard='i/n' (with out=: in\n"
        "every condition the prompts, or groups of batch_size prompts, whose index mod n == i; kvparity.merge\n"
        "joins the shards' folders), chat_template ('auto' or a format: each prompt as a user turn of an\n"
        "instruction-tuned model's chat, as --chat-template), system (a system message before each prompt,\n"
        "as --system), and limit (the first N prompts; 0 every one).");
  m.def("eval_gsm8k", &eval_gsm8k, py::arg("data"), py::arg("models"), py::arg("out") = py::none(),
        "Runs `kvparity eval gsm8k` and returns its summary.json as a dict: GSM8K k-shot accuracy of both\n"
        "sides of a comparison (default cache OFF vs ON), with exact McNemar p, divergence and flips per model,\n"
        "condition, dtype and kernels. data: the test split (JSONL with question/answer); models: a path or a\n"
        "list of paths. out: results folder (resumed when it holds results); None uses a temporary one.\n"
        "Options, as the CLI's: train (exemplars; default train.jsonl beside data), tokenizer (one per model,\n"
        "'auto' found beside it), conditions (str or list: greedy, temperature:T, top-p:P, top-k:K, min-p:P;\n"
        "default 'greedy'), dtype (default 'fp16'), kv_dtype, kernels (str or list), baseline and candidate\n"
        "SPECs, shots (5), max_new_tokens (256), limit (0: every problem), seed (1; sampling conditions only),\n"
        "batch_size (1), threads (1; 0 every core), device, simd, shard='i/n' (with out=), skip_long (False)\n"
        "flips (True; False skips the teacher-forced pass that counts token flips), chat_template ('auto'\n"
        "or a format: exemplars and question as chat turns, as --chat-template) and system (as --system).");
  m.def("merge", &merge, py::arg("dirs"), py::arg("out"), py::arg("report") = true,
        "Runs `kvparity merge`: joins the out folders of the shards of one study (compare(..., shard=) or\n"
        "`kvparity eval gsm8k --shard`) into `out`, refusing shards of different studies. Returns the merged\n"
        "summary.json as a dict (report=True), or {'kind', 'records', 'duplicates', 'missing_shards'}. With\n"
        "shards missing, compare(...) into `out` with the shards' options and no shard runs what is missing.");
  m.def("profile", &profile, py::arg("model_path"), py::arg("prompt") = "Once upon a time",
        py::arg("tokenizer") = py::none(), py::arg("out") = py::none(),
        "Runs `kvparity profile` and returns its profile.json as a dict: at one decoding step with the same\n"
        "prefix on both sides (the prompt and the candidate's greedy tokens), per layer the max and mean\n"
        "|candidate - baseline| of the residual stream, attention and MLP outputs and each KV head's cached\n"
        "K and V, and of the logits; one entry per dtype. out: a folder for profile.json and the report.\n"
        "Options, as the CLI's: dtype (str or list, default 'fp32,fp16,bf16'), kernels ('standard'),\n"
        "threads (1; 0 every core), device, simd, step (1: the first decode step), the baseline\n"
        "(default 'cache=off') and candidate ('cache=on') SPECs, and chat_template ('auto' or a format: the\n"
        "prompt as a user turn) with system (a system message before it).");
  m.def("patch", &patch, py::arg("model_path"), py::arg("prompt") = "Once upon a time",
        py::arg("tokenizer") = py::none(), py::arg("out") = py::none(),
        "Runs `kvparity patch` and returns its patch.json as a dict: at the first step where the free runs\n"
        "choose different tokens (or at step=), the candidate re-run with one layer's residual stream, or\n"
        "its cached K/V, taken from the baseline; per row whether the next token then follows the\n"
        "baseline and how much of its continuation comes back. out: a folder for patch.json and the\n"
        "report. Options, as the CLI's: dtype ('fp16'), kernels, threads (1; 0 every core), device, simd,\n"
        "sampler, temperature, top_k, top_p, min_p and seed (1) as Model.generate takes them,\n"
        "max_new_tokens (96: the horizon searched for a divergence), step, continuation (16),\n"
        "kv_positions ((begin, end): the cached positions KV rows copy), the baseline ('cache=off')\n"
        "and candidate ('cache=on') SPECs, and chat_template ('auto' or a format: the prompt as a user turn)\n"
        "with system (a system message before it).");
}

}  // namespace kvp::python
