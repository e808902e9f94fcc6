#include "lab/gsm8k_eval.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_u64.h"
#include "lab/answer_extract.h"
#include "lab/compare.h"
#include "lab/gsm8k_prompt.h"
#include "lab/results_log.h"
#include "lab/results_manifest.h"
#include "model/model.h"
#include "runtime/generator.h"
#include "runtime/rng.h"
#include "runtime/tokenizer_for_model.h"

namespace kvp {
namespace fs = std::filesystem;

namespace {

constexpr const char* kPromptFormat = "lm-eval-gsm8k: first-k train exemplars, 'Question: q\\nAnswer: a' joined by "
                                      "blank lines, until Question:|</s>|<|im_end|>|EOS";

bool parse_number(const std::string& s, double* out) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end;
}

nlohmann::json side_json(const GenerationResult& g, const std::string& target) {
  const auto strict = extract_strict(g.text), flex = extract_flexible(g.text);
  auto opt = [](const std::optional<std::string>& s) { return s ? nlohmann::json(*s) : nlohmann::json(nullptr); };
  return {{"text", g.text},
          {"ids", g.output_ids},
          {"stop_reason", g.stop_reason},
          {"strict", opt(strict)},
          {"flexible", opt(flex)},
          {"correct_strict", strict.has_value() && *strict == target},
          {"correct_flexible", flex.has_value() && *flex == target}};
}

struct Item {
  const Gsm8kItem* problem;
  std::vector<int> prompt_ids;
  bool fits;
};

GenerationConfig generation_config(const Item& item, const Gsm8kCondition& cond, const Gsm8kOptions& opts) {
  GenerationConfig g;
  g.max_new_tokens = opts.max_new_tokens;
  g.sampler = cond.sampler;
  g.seed = opts.seed;
  g.sequence_id = sequence_id_for(fmt::format("gsm8k-test-{}", item.problem->index));
  g.stop_at_eos = true;
  g.stop_strings = gsm8k_stop_strings();
  return g;
}

struct BothPaths {
  GenerationResult on, off;
};

// The free-running generations of `items` on both cache paths, each item under its own sequence id
// (the same as alone). batch_size 1: one item at a time (Engine::generate); otherwise all items as
// one batch per path (Engine::generate_batch, which recomputes every sequence from position 0 at
// each step for cache OFF).
std::vector<BothPaths> generate_items(Engine& engine, const Tokenizer& tok, const std::vector<const Item*>& items,
                                      const Gsm8kCondition& cond, const Gsm8kOptions& opts) {
  std::vector<BothPaths> out(items.size());
  if (opts.batch_size == 1) {
    for (size_t i = 0; i < items.size(); ++i) {
      GenerationConfig g = generation_config(*items[i], cond, opts);
      g.cache = CacheMode::On;
      out[i].on = engine.generate(items[i]->prompt_ids, g, &tok);
      g.cache = CacheMode::Off;
      out[i].off = engine.generate(items[i]->prompt_ids, g, &tok);
    }
    return out;
  }
  if (items.empty()) return out;
  std::vector<std::vector<int>> prompts;
  std::vector<uint64_t> ids;
  for (const Item* it : items) {
    prompts.push_back(it->prompt_ids);
    ids.push_back(generation_config(*it, cond, opts).sequence_id);
  }
  GenerationConfig g = generation_config(*items[0], cond, opts);
  for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
    g.cache = mode;
    auto results = engine.generate_batch(prompts, ids, g, &tok);
    for (size_t i = 0; i < items.size(); ++i) (mode == CacheMode::On ? out[i].on : out[i].off) = std::move(results[i]);
  }
  return out;
}

