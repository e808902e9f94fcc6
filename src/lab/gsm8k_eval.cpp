#include "lab/gsm8k_eval.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <optional>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_u64.h"
#include "lab/answer_extract.h"
#include "lab/compare.h"
#include "lab/gsm8k_prompt.h"
#include "lab/numerics_identity.h"
#include "lab/prompt_set.h"
#include "lab/results_log.h"
#include "lab/results_manifest.h"
#include "lab/routing_difference.h"
#include "lab/side_runner.h"
#include "lab/side_timing.h"
#include "model/model.h"
#include "runtime/chat_for_model.h"
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

// An item's record from both sides' free-running generations and the tokens the baseline chooses
// teacher-forced along the candidate's trajectory (flips exactly as `compare` defines them,
// docs/metrics.md: the same draw on the forced logits; SideRunner::teacher_force_choices); `forced`
// null: flips not measured (--no-flips), teacher_forced null, the rest as it would be. Divergence
// and flips are over everything each side sampled: a stop string cuts the tokens it straddles out
// of output_ids (dropped_ids), but they were still chosen, and can differ.
nlohmann::json item_record(const Item& item, const SideTrace& cand, const SideTrace& base,
                           const SideRunner::ForcedChoices* forced_choices, const ModelConfig& config) {
  const std::vector<int>* forced = forced_choices == nullptr ? nullptr : &forced_choices->tokens;
  const int first_div = first_divergence(cand.trajectory, base.trajectory);
  nlohmann::json r;
  r["on"] = side_json(cand.result, item.problem->target);
  r["off"] = side_json(base.result, item.problem->target);
  r["status"] = "ok";
  r["diverged"] = first_div >= 0;
  r["first_divergence"] = first_div < 0 ? nlohmann::json(nullptr) : nlohmann::json(first_div);
  r["teacher_forced"] = nullptr;
  if (forced == nullptr) return r;
  if (forced->size() != cand.trajectory.size())
    fail("eval gsm8k: problem {}: {} teacher-forced steps for {} candidate tokens", item.problem->index, forced->size(),
         cand.trajectory.size());
  int flips = 0;
  for (size_t s = 0; s < forced->size(); ++s) flips += (*forced)[s] != cand.trajectory[s];
  r["teacher_forced"] = {{"steps", cand.trajectory.size()}, {"flips", flips}};
  if (config.is_moe())
    r["teacher_forced"]["routing"] = routing_difference(config, cand.experts, forced_choices->experts,
                                                        fmt::format("eval gsm8k: problem {}", item.problem->index));
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

bool any_sampling(const std::vector<Gsm8kCondition>& conditions) {
  return std::any_of(conditions.begin(), conditions.end(),
                     [](const Gsm8kCondition& c) { return c.sampler.kind != SamplerKind::Greedy; });
}

std::string gsm8k_record_key(const nlohmann::json& r) { return r.value("key", std::string()); }

nlohmann::json gsm8k_settings_with_defaults(nlohmann::json settings) {
  // Runs before --no-flips always counted flips; they and runs that count them are the same study.
  if (settings.is_object() && !settings.contains("flips")) settings["flips"] = true;
  return settings;
}

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

  // The grid of one model: dtype x KV type x kernels, each with both sides resolved.
  struct Point {
    DType dtype;
    std::string kv;  // the grid's KV type (the dtype's own unless --kv-dtypes)
    KernelPolicy kernels;
    RunSettings baseline, candidate;
  };
  std::vector<Point> grid;
  for (DType dtype : opts.dtypes) {
    std::vector<std::optional<KvType>> kvs;
    for (const KvType& k : opts.kv_dtypes) kvs.push_back(k);
    if (kvs.empty()) kvs.push_back(std::nullopt);
    for (const auto& kv : kvs)
      for (KernelPolicy kp : opts.kernels) {
        RunDefaults d;
        d.dtype = dtype;
        d.kv_dtype = kv;
        d.kernels = kp;
        d.threads = opts.threads;
        d.device = opts.device;
        d.simd = opts.simd;
        d.batch_size = opts.batch_size;
        Point pt{dtype, kv ? kv->name() : KvType::of(dtype).name(), kp, opts.baseline.resolve(d),
                 opts.candidate.resolve(d)};
        for (const Point& e : grid)
          if (e.baseline == pt.baseline && e.candidate == pt.candidate)
            fail_usage("--baseline '{}' / --candidate '{}': two points of the --dtype/--kv-dtypes/--kernels grid are the "
                       "same comparison ({}); a key both SPECs set overrides the option that sweeps it",
                       opts.baseline.text(), opts.candidate.text(), sides_key(pt.baseline, pt.candidate));
        grid.push_back(pt);
      }
  }

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
  // Part of the settings so that a directory never mixes records with and without flips.
  settings["flips"] = opts.flips;
  for (const auto& c : opts.conditions)
    settings["conditions"].push_back({{"name", c.name}, {"sampler", c.sampler.describe()}});
  for (DType d : opts.dtypes) settings["dtypes"].push_back(std::string(dtype_name(d)));
  settings["kv_dtypes"] = nullptr;  // each dtype's own
  for (const KvType& k : opts.kv_dtypes) settings["kv_dtypes"].push_back(k.name());
  for (KernelPolicy k : opts.kernels) settings["kernels"].push_back(policy_name(k));
  settings["baseline"] = opts.baseline.text();
  settings["candidate"] = opts.candidate.text();
  std::vector<RunSettings> sides;
  for (const Point& pt : grid) sides.insert(sides.end(), {pt.baseline, pt.candidate});
  add_numerics_identity(settings, sides);

  // Open each checkpoint for its name, config, tokenizer and the prompt-length check (its weights
  // are built later, once per dtype a side needs: at 7B an fp32 copy here would cost 27 GB).
  struct Loaded {
    std::string name;
    Checkpoint ckpt;
    std::unique_ptr<Tokenizer> tok;
    std::vector<Item> items;
    std::vector<int> turn_end_ids;  // the chat template's end of turn: generation stops there
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
    weights_footprint(L.ckpt, DType::F32);  // the load's checks of every tensor, before anything is written
    L.tok = tokenizer_for_checkpoint(L.ckpt, m.tokenizer);
    const std::optional<ChatEncoder> chat =
        ChatEncoder::of(chat_template_for(L.ckpt, m.tokenizer, opts.chat), *L.tok, m.path);
    if (chat) L.turn_end_ids = chat->turn_end_ids();
    const int context = L.ckpt.config.max_seq_len;
    int too_long = 0, cut = 0;
    size_t worst = 0;
    for (size_t i = 0; i < n_selected; ++i) {
      Item it{&problems[i],
              chat ? chat->encode(gsm8k_chat_messages(exemplars, opts.shots, problems[i].question))
                   : L.tok->encode(gsm8k_prompt(exemplars, opts.shots, problems[i].question), L.tok->default_add_bos()),
              true};
      require_embedding_rows(it.prompt_ids, L.ckpt.config.vocab_size,
                             fmt::format("problem {}'s prompt", problems[i].index), m.path);
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
                                  {"config", config_json(L.ckpt.config)}});
    if (chat) settings["models"].back()["chat_template"] = chat->chat_template().describe();
    models.push_back(std::move(L));
  }

  std::error_code ec;
  fs::create_directories(opts.out_dir, ec);
  if (ec) fail("{}: cannot create output directory: {}", opts.out_dir, ec.message());
  const std::string manifest_path = path_in(opts.out_dir, kGsm8kManifestFile);
  const nlohmann::json shard = opts.shard.json();
  nlohmann::json built_by;  // the builds that wrote this folder's records before
  if (fs::exists(manifest_path)) {
    std::ifstream in(manifest_path);
    const auto old = nlohmann::json::parse(in, nullptr, false);
    if (old.is_discarded() || !old.contains("settings")) fail("{}: not a kvparity gsm8k manifest", manifest_path);
    built_by = old.value("built_by", nlohmann::json());
    if (auto d = json_first_difference(
            with_numerics_of(gsm8k_settings_with_defaults(old["settings"]), settings, manifest_path), settings,
            "settings");
        !d.empty()) {
      const std::string hint = !d.starts_with("settings/flips:") ? numerics_difference_hint(d)
                               : opts.flips                      ? "; it was run with --no-flips"
                                                                 : "; it was run without --no-flips";
      fail(
          "{}: this directory holds a run with different settings ({}{}); resume with the same settings or use "
          "another --out",
          manifest_path, d, hint);
    }
    if (old.value("shard", nlohmann::json()) != shard)
      fail("{}: this directory holds shard {} but --shard is {}; give each shard its own --out", manifest_path,
           old.value("shard", nlohmann::json()).dump(), opts.shard.text());
  } else if (fs::exists(path_in(opts.out_dir, kGsm8kResultsFile))) {
    fail("{}: results without a manifest; use another --out", path_in(opts.out_dir, kGsm8kResultsFile));
  }
  nlohmann::json manifest = {
      {"kind", "kvparity-gsm8k"},
      {"settings", settings},
      {"shard", shard},
      {"run", {{"limit", opts.limit}, {"threads", opts.threads}, {"batch_size", opts.batch_size}}},
      {"built_by", with_build(built_by)}};
  write_file_atomic(manifest_path, manifest.dump(2) + "\n");

  ResultsLog log(path_in(opts.out_dir, kGsm8kResultsFile), gsm8k_record_key);
  StudyTiming timing(opts.out_dir);
  int written = 0;
  size_t total = 0, done = 0;
  for (size_t i = 0; i < n_selected; ++i) total += opts.shard.takes(i);
  total *= models.size() * grid.size() * opts.conditions.size();
  // This shard's items of a model in problem order. Groups of consecutive ones are decoded
  // together, so a group is the same whenever the same shard is run (resumed or not).
  auto shard_items_of = [&](const Loaded& L) {
    std::vector<const Item*> items;
    for (const auto& it : L.items)
      if (opts.shard.takes(size_t(it.problem->index))) items.push_back(&it);
    return items;
  };
  auto record_key = [](const Item& it, const std::string& model, const Point& pt, const Gsm8kCondition& c) {
    return fmt::format("{}/{}/{}/kv={}/{}/{}", it.problem->index, model, dtype_name(pt.dtype), pt.kv,
                       policy_name(pt.kernels), c.name);
  };
  if (!log.records().empty()) {
    size_t reused = 0;
    for (const auto& L : models)
      for (const Item* it : shard_items_of(L))
        for (const Point& pt : grid)
          for (const auto& cond : opts.conditions) reused += log.has(record_key(*it, L.name, pt, cond));
    std::cerr << fmt::format("note: resuming {}: {} of {} records already there are re-used\n", log.path(), reused,
                             total);
  }
  for (const auto& L : models) {
    const std::vector<const Item*> shard_items = shard_items_of(L);
    std::map<DType, std::shared_ptr<const Model>> loaded;  // this model in each dtype a side needs
    auto model_in = [&](DType d) {
      auto& m = loaded[d];
      if (m == nullptr) m = std::shared_ptr<const Model>(Model::from_checkpoint(L.ckpt, d));
      return m;
    };
    for (const Point& pt : grid) {
      auto key_of = [&](const Item& it, const Gsm8kCondition& c) { return record_key(it, L.name, pt, c); };
      std::unique_ptr<SideRunner> cand, base;
      const size_t G = size_t(std::lcm(pt.baseline.batch_size, pt.candidate.batch_size));
      for (const auto& cond : opts.conditions) {
        for (size_t g0 = 0; g0 < shard_items.size(); g0 += G) {
          const size_t g1 = std::min(shard_items.size(), g0 + G);
          // A group with any record missing is decoded again whole (the same batches as before a
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
          std::vector<SidePrompt> group;
          for (size_t i = g0; i < g1; ++i)
            if (shard_items[i]->fits) {
              fitting.push_back(shard_items[i]);
              group.push_back({shard_items[i]->prompt_ids, generation_config(*shard_items[i], cond, opts).sequence_id});
            }
          std::vector<SideTrace> cand_runs, base_runs;
          std::vector<SideRunner::ForcedChoices> forced;
          auto want = [&](size_t k) { return !log.has(key_of(*fitting[k], cond)); };
          if (!fitting.empty()) {
            if (!cand) {  // only built when something is left to run
              std::erase_if(loaded, [&](const auto& m) {
                return m.first != pt.candidate.dtype && m.first != pt.baseline.dtype;
              });
              cand = std::make_unique<SideRunner>(pt.candidate, model_in(pt.candidate.dtype));
              base = std::make_unique<SideRunner>(pt.baseline, model_in(pt.baseline.dtype));
            }
            GenerationConfig g = generation_config(*fitting[0], cond, opts);
            g.turn_end_ids = L.turn_end_ids;
            const SideTime ct = timed(*cand, [&] { cand_runs = cand->generate(group, g, L.tok.get(), want, false); });
            const SideTime bt = timed(*base, [&] { base_runs = base->generate(group, g, L.tok.get(), want, false); });
            SideTime ft;
            if (opts.flips)
              ft = timed(*base, [&] {
                forced = base->teacher_force_choices(group, g, L.tok.get(), cand_runs, base_runs, want);
              });
            timing.group({{"model", L.name},
                          {"dtype", std::string(dtype_name(pt.dtype))},
                          {"kv_dtype", pt.kv},
                          {"kernels", policy_name(pt.kernels)},
                          {"condition", cond.name},
                          {"first_problem", fitting[0]->problem->index},
                          {"items", fitting.size()}},
                         ct, bt, opts.flips ? &ft : nullptr);
          }
          size_t k = 0;  // index into fitting / group
          for (size_t i = g0; i < g1; ++i) {
            const Item& it = *shard_items[i];
            ++done;
            const std::string key = key_of(it, cond);
            const bool have = log.has(key);
            nlohmann::json r;
            if (it.fits) {
              const size_t slot = k++;
              if (have) continue;
              r = item_record(it, cand_runs[slot], base_runs[slot], opts.flips ? &forced[slot] : nullptr,
                              cand->model().config);
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
            r["dtype"] = std::string(dtype_name(pt.dtype));
            r["kv_dtype"] = pt.kv;
            r["kernels"] = policy_name(pt.kernels);
            r["baseline"] = pt.baseline.spec();
            r["candidate"] = pt.candidate.spec();
            r["target"] = it.problem->target;
            r["prompt_tokens"] = it.prompt_ids.size();
            log.append(r);
            ++written;
          }
        }
      }
    }
    loaded.clear();
  }
  if (opts.progress) std::cerr << "\r[eval gsm8k] " << total << "/" << total << " done" << std::string(50, ' ') << "\n";
  if (opts.time_totals) timing.print_totals(std::cerr, opts.candidate.text(), opts.baseline.text());
  return written;
}

}  // namespace kvp
