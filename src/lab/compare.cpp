#include "lab/compare.h"

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_u64.h"
#include "lab/results_log.h"
#include "lab/results_manifest.h"
#include "lab/step_metrics.h"
#include "model/model.h"
#include "runtime/batch_compare.h"
#include "runtime/generator.h"
#include "runtime/rng.h"
#include "runtime/tokenizer_for_model.h"

namespace kvp {

std::string Condition::key() const {
  return fmt::format("{}/kv={}/{}/{}{}", dtype_name(dtype), kv_dtype.name(), policy_name(kernels),
                     sampler.describe(), control ? "/control" : "");
}

void add_fp32_controls(std::vector<Condition>& conditions) {
  std::vector<Condition> extra;
  for (const auto& c : conditions) {
    if (c.control || (c.dtype == DType::F32 && c.kv_dtype == KvType::of(DType::F32))) continue;
    Condition k = c;
    k.dtype = DType::F32;
    k.kv_dtype = KvType::of(DType::F32);
    k.control = true;
    bool dup = false;
    for (const auto& e : extra) dup = dup || e.key() == k.key();
    if (!dup) extra.push_back(k);
  }
  conditions.insert(conditions.end(), extra.begin(), extra.end());
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

using Logits = std::vector<std::vector<float>>;

// One prompt's share of a batched cache-ON run.
struct BatchTrace {
  int batch_size = 0, slot = 0;
  std::vector<int> ids;
  Logits logits;
};

std::vector<int> encode_prompt(const Tokenizer& tok, const Prompt& prompt) {
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

// `batch`: this prompt's batched run (batch_size > 1), compared with the solo cache-ON run.
nlohmann::json run_one(Engine& engine, const Tokenizer& tok, const Prompt& prompt, const Condition& cond,
                       const CompareOptions& opts, const std::string& model_name, const BatchTrace* batch) {
  const Model& model = engine.model();
  const int vocab = model.config.vocab_size;
  const std::vector<int> prompt_ids = encode_prompt(tok, prompt);
  GenerationConfig g = generation_config(prompt, cond, opts);
  Logits on_logits, off_logits;
  g.cache = CacheMode::On;
  const auto on = engine.generate(prompt_ids, g, &tok,
                                  [&](const StepInfo& s) { on_logits.emplace_back(s.logits, s.logits + s.vocab); });
  g.cache = CacheMode::Off;
  const auto off = engine.generate(prompt_ids, g, &tok,
                                   [&](const StepInfo& s) { off_logits.emplace_back(s.logits, s.logits + s.vocab); });
  int first_div = -1;
  const size_t common = std::min(on.output_ids.size(), off.output_ids.size());
  for (size_t i = 0; i < common && first_div < 0; ++i)
    if (on.output_ids[i] != off.output_ids[i]) first_div = int(i);
  if (first_div < 0 && on.output_ids.size() != off.output_ids.size()) first_div = int(common);

  // Teacher forcing: the cache-OFF path at step s sees prompt + on_ids[0..s). Up to and including
  // the first divergence its prefixes equal the free-running OFF path's, so those logits are reused.
  std::vector<int> seq = prompt_ids;
  nlohmann::json on_tok = nlohmann::json::array(), off_tok = nlohmann::json::array(), mx = nlohmann::json::array(),
                 mean = nlohmann::json::array(), kl = nlohmann::json::array(), margin = nlohmann::json::array();
  ForwardOptions fo;
  int flips = 0;
  for (size_t s = 0; s < on.output_ids.size(); ++s) {
    const float* tf;
    if ((first_div < 0 || int(s) <= first_div) && s < off_logits.size()) {
      tf = off_logits[s].data();
    } else {
      const float* all = engine.forward_uncached(seq.data(), int(seq.size()), fo);
      tf = all + (seq.size() - 1) * size_t(vocab);
    }
    const double u = uniform_at(g.seed, g.sequence_id, s);
    const int off_choice = sample_token(tf, vocab, cond.sampler, u);
    const StepMetrics m = step_metrics(on_logits[s].data(), tf, vocab);
    on_tok.push_back(on.output_ids[s]);
    off_tok.push_back(off_choice);
    mx.push_back(m.max_abs_logit_diff);
    mean.push_back(m.mean_abs_logit_diff);
    kl.push_back(m.kl);
    margin.push_back(m.top1_margin);
    flips += off_choice != on.output_ids[s];
    seq.push_back(on.output_ids[s]);
  }
  nlohmann::json r;
  r["schema_version"] = 1;
  r["model"] = model_name;
  r["prompt_id"] = prompt.id;
  r["prompt"] = prompt.text;
  r["condition"] = cond.key();
  r["dtype"] = std::string(dtype_name(cond.dtype));
  r["kv_dtype"] = cond.kv_dtype.name();
  r["kernels"] = policy_name(cond.kernels);
  r["sampler"] = cond.sampler.describe();
  r["control"] = cond.control;
  r["seed"] = json_u64(opts.seed);
  r["max_new_tokens"] = opts.max_new_tokens;
  r["prompt_ids"] = prompt_ids;
  r["on_ids"] = on.output_ids;
  r["off_ids"] = off.output_ids;
  r["on_text"] = on.text;
  r["off_text"] = off.text;
  r["first_divergence"] = first_div < 0 ? nlohmann::json(nullptr) : nlohmann::json(first_div);
  r["teacher_forced"] = {{"on_token", on_tok}, {"off_token", off_tok}, {"max_abs_logit_diff", mx},
                         {"mean_abs_logit_diff", mean}, {"kl", kl}, {"top1_margin", margin}, {"flips", flips}};
  if (batch != nullptr) {
    const BatchSoloSequence q = compare_batch_sequence(batch->ids, batch->logits, on.output_ids, on_logits);
    r["batch"] = {{"batch_size", batch->batch_size},
                  {"slot", batch->slot},
                  {"first_divergence", q.first_divergence < 0 ? nlohmann::json(nullptr) : nlohmann::json(q.first_divergence)},
                  {"logits_bitwise_equal", q.logits_bitwise_equal},
                  {"max_abs_logit_diff", q.max_abs_logit_diff}};
  }
  return r;
}

}  // namespace

nlohmann::json compare_settings(const CompareOptions& opts) {
  // The prompts by content: the same prompts read from another file are the same study.
  uint64_t h = fnv1a64("", 0);
  for (const auto& p : opts.prompts) {
    h = fnv1a64(p.id.data(), p.id.size() + 1, h);  // with the terminating NUL as a separator
    h = fnv1a64(p.text.data(), p.text.size() + 1, h);
  }
  nlohmann::json conditions = nlohmann::json::array();
  for (const auto& c : opts.conditions) conditions.push_back(c.key());
  return {{"prompts", {{"count", opts.prompts.size()}, {"hash", fmt::format("fnv1a64={:016x}", h)}}},
          {"conditions", conditions},
          {"max_new_tokens", opts.max_new_tokens},
          {"seed", json_u64(opts.seed)},
          {"threads", opts.threads},
          {"batch_size", opts.batch_size},
          {"stop_at_eos", opts.stop_at_eos}};
}

int run_compare(const CompareOptions& opts) {
  if (opts.prompts.empty()) fail_usage("compare: no prompts");
  if (opts.conditions.empty()) fail_usage("compare: no conditions");
  if (opts.max_new_tokens < 1) fail_usage("--max-new-tokens must be >= 1");
  if (opts.batch_size < 1) fail_usage("--batch-size must be >= 1 (got {})", opts.batch_size);
  for (const Condition& cond : opts.conditions) cond.sampler.validate();
  const Checkpoint ckpt = open_checkpoint(opts.model);
  // Everything that could refuse the run happens before the first write to the folder.
  const nlohmann::json model = model_identity(ckpt, opts.model, opts.tokenizer);
  const nlohmann::json settings = compare_settings(opts);
  check_results_manifest(opts.out_dir, "compare", model, settings, {kCompareResultsFile});
  record_results_manifest(opts.out_dir, "compare", model, settings, {kCompareResultsFile});
  ResultsLog log(path_in(opts.out_dir, kCompareResultsFile), record_key);
  const std::string name = model["name"].get<std::string>();
  int written = 0;
  const size_t n = opts.prompts.size(), B = size_t(opts.batch_size);
  const size_t total = n * opts.conditions.size();
  if (!log.records().empty()) {
    size_t reused = 0;
    for (const Condition& cond : opts.conditions)
      for (const Prompt& p : opts.prompts) reused += log.has(p.id + "\n" + cond.key());
    std::cerr << fmt::format("note: resuming {}: {} of {} records already there are re-used\n", log.path(), reused,
                             total);
  }
  size_t done = 0;
  for (const Condition& cond : opts.conditions) {
    auto has = [&](size_t i) { return log.has(opts.prompts[i].id + "\n" + cond.key()); };
    std::shared_ptr<Model> model;
    std::unique_ptr<Tokenizer> tok;
    std::unique_ptr<Engine> engine;
    // Groups of B prompts by index; with B = 1 every prompt is its own group and runs solo only.
    for (size_t g0 = 0; g0 < n; g0 += B) {
      const size_t g1 = std::min(n, g0 + B);
      bool complete = true;
      for (size_t i = g0; i < g1; ++i) complete = complete && has(i);
      if (complete) {
        done += g1 - g0;
        continue;
      }
      if (!engine) {  // only built when something is left to run, so a finished resume is instant
        model = Model::from_checkpoint(ckpt, cond.dtype);
        tok = tokenizer_for_model(*model, opts.tokenizer);
        EngineOptions eo;
        eo.kernels = cond.kernels;
        eo.threads = opts.threads;
        eo.kv_dtype = cond.kv_dtype;
        engine = std::make_unique<Engine>(model, eo);
      }
      std::vector<BatchTrace> traces;
      if (B > 1) {
        // The whole group as one batch, every sequence under its solo sequence id; logits are
        // kept only for the records still to write.
        std::vector<std::vector<int>> ids;
        std::vector<uint64_t> sequence_ids;
        for (size_t i = g0; i < g1; ++i) {
          ids.push_back(encode_prompt(*tok, opts.prompts[i]));
          sequence_ids.push_back(sequence_id_for(opts.prompts[i].id));
        }
        GenerationConfig g = generation_config(opts.prompts[g0], cond, opts);
        g.cache = CacheMode::On;
        traces.resize(g1 - g0);
        const auto results = engine->generate_batch(ids, sequence_ids, g, tok.get(), [&](int b, const StepInfo& s) {
          if (!has(g0 + size_t(b))) traces[size_t(b)].logits.emplace_back(s.logits, s.logits + s.vocab);
        });
        for (size_t b = 0; b < traces.size(); ++b) {
          traces[b].batch_size = int(g1 - g0);
          traces[b].slot = int(b);
          traces[b].ids = results[b].output_ids;
        }
      }
      for (size_t i = g0; i < g1; ++i) {
        ++done;
        if (has(i)) continue;
        const Prompt& p = opts.prompts[i];
        if (opts.progress)
          std::cerr << fmt::format("\r[compare] {}/{}  {:<40.40}  prompt {}", done, total, cond.key(), p.id)
                    << std::flush;
        log.append(run_one(*engine, *tok, p, cond, opts, name, traces.empty() ? nullptr : &traces[i - g0]));
        if (!traces.empty()) Logits().swap(traces[i - g0].logits);
        ++written;
      }
    }
  }
  if (opts.progress) std::cerr << "\r[compare] " << total << "/" << total << " done" << std::string(50, ' ') << "\n";
  return written;
}

}  // namespace kvp
