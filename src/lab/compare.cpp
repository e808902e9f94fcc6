#include "lab/compare.h"

#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "core/error.h"
#include "core/json_u64.h"
#include "lab/numerics_identity.h"
#include "lab/results_log.h"
#include "lab/results_manifest.h"
#include "lab/routing_difference.h"
#include "lab/side_runner.h"
#include "lab/side_timing.h"
#include "lab/step_metrics.h"
#include "model/model.h"
#include "runtime/chat_for_model.h"
#include "runtime/generator.h"
#include "runtime/rng.h"
#include "runtime/tokenizer_for_model.h"

namespace kvp {

std::string Condition::key() const {
  return fmt::format("{}/{}{}", sides_key(baseline, candidate), sampler.describe(), control ? "/control" : "");
}

namespace {

void add_resolved(CompareOptions& opts, const RunDefaults& point, const SamplerConfig& sampler, bool control) {
  Condition c;
  c.point = point;
  c.baseline = opts.baseline.resolve(point);
  c.candidate = opts.candidate.resolve(point);
  c.sampler = sampler;
  c.control = control;
  for (const auto& e : opts.conditions)
    if (e.key() == c.key())
      fail_usage("--baseline '{}' / --candidate '{}': two conditions of the sweep are the same comparison ({}); a "
                 "key both SPECs set overrides the option that sweeps it",
                 opts.baseline.text(), opts.candidate.text(), c.key());
  opts.conditions.push_back(c);
}

}  // namespace

void add_condition(CompareOptions& opts, const RunDefaults& point, const SamplerConfig& sampler) {
  add_resolved(opts, point, sampler, false);
}

int add_fp32_controls(CompareOptions& opts) {
  const std::vector<Condition> given = opts.conditions;
  int added = 0;
  for (const auto& c : given) {
    if (c.control) continue;
    RunDefaults p = c.point;
    p.dtype = DType::F32;
    p.kv_dtype = KvType::of(DType::F32);
    Condition k;
    k.baseline = opts.baseline.resolve(p);
    k.candidate = opts.candidate.resolve(p);
    if (k.baseline == c.baseline && k.candidate == c.candidate) continue;  // already fp32 on both sides
    k.sampler = c.sampler;
    k.control = true;
    bool dup = false;
    for (const auto& e : opts.conditions) dup = dup || e.key() == k.key();
    if (dup) continue;
    add_resolved(opts, p, c.sampler, true);
    ++added;
  }
  return added;
}

uint64_t sequence_id_for(const std::string& id) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : id) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