// An item's record from its two free-running generations; flips are teacher-forced along the
// cache-ON trajectory exactly as `compare` defines them (docs/metrics.md). Up to the first divergence
// the cache-OFF free run saw the same prefix, so its own choices are the teacher-forced ones; only
// later steps need a forward.
nlohmann::json item_record(Engine& engine, const Item& item, const Gsm8kCondition& cond, const Gsm8kOptions& opts,
                           const BothPaths& paths) {
  const int vocab = engine.model().config.vocab_size;
  const GenerationConfig g = generation_config(item, cond, opts);
  const GenerationResult& on = paths.on;
  const GenerationResult& off = paths.off;
  // Divergence and flips are over everything each path sampled: a stop string cuts the tokens it
  // straddles out of output_ids (dropped_ids), but they were still chosen, and can differ.
  auto trajectory = [](const GenerationResult& g) {
    std::vector<int> t = g.output_ids;
    t.insert(t.end(), g.dropped_ids.begin(), g.dropped_ids.end());
    return t;
  };
  const std::vector<int> on_ids = trajectory(on), off_ids = trajectory(off);

  int first_div = -1;
  const size_t common = std::min(on_ids.size(), off_ids.size());
  for (size_t i = 0; i < common && first_div < 0; ++i)
    if (on_ids[i] != off_ids[i]) first_div = int(i);
  if (first_div < 0 && on_ids.size() != off_ids.size()) first_div = int(common);

  int flips = 0;
  std::vector<int> seq = item.prompt_ids;
  ForwardOptions fo;
  for (size_t s = 0; s < on_ids.size(); ++s) {
    int off_choice;
    if ((first_div < 0 || int(s) <= first_div) && s < off_ids.size()) {
      off_choice = off_ids[s];
    } else {
      const float* all = engine.forward_uncached(seq.data(), int(seq.size()), fo);
      off_choice = sample_token(all + (seq.size() - 1) * size_t(vocab), vocab, cond.sampler,
                                uniform_at(g.seed, g.sequence_id, s));
    }
    flips += off_choice != on_ids[s];
    seq.push_back(on_ids[s]);
  }
  nlohmann::json r;
  r["on"] = side_json(on, item.problem->target);
  r["off"] = side_json(off, item.problem->target);
  r["status"] = "ok";
  r["diverged"] = first_div >= 0;
  r["first_divergence"] = first_div < 0 ? nlohmann::json(nullptr) : nlohmann::json(first_div);
  r["teacher_forced"] = {{"steps", on_ids.size()}, {"flips", flips}};
  return r;
}

}  // namespace

std::vector<Gsm8kCondition> parse_gsm8k_conditions(const std::string& csv) {
  std::vector<Gsm8kCondition> out;
  size_t i = 0;
  while (i <= csv.size()) {
    size_t j = csv.find(',', i);
    if (j == std::string::npos) j = csv.size();
    const std::string item = csv.substr(i, j - i);
    i = j + 1;
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    const std::string kind = item.substr(0, colon);
    Gsm8kCondition c;
    c.name = item;
    if (kind == "greedy") {
      if (colon != std::string::npos) fail_usage("--conditions: 'greedy' takes no parameter (got '{}')", item);
      c.sampler.kind = SamplerKind::Greedy;
    } else {
      double v = 0;
      if (colon == std::string::npos || !parse_number(item.substr(colon + 1), &v))
        fail_usage("--conditions: '{}' needs a number, e.g. temperature:0.7, top-p:0.9, top-k:40, min-p:0.05", item);
      if (kind == "temperature") {
        c.sampler.kind = SamplerKind::Temperature;
        c.sampler.temperature = v;
      } else if (kind == "top-p") {
        c.sampler.kind = SamplerKind::TopP;
        c.sampler.top_p = v;
      } else if (kind == "top-k") {
        c.sampler.kind = SamplerKind::TopK;
        if (v != double(int(v))) fail_usage("--conditions: '{}': k must be an integer", item);
        c.sampler.top_k = int(v);
      } else if (kind == "min-p") {
        c.sampler.kind = SamplerKind::MinP;
        c.sampler.min_p = v;
      } else {
        fail_usage("--conditions: unknown condition '{}' (greedy, temperature:T, top-p:P, top-k:K, min-p:P)", item);
      }
    }
    c.sampler.validate();
    for (const auto& e : out)
      if (e.name == c.name) fail_usage("--conditions: '{}' is listed twice", item);
    out.push_back(c);
  }
  if (out.empty()) fail_usage("--conditions: no conditions given");
  return out;
}

