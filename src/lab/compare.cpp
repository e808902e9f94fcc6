#include "lab/compare.h"

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "lab/results_log.h"
#include "lab/step_metrics.h"
#include "model/model.h"
#include "runtime/generator.h"
#include "runtime/rng.h"
#include "runtime/tokenizer_for_model.h"

namespace kvp {

std::string Condition::key() const {
  return fmt::format("{}/kv={}/{}/{}{}", dtype_name(dtype), dtype_name(kv_dtype), policy_name(kernels),
                     sampler.describe(), control ? "/control" : "");
}

void add_fp32_controls(std::vector<Condition>& conditions) {
  std::vector<Condition> extra;
  for (const auto& c : conditions) {
    if (c.control || (c.dtype == DType::F32 && c.kv_dtype == DType::F32)) continue;
    Condition k = c;
    k.dtype = DType::F32;
    k.kv_dtype = DType::F32;
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

nlohmann::json run_one(Engine& engine, const Tokenizer& tok, const Prompt& prompt, const Condition& cond,
                       const CompareOptions& opts) {
  const Model& model = engine.model();
  const int vocab = model.config.vocab_size;
  const std::vector<int> prompt_ids = tok.encode(prompt.text, tok.default_add_bos());
  GenerationConfig g;
  g.max_new_tokens = opts.max_new_tokens;
  g.sampler = cond.sampler;
  g.seed = opts.seed;
  g.sequence_id = sequence_id_for(prompt.id);
  g.stop_at_eos = opts.stop_at_eos;
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
      engine.cache().clear();
      const float* all = engine.forward(seq.data(), int(seq.size()), 0, fo);
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
  r["prompt_id"] = prompt.id;
  r["prompt"] = prompt.text;
  r["condition"] = cond.key();
  r["dtype"] = std::string(dtype_name(cond.dtype));
  r["kv_dtype"] = std::string(dtype_name(cond.kv_dtype));
  r["kernels"] = policy_name(cond.kernels);
  r["sampler"] = cond.sampler.describe();
  r["control"] = cond.control;
  r["seed"] = opts.seed;
  r["max_new_tokens"] = opts.max_new_tokens;
  r["prompt_ids"] = prompt_ids;
  r["on_ids"] = on.output_ids;
  r["off_ids"] = off.output_ids;
  r["on_text"] = on.text;
  r["off_text"] = off.text;
  r["first_divergence"] = first_div < 0 ? nlohmann::json(nullptr) : nlohmann::json(first_div);
  r["teacher_forced"] = {{"on_token", on_tok}, {"off_token", off_tok}, {"max_abs_logit_diff", mx},
                         {"mean_abs_logit_diff", mean}, {"kl", kl}, {"top1_margin", margin}, {"flips", flips}};
  return r;
}

}  // namespace

int run_compare(const CompareOptions& opts) {
  if (opts.prompts.empty()) fail_usage("compare: no prompts");
  if (opts.conditions.empty()) fail_usage("compare: no conditions");
  if (opts.max_new_tokens < 1) fail_usage("--max-new-tokens must be >= 1");
  std::error_code ec;
  std::filesystem::create_directories(opts.out_dir, ec);
  if (ec) fail("{}: cannot create output directory: {}", opts.out_dir, ec.message());
  ResultsLog log(opts.out_dir + "/results.jsonl", record_key);
  const Checkpoint ckpt = open_checkpoint(opts.model);
  int written = 0;
  const size_t total = opts.prompts.size() * opts.conditions.size();
  size_t done = 0;
  for (const Condition& cond : opts.conditions) {
    cond.sampler.validate();
    bool all_done = true;
    for (const auto& p : opts.prompts) all_done = all_done && log.has(p.id + "\n" + cond.key());
    if (all_done) {
      done += opts.prompts.size();
      continue;
    }
    auto model = Model::from_checkpoint(ckpt, cond.dtype);
    auto tok = tokenizer_for_model(*model, opts.tokenizer);
    EngineOptions eo;
    eo.kernels = cond.kernels;
    eo.threads = opts.threads;
    eo.kv_dtype = cond.kv_dtype;
    Engine engine(model, eo);
    for (const auto& p : opts.prompts) {
      ++done;
      if (log.has(p.id + "\n" + cond.key())) continue;
      if (opts.progress)
        std::cerr << fmt::format("\r[compare] {}/{}  {:<40.40}  prompt {}", done, total, cond.key(), p.id)
                  << std::flush;
      log.append(run_one(engine, *tok, p, cond, opts));
      ++written;
    }
  }
  if (opts.progress) std::cerr << "\r[compare] " << total << "/" << total << " done" << std::string(50, ' ') << "\n";
  return written;
}

}  // namespace kvp