namespace {

std::string record_key(const nlohmann::json& r) {
  return r.value("prompt_id", std::string()) + "\n" + r.value("condition", std::string());
}

// A prompt is one user message when the run has a chat template.
std::vector<int> encode_prompt(const Tokenizer& tok, const Prompt& prompt, const ChatEncoder* chat) {
  if (chat) return chat->encode({{"user", prompt.text}});
  return tok.encode(prompt.text, tok.default_add_bos());
}

GenerationConfig generation_config(const Prompt& prompt, const Condition& cond, const CompareOptions& opts) {
  GenerationConfig g;
  g.max_new_tokens = opts.max_new_tokens;
  g.sampler = cond.sampler;
  g.seed = opts.seed;
  g.sequence_id = sequence_id_for(prompt.id);
  g.stop_at_eos = opts.stop_at_eos;
  return g;
}

nlohmann::json batch_place(const RunSettings& s, const SideTrace& t) {
  if (s.batch_size == 1) return nullptr;
  return {{"batch_size", t.batch_size}, {"slot", t.slot}};
}

// The record of one prompt: both free-running traces and the baseline's teacher-forced logits
// along the candidate's trajectory.
nlohmann::json make_record(const Prompt& prompt, size_t prompt_index, const Condition& cond, const CompareOptions& opts,
                           const std::string& model_name, const std::vector<int>& prompt_ids, const SideTrace& cand,
                           const SideTrace& base, const ForcedSteps& forced_steps, const ModelConfig& config) {
  const int vocab = config.vocab_size;
  const StepLogits& forced = forced_steps.logits;
  const GenerationConfig g = generation_config(prompt, cond, opts);
  const int first_div = first_divergence(cand.trajectory, base.trajectory);
  nlohmann::json on_tok = nlohmann::json::array(), off_tok = nlohmann::json::array(), mx = nlohmann::json::array(),
                 mean = nlohmann::json::array(), kl = nlohmann::json::array(), margin = nlohmann::json::array();
  int flips = 0;
  bool bitwise = true;
  const std::vector<int>& ids = cand.trajectory;
  if (forced.size() != ids.size() || cand.logits.size() != ids.size())
    fail("compare: prompt {}: the teacher-forced baseline has {} steps for {} candidate tokens", prompt.id,
         forced.size(), ids.size());
  for (size_t s = 0; s < ids.size(); ++s) {
    const float* tf = forced[s].data();
    const double u = uniform_at(g.seed, g.sequence_id, s);
    const int base_choice = sample_token(tf, vocab, cond.sampler, u);
    const StepMetrics m = step_metrics(cand.logits[s].data(), tf, vocab);
    bitwise = bitwise && std::memcmp(cand.logits[s].data(), tf, size_t(vocab) * sizeof(float)) == 0;
    on_tok.push_back(ids[s]);
    off_tok.push_back(base_choice);
    mx.push_back(m.max_abs_logit_diff);
    mean.push_back(m.mean_abs_logit_diff);
    kl.push_back(m.kl);
    margin.push_back(m.top1_margin);
    flips += base_choice != ids[s];
  }
  nlohmann::json r;
  r["schema_version"] = kCompareSchemaVersion;
  r["model"] = model_name;
  r["prompt_id"] = prompt.id;
  r["prompt_index"] = prompt_index;
  r["prompt"] = prompt.text;
  r["condition"] = cond.key();
  r["baseline"] = cond.baseline.spec();
  r["candidate"] = cond.candidate.spec();
  // The candidate's settings under the names of the cache ON/OFF study.
  r["dtype"] = std::string(dtype_name(cond.candidate.dtype));
  r["kv_dtype"] = cond.candidate.kv_dtype.name();
  r["kernels"] = policy_name(cond.candidate.kernels);
  r["sampler"] = cond.sampler.describe();
  r["control"] = cond.control;
  r["seed"] = json_u64(opts.seed);
  r["max_new_tokens"] = opts.max_new_tokens;
  r["prompt_ids"] = prompt_ids;
  r["on_ids"] = cand.trajectory;
  r["off_ids"] = base.trajectory;
  r["on_text"] = cand.result.text;
  r["off_text"] = base.result.text;
  r["first_divergence"] = first_div < 0 ? nlohmann::json(nullptr) : nlohmann::json(first_div);
  r["teacher_forced"] = {{"on_token", on_tok}, {"off_token", off_tok}, {"max_abs_logit_diff", mx},
                         {"mean_abs_logit_diff", mean}, {"kl", kl}, {"top1_margin", margin}, {"flips", flips},
                         {"logits_bitwise_equal", bitwise}};
  if (config.is_moe())
    r["teacher_forced"]["routing"] =
        routing_difference(config, cand.experts, forced_steps.experts, "compare: prompt " + prompt.id);
  if (cond.baseline.batch_size > 1 || cond.candidate.batch_size > 1)
    r["batch"] = {{"baseline", batch_place(cond.baseline, base)}, {"candidate", batch_place(cond.candidate, cand)}};
  return r;
}

std::shared_ptr<const Model> model_for(const Checkpoint& ckpt, DType dtype, const std::shared_ptr<const Model>& have) {
  if (have != nullptr && have->dtype == dtype) return have;
  return std::shared_ptr<const Model>(Model::from_checkpoint(ckpt, dtype));
}

}  // namespace

size_t group_size(const Condition& cond) {
  return size_t(std::lcm(cond.baseline.batch_size, cond.candidate.batch_size));
}