ShardSpec parse_shard(const std::string& spec) {
  const size_t slash = spec.find('/');
  ShardSpec s;
  auto to_int = [](const std::string& t, int* v) {
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), *v);
    return !t.empty() && ec == std::errc() && p == t.data() + t.size();
  };
  if (slash == std::string::npos || !to_int(spec.substr(0, slash), &s.index) ||
      !to_int(spec.substr(slash + 1), &s.count))
    fail_usage("--shard '{}': expected i/n (e.g. 0/4)", spec);
  if (s.count < 1 || s.index < 0 || s.index >= s.count)
    fail_usage("--shard '{}': need 0 <= i < n (shards are numbered from 0)", spec);
  return s;
}

std::string gsm8k_record_key(const nlohmann::json& r) { return r.value("key", std::string()); }

int run_gsm8k(const Gsm8kOptions& opts) {
  if (opts.models.empty()) fail_usage("eval gsm8k: give at least one --model");
  if (opts.conditions.empty() || opts.dtypes.empty() || opts.kernels.empty())
    fail_usage("eval gsm8k: --conditions, --dtypes and --kernels must not be empty");
  if (opts.max_new_tokens < 1) fail_usage("--max-new-tokens must be >= 1");
  if (opts.shots < 0) fail_usage("--shots must be >= 0");
  if (opts.limit < 0) fail_usage("--limit must be >= 0");
  if (opts.batch_size < 1) fail_usage("--batch-size must be >= 1 (got {})", opts.batch_size);
  const std::string train_path = opts.train.empty() ? default_train_path(opts.data) : opts.train;
  const auto problems = load_gsm8k(opts.data);
  std::vector<Gsm8kItem> exemplars;
  if (opts.shots > 0) exemplars = load_gsm8k(train_path);
  const size_t n_selected = opts.limit > 0 ? std::min(problems.size(), size_t(opts.limit)) : problems.size();

  nlohmann::json settings;
  settings["schema_version"] = kGsm8kSchemaVersion;
  settings["data"] = {{"file", fs::path(opts.data).filename().string()}, {"hash", file_hash(opts.data)},
                      {"records", problems.size()}};
  settings["exemplars"] = opts.shots > 0 ? nlohmann::json{{"file", fs::path(train_path).filename().string()},
                                                          {"hash", file_hash(train_path)}, {"selection", "first k"}}
                                         : nlohmann::json(nullptr);
  settings["shots"] = opts.shots;
  settings["prompt_format"] = kPromptFormat;
  settings["max_new_tokens"] = opts.max_new_tokens;
  settings["seed"] = json_u64(opts.seed);
  settings["skip_long"] = opts.skip_long;
  for (const auto& c : opts.conditions)
    settings["conditions"].push_back({{"name", c.name}, {"sampler", c.sampler.describe()}});
  for (DType d : opts.dtypes) settings["dtypes"].push_back(std::string(dtype_name(d)));
  for (KernelPolicy k : opts.kernels) settings["kernels"].push_back(policy_name(k));

  // Load each model once in fp32 for its name, config, tokenizer and the prompt-length check.
  struct Loaded {
    std::string name;
    Checkpoint ckpt;
    std::unique_ptr<Tokenizer> tok;
    std::vector<Item> items;
  };
  std::vector<Loaded> models;
  for (const auto& m : opts.models) {
    Loaded L;
    L.name = model_name(m.path);
    for (const auto& o : models)
      if (o.name == L.name)
        fail_usage("--model {}: two models are both named '{}' (the file/directory name names a model in the results)",
                   m.path, L.name);
    L.ckpt = open_checkpoint(m.path);
    auto model = Model::from_checkpoint(L.ckpt, DType::F32);
    L.tok = tokenizer_for_model(*model, m.tokenizer);
    const int context = model->config.max_seq_len;
    int too_long = 0, cut = 0;
    size_t worst = 0;
    for (size_t i = 0; i < n_selected; ++i) {
      Item it{&problems[i], L.tok->encode(gsm8k_prompt(exemplars, opts.shots, problems[i].question),
                                          L.tok->default_add_bos()),
              true};
      // At least one generated token must fit; longer generations stop at "context_full".
      it.fits = int(it.prompt_ids.size()) < context;
      too_long += !it.fits;
      cut += it.fits && int(it.prompt_ids.size()) + opts.max_new_tokens > context;
      L.items.push_back(std::move(it));
      if (L.items.back().prompt_ids.size() > L.items[worst].prompt_ids.size()) worst = L.items.size() - 1;
    }
    if (too_long > 0 && !opts.skip_long)
      fail("{}: {} of {} prompts do not fit the model's context of {} tokens with --shots {} (longest: problem {}, "
           "{} tokens); lower --shots (tiny models need --shots 0 or 1) or pass --skip-long to record them as skipped",
           m.path, too_long, n_selected, context, opts.shots, L.items[worst].problem->index, L.items[worst].prompt_ids.size());
    if (cut > 0)
      std::cerr << fmt::format("note: {}: {} of {} prompts leave fewer than --max-new-tokens {} positions in the "
                               "context of {}; those generations may stop with stop_reason \"context_full\"\n",
                               L.name, cut, n_selected, opts.max_new_tokens, context);
    settings["models"].push_back({{"name", L.name},
                                  {"fingerprint", model_fingerprint(m.path)},
                                  {"tokenizer", m.tokenizer.empty() ? nlohmann::json("auto")
                                                                    : nlohmann::json(model_fingerprint(m.tokenizer))},
                                  {"config", config_json(model->config)}});
    models.push_back(std::move(L));
  }

  std::error_code ec;
  fs::create_directories(opts.out_dir, ec);
  if (ec) fail("{}: cannot create output directory: {}", opts.out_dir, ec.message());
  const std::string manifest_path = path_in(opts.out_dir, kGsm8kManifestFile);
  const nlohmann::json shard = {{"index", opts.shard.index}, {"count", opts.shard.count}};
  if (fs::exists(manifest_path)) {
    std::ifstream in(manifest_path);
    const auto old = nlohmann::json::parse(in, nullptr, false);
    if (old.is_discarded() || !old.contains("settings")) fail("{}: not a kvparity gsm8k manifest", manifest_path);
    if (auto d = json_first_difference(old["settings"], settings, "settings"); !d.empty())
      fail("{}: this directory holds a run with different settings ({}); resume with the same settings or use "
           "another --out",
           manifest_path, d);
    if (old.value("shard", nlohmann::json()) != shard)
      fail("{}: this directory holds shard {} but --shard is {}/{}; give each shard its own --out", manifest_path,
           old.value("shard", nlohmann::json()).dump(), opts.shard.index, opts.shard.count);
  } else if (fs::exists(path_in(opts.out_dir, kGsm8kResultsFile))) {
    fail("{}: results without a manifest; use another --out", path_in(opts.out_dir, kGsm8kResultsFile));
  }
  nlohmann::json manifest = {{"kind", "kvparity-gsm8k"}, {"settings", settings}, {"shard", shard},
                             {"run", {{"limit", opts.limit}, {"threads", opts.threads},
                                      {"batch_size", opts.batch_size}}}};
  write_file_atomic(manifest_path, manifest.dump(2) + "\n");

  ResultsLog log(path_in(opts.out_dir, kGsm8kResultsFile), gsm8k_record_key);
  int written = 0;
  size_t total = 0, done = 0;
  for (size_t i = 0; i < n_selected; ++i) total += int(i % size_t(opts.shard.count)) == opts.shard.index;
  total *= models.size() * opts.dtypes.size() * opts.kernels.size() * opts.conditions.size();
  const size_t B = size_t(opts.batch_size);
  // This shard's items of a model in problem order. Groups of B consecutive ones are decoded
  // together, so a group is the same whenever the same shard is run (resumed or not).
  auto shard_items_of = [&](const Loaded& L) {
    std::vector<const Item*> items;
    for (const auto& it : L.items)
      if (int(size_t(it.problem->index) % size_t(opts.shard.count)) == opts.shard.index) items.push_back(&it);
    return items;
  };
  auto record_key = [](const Item& it, const std::string& model, DType dtype, KernelPolicy kp, const Gsm8kCondition& c) {
    return fmt::format("{}/{}/{}/{}/{}", it.problem->index, model, dtype_name(dtype), policy_name(kp), c.name);
  };
  if (!log.records().empty()) {
    size_t reused = 0;
    for (const auto& L : models)
      for (const Item* it : shard_items_of(L))
        for (DType dtype : opts.dtypes)
          for (KernelPolicy kp : opts.kernels)
            for (const auto& cond : opts.conditions) reused += log.has(record_key(*it, L.name, dtype, kp, cond));
    std::cerr << fmt::format("note: resuming {}: {} of {} records already there are re-used\n", log.path(), reused,
                             total);
  }
  for (const auto& L : models) {
    const std::vector<const Item*> shard_items = shard_items_of(L);
    for (DType dtype : opts.dtypes) {
      for (KernelPolicy kp : opts.kernels) {
        auto key_of = [&](const Item& it, const Gsm8kCondition& c) { return record_key(it, L.name, dtype, kp, c); };
        std::shared_ptr<Model> model;
        std::unique_ptr<Engine> engine;
        for (const auto& cond : opts.conditions) {
          for (size_t g0 = 0; g0 < shard_items.size(); g0 += B) {
            const size_t g1 = std::min(shard_items.size(), g0 + B);
            // A group with any record missing is decoded again whole (the same batch as before a
            // kill); only its missing records are written, once the group is done.
            size_t first_missing = g1;
            for (size_t i = g0; i < g1 && first_missing == g1; ++i)
              if (!log.has(key_of(*shard_items[i], cond))) first_missing = i;
            if (first_missing == g1) {
              done += g1 - g0;
              continue;
            }
            if (opts.progress)
              std::cerr << fmt::format("\r[eval gsm8k] {}/{}  {:<50.50}", done + first_missing - g0 + 1, total,
                                       key_of(*shard_items[first_missing], cond))
                        << std::flush;
            std::vector<const Item*> fitting;
            for (size_t i = g0; i < g1; ++i)
              if (shard_items[i]->fits) fitting.push_back(shard_items[i]);
            if (!fitting.empty() && !engine) {  // only built when something is left to run
              model = Model::from_checkpoint(L.ckpt, dtype);
              EngineOptions eo;
              eo.kernels = kp;
              eo.threads = opts.threads;
              eo.kv_dtype = KvType::of(dtype);
              engine = std::make_unique<Engine>(model, eo);
            }
            std::vector<BothPaths> paths;
            if (!fitting.empty()) paths = generate_items(*engine, *L.tok, fitting, cond, opts);
            size_t k = 0;  // index into fitting / paths
            for (size_t i = g0; i < g1; ++i) {
              const Item& it = *shard_items[i];
              ++done;
              const std::string key = key_of(it, cond);
              const bool have = log.has(key);
              nlohmann::json r;
              if (it.fits) {
                const size_t slot = k++;
                if (have) continue;
                r = item_record(*engine, it, cond, opts, paths[slot]);
              } else {
                if (have) continue;
                r["status"] = "skipped";
                r["skip_reason"] = "prompt_too_long";
              }
              r["schema_version"] = kGsm8kSchemaVersion;
              r["key"] = key;
              r["problem"] = it.problem->index;
              r["model"] = L.name;
              r["condition"] = cond.name;
              r["sampler"] = cond.sampler.describe();
              r["dtype"] = std::string(dtype_name(dtype));
              r["kernels"] = policy_name(kp);
              r["target"] = it.problem->target;
              r["prompt_tokens"] = it.prompt_ids.size();
              log.append(r);
              ++written;
            }
          }
        }
      }
    }
  }
  if (opts.progress) std::cerr << "\r[eval gsm8k] " << total << "/" << total << " done" << std::string(50, ' ') << "\n";
  return written;
}

}  // namespace kvp