nlohmann::json compare_settings(const CompareOptions& opts) {
  // The prompts by content: the same prompts read from another file are the same study.
  uint64_t h = fnv1a64("", 0);
  for (const auto& p : opts.prompts) {
    h = fnv1a64(p.id.data(), p.id.size() + 1, h);  // with the terminating NUL as a separator
    h = fnv1a64(p.text.data(), p.text.size() + 1, h);
  }
  nlohmann::json conditions = nlohmann::json::array();
  std::vector<RunSettings> sides;
  for (const auto& c : opts.conditions) {
    conditions.push_back({{"condition", c.key()}, {"baseline", c.baseline.spec()}, {"candidate", c.candidate.spec()}});
    sides.insert(sides.end(), {c.baseline, c.candidate});
  }
  nlohmann::json settings = {{"prompts", {{"count", opts.prompts.size()}, {"hash", fmt::format("fnv1a64={:016x}", h)}}},
                             {"schema_version", kCompareSchemaVersion},
                             {"baseline", opts.baseline.text()},
                             {"candidate", opts.candidate.text()},
                             {"conditions", conditions},
                             {"max_new_tokens", opts.max_new_tokens},
                             {"seed", json_u64(opts.seed)},
                             {"stop_at_eos", opts.stop_at_eos}};
  if (!opts.shard.whole()) settings["shard"] = opts.shard.json();
  add_numerics_identity(settings, sides);
  return settings;
}

namespace {

// A folder holds one slice of a study: resuming it as another slice would mix the two (the
// settings check would refuse it too, naming "shard/index"; this says what to do).
void refuse_other_shard(const CompareOptions& opts) {
  const nlohmann::json m = read_results_manifest(opts.out_dir);
  if (m.is_null() || !m["commands"].contains("compare")) return;
  const nlohmann::json settings = m["commands"]["compare"].value("settings", nlohmann::json::object());
  const nlohmann::json held = settings.is_object() ? settings.value("shard", ShardSpec{}.json()) : nlohmann::json();
  if (!held.is_object() || held == opts.shard.json() ||
      ResultsLog::read_all(path_in(opts.out_dir, kCompareResultsFile)).empty())
    return;
  const std::optional<ShardSpec> spec = shard_from_json(held);
  const std::string was = held == ShardSpec{}.json() ? "the whole study"
                          : spec                     ? "shard " + spec->text()
                                                     : "shard " + held.dump();
  fail(
      "{}: this directory holds {} but this run is {}; give each shard its own --out (and join them with `kvparity "
      "merge`)",
      path_in(opts.out_dir, kResultsManifestFile), was,
      opts.shard.whole() ? "the whole study (no shard)" : "shard " + opts.shard.text());
}

}  // namespace

int run_compare(const CompareOptions& opts) {
  if (opts.prompts.empty()) fail_usage("compare: no prompts");
  if (opts.conditions.empty()) fail_usage("compare: no conditions");
  if (opts.max_new_tokens < 1) fail_usage("--max-new-tokens must be >= 1");
  if (opts.limit < 0) fail_usage("--limit must be >= 0");
  const size_t n = opts.limit > 0 ? std::min(opts.prompts.size(), size_t(opts.limit)) : opts.prompts.size();
  for (const Condition& cond : opts.conditions) {
    cond.sampler.validate();
    // A group of one is the solo run itself: batching needs two prompts to compare anything.
    for (const auto* side : {&cond.baseline, &cond.candidate})
      if (side->batch_size > 1 && n < 2)
        fail_usage("{}: batch-size={} needs at least two prompts (a batch of one prompt is its solo run)",
                   side == &cond.baseline ? "--baseline" : "--candidate", side->batch_size);
  }
  const Checkpoint ckpt = open_checkpoint(opts.model);
  // Everything that could refuse the run happens before the first write to the folder: a tensor
  // of the wrong shape and a missing or unreadable tokenizer too.
  weights_footprint(ckpt, DType::F32);  // the load's checks of every tensor, without converting one
  const std::unique_ptr<Tokenizer> tok = tokenizer_for_checkpoint(ckpt, opts.tokenizer);
  const std::optional<ChatEncoder> chat =
      ChatEncoder::of(chat_template_for(ckpt, opts.tokenizer, opts.chat), *tok, opts.model);
  const ChatEncoder* enc = chat ? &*chat : nullptr;
  for (size_t i = 0; i < n; ++i) {
    const Prompt& p = opts.prompts[i];
    const std::vector<int> ids = encode_prompt(*tok, p, enc);
    if (int(ids.size()) > ckpt.config.max_seq_len)
      fail("prompt '{}': {} tokens do not fit the context of {} ({} positions); shorten it or leave it out", p.id,
           ids.size(), opts.model, ckpt.config.max_seq_len);
    require_embedding_rows(ids, ckpt.config.vocab_size, "prompt '" + p.id + "'", opts.model);
  }
  const nlohmann::json model = model_identity(ckpt, opts.model, opts.tokenizer);
  nlohmann::json settings = compare_settings(opts);
  if (chat) settings["chat_template"] = chat->chat_template().describe();
  refuse_other_shard(opts);
  check_results_manifest(opts.out_dir, "compare", model, settings, {kCompareResultsFile});
  record_results_manifest(opts.out_dir, "compare", model, settings, {kCompareResultsFile});
  ResultsLog log(path_in(opts.out_dir, kCompareResultsFile), record_key);
  StudyTiming timing(opts.out_dir);
  const std::string name = model["name"].get<std::string>();
  int written = 0;
  size_t total = 0;  // this shard's records
  for (const Condition& cond : opts.conditions)
    for (size_t i = 0; i < n; ++i) total += opts.shard.takes(i / group_size(cond));
  if (!log.records().empty()) {
    size_t reused = 0;
    for (const Condition& cond : opts.conditions)
      for (size_t i = 0; i < n; ++i)
        reused += opts.shard.takes(i / group_size(cond)) && log.has(opts.prompts[i].id + "\n" + cond.key());
    std::cerr << fmt::format("note: resuming {}: {} of {} records already there are re-used\n", log.path(), reused,
                             total);
  }
  size_t done = 0;
  for (const Condition& cond : opts.conditions) {
    std::unique_ptr<SideRunner> cand, base;
    const size_t G = group_size(cond);
    for (size_t g0 = 0; g0 < n; g0 += G) {
      if (!opts.shard.takes(g0 / G)) continue;
      const size_t g1 = std::min(n, g0 + G);
      auto want = [&](size_t i) { return !log.has(opts.prompts[g0 + i].id + "\n" + cond.key()); };
      bool complete = true;
      for (size_t i = g0; i < g1; ++i) complete = complete && !want(i - g0);
      if (complete) {
        done += g1 - g0;
        continue;
      }
      if (!cand) {  // only built when something is left to run, so a finished resume is instant
        const auto cand_model = model_for(ckpt, cond.candidate.dtype, nullptr);
        cand = std::make_unique<SideRunner>(cond.candidate, cand_model);
        base = std::make_unique<SideRunner>(cond.baseline, model_for(ckpt, cond.baseline.dtype, cand_model));
      }
      std::vector<SidePrompt> group;
      for (size_t i = g0; i < g1; ++i)
        group.push_back({encode_prompt(*tok, opts.prompts[i], enc), sequence_id_for(opts.prompts[i].id)});
      GenerationConfig g = generation_config(opts.prompts[g0], cond, opts);
      if (chat) g.turn_end_ids = chat->turn_end_ids();
      std::vector<SideTrace> cand_runs, base_runs;
      std::vector<ForcedSteps> forced;
      const SideTime ct = timed(*cand, [&] { cand_runs = cand->generate(group, g, tok.get(), want, true); });
      const SideTime bt = timed(*base, [&] { base_runs = base->generate(group, g, tok.get(), want, true); });
      const SideTime ft =
          timed(*base, [&] { forced = base->teacher_force(group, g, tok.get(), cand_runs, base_runs, want); });
      timing.group(
          {{"model", name}, {"condition", cond.key()}, {"first_prompt", opts.prompts[g0].id}, {"items", g1 - g0}}, ct,
          bt, &ft);
      for (size_t i = g0; i < g1; ++i) {
        ++done;
        if (!want(i - g0)) continue;
        const Prompt& p = opts.prompts[i];
        if (opts.progress)
          std::cerr << fmt::format("\r[compare] {}/{}  {:<40.40}  prompt {}", done, total, cond.key(), p.id)
                    << std::flush;
        log.append(make_record(p, i, cond, opts, name, group[i - g0].ids, cand_runs[i - g0], base_runs[i - g0],
                               forced[i - g0], cand->model().config));
        ++written;
      }
    }
  }
  if (opts.progress) std::cerr << "\r[compare] " << total << "/" << total << " done" << std::string(50, ' ') << "\n";
  if (opts.time_totals) timing.print_totals(std::cerr, opts.candidate.text(), opts.baseline.text());
  return written;
}

}  // namespace kvp
