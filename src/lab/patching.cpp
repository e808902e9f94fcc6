#include "lab/patching.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "core/error.h"
#include "core/json_u64.h"
#include "lab/numerics_identity.h"
#include "lab/results_manifest.h"
#include "lab/side_step.h"
#include "model/model.h"
#include "runtime/chat_for_model.h"
#include "runtime/generator.h"
#include "runtime/rng.h"
#include "runtime/tokenizer_for_model.h"

namespace kvp {
namespace {

// Copies (layer, position) residual rows out of one pass and writes them into another.
class ResidualTap final : public ForwardHooks {
 public:
  ResidualTap(int position, int n_layers, int dim) : pos_(position), rows_(size_t(n_layers)), dim_(dim) {}
  bool capture = true;
  int patch_layer = -2;  // -2 none, -1 all, else one layer
  void on(const HookSite& s, float* d) override {
    if (s.point != HookPoint::ResidPost) return;
    const int row = pos_ - s.start_pos;
    if (row < 0 || row >= s.rows) return;
    float* r = d + size_t(row) * dim_;
    auto& saved = rows_[size_t(s.layer)];
    if (capture) {
      saved.assign(r, r + dim_);
    } else if (patch_layer == -1 || patch_layer == s.layer) {
      std::copy(saved.begin(), saved.end(), r);
    }
  }
  bool wants(HookPoint p, int) const override { return p == HookPoint::ResidPost; }
  bool writes(HookPoint p, int layer) const override {
    return !capture && p == HookPoint::ResidPost && (patch_layer == -1 || patch_layer == layer);
  }

 private:
  int pos_;
  std::vector<std::vector<float>> rows_;
  int dim_;
};

double max_abs(const float* a, const float* b, int n) {
  double m = 0;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
  return m;
}

}  // namespace

bool PatchOptions::default_sides() const { return kvp::default_sides(baseline, candidate); }

std::pair<RunSettings, RunSettings> patch_sides(const PatchOptions& opts) {
  RunDefaults d;
  d.dtype = opts.dtype;
  d.kernels = opts.kernels;
  d.threads = opts.threads;
  d.device = opts.device;
  d.simd = opts.simd;
  const auto [b, c] = resolve_single_sequence_sides(opts.baseline, opts.candidate, d, "patch");
  if (c.cache != CacheMode::On)
    fail_usage("--candidate cache=off: patch writes the baseline's K/V into the candidate's cache, so the candidate "
               "runs with cache=on (swap the SPECs to patch into the other side)");
  return {b, c};
}

PatchResult run_patch(const PatchOptions& opts) {
  opts.sampler.validate();
  PatchResult r;
  std::tie(r.baseline, r.candidate) = patch_sides(opts);
  ModelsByDtype models(opts.model);
  const auto model = models.get(r.candidate.dtype), model_b = models.get(r.baseline.dtype);
  auto tok = tokenizer_for_model(*model, opts.tokenizer);
  const ModelConfig& c = model->config;
  const EngineOptions eo = r.candidate.engine_options();
  Engine on(model, eo), off(model_b, r.baseline.engine_options());
  const std::vector<int> prompt = encode_prompt_as(*model, *tok, opts.tokenizer, opts.chat, opts.prompt);
  const int P = int(prompt.size());
  if (P == 0) fail_usage("--prompt: encodes to no tokens (the model adds no BOS); give a non-empty prompt");
  GenerationConfig g;
  g.sampler = opts.sampler;
  g.seed = opts.seed;
  g.stop_at_eos = false;
  g.max_new_tokens = opts.max_new_tokens;
  g.cache = r.candidate.cache;
  const auto free_on = on.generate(prompt, g, nullptr);
  g.cache = r.baseline.cache;
  const auto free_off = off.generate(prompt, g, nullptr);

  for (size_t i = 0; i < free_on.output_ids.size() && i < free_off.output_ids.size(); ++i)
    if (free_on.output_ids[i] != free_off.output_ids[i]) {
      r.first_divergence = int(i);
      break;
    }
  r.step = opts.step >= 0 ? opts.step : (r.first_divergence >= 0 ? r.first_divergence : 1);
  if (r.step < 1) fail_usage("--step must be >= 1 (step 0 is the prefill, identical on both paths)");
  if (r.step >= int(free_on.output_ids.size())) fail_usage("--step {} is beyond --max-new-tokens {}", r.step, opts.max_new_tokens);
  // The shared prefix: prompt + the candidate's tokens before the step.
  std::vector<int> seq = prompt;
  seq.insert(seq.end(), free_on.output_ids.begin(), free_on.output_ids.begin() + r.step);
  const int n = int(seq.size()), pos = n - 1;
  r.position = pos;
  r.kv_begin = std::clamp(opts.kv_begin, 0, pos);
  r.kv_end = opts.kv_end < 0 ? pos : std::clamp(opts.kv_end, r.kv_begin, pos);
  const uint64_t sid = 0;
  auto choose = [&](const float* logits, int step) {
    return sample_token(logits, c.vocab_size, opts.sampler, uniform_at(opts.seed, sid, uint64_t(step)));
  };

  // The baseline at this step: keep its residual rows, its K/V and its continuation.
  ResidualTap tap(pos, c.n_layers, c.dim);
  const std::vector<float> off_logits = side_step_logits(off, r.baseline.cache, seq, P, &tap);
  r.off_token = choose(off_logits.data(), r.step);
  {
    std::vector<int> s = seq;
    s.push_back(r.off_token);
    Engine cont(model_b, r.baseline.engine_options());
    GenerationConfig gc = g;
    gc.cache = r.baseline.cache;
    gc.max_new_tokens = opts.continuation;
    // Both continuations (this one and the patched candidate runs below) number their draws from 0,
    // so with a sampler they see the same random numbers step for step.
    const auto res = cont.generate(s, gc, nullptr);
    r.off_continuation = res.output_ids;
  }
  tap.capture = false;

  // One candidate decode at `pos` with an optional patch, then `continuation` more plain steps.
  auto run_on = [&](const std::string& kind, int layer, PatchRow* row) {
    Engine e(model, eo);
    ForwardOptions f;
    cache_on_prefix(e, seq, P, pos);
    if (kind == "kv") {
      std::vector<float> buf(size_t(c.kv_dim()));
      for (int l = 0; l < c.n_layers; ++l) {
        if (layer != -1 && layer != l) continue;
        for (bool is_v : {false, true})
          for (int p = r.kv_begin; p < r.kv_end; ++p) {
            for (int h = 0; h < c.n_kv_heads; ++h) off.cache().read(l, is_v, h, p, buf.data() + size_t(h) * c.head_dim);
            e.cache().write(l, is_v, buf.data(), 1, p);
          }
      }
    }
    if (kind == "residual") {
      tap.patch_layer = layer;
      f.hooks = &tap;
    }
    const float* l = e.forward(seq.data() + pos, 1, pos, f);
    std::vector<float> logits(l, l + c.vocab_size);
    const int next = choose(logits.data(), r.step);
    if (row == nullptr) {
      r.on_token = next;
      r.unpatched_max_abs_logit_diff = max_abs(logits.data(), off_logits.data(), c.vocab_size);
      return;
    }
    row->kind = kind;
    row->layer = layer;
    row->next_token = next;
    row->next_follows_off = next == r.off_token;
    row->max_abs_logit_diff_to_off = max_abs(logits.data(), off_logits.data(), c.vocab_size);
    // Continue on the cache-ON path (no more patching) from the patched choice.
    f.hooks = nullptr;
    int token = next, p = pos + 1;
    int agree = 0;
    bool still = true;
    for (size_t k = 0; k < r.off_continuation.size() + 1 && p < e.cache().capacity(); ++k, ++p) {
      if (k > 0) {
        const bool same = token == r.off_continuation[k - 1];
        still = still && same;
        agree += still ? 1 : 0;
        if (k == r.off_continuation.size()) break;
      }
      const float* lg = e.forward(&token, 1, p, f);
      token = choose(lg, int(k));  // numbered as the cache-OFF continuation run numbers its steps
    }
    row->continuation_agree = agree;
  };
  run_on("none", -2, nullptr);
  for (const std::string kind : {"residual", "kv"}) {
    for (int l = 0; l < c.n_layers; ++l) {
      PatchRow row;
      run_on(kind, l, &row);
      r.rows.push_back(row);
    }
    PatchRow all;
    run_on(kind, -1, &all);
    r.rows.push_back(all);
  }
  return r;
}

nlohmann::json patch_json(const PatchResult& r, const PatchOptions& opts) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& x : r.rows)
    rows.push_back({{"kind", x.kind}, {"layer", x.layer < 0 ? nlohmann::json("all") : nlohmann::json(x.layer)},
                    {"next_token", x.next_token}, {"next_follows_off", x.next_follows_off},
                    {"continuation_agree", x.continuation_agree},
                    {"max_abs_logit_diff_to_off", x.max_abs_logit_diff_to_off}});
  // 2: the sides are SPECs (on/off in the key names: candidate/baseline).
  return {{"schema_version", 2}, {"kind", "patch"}, {"model", model_name(opts.model)}, {"model_path", opts.model},
          {"baseline", r.baseline.spec()}, {"candidate", r.candidate.spec()},
          {"condition", sides_key(r.baseline, r.candidate)}, {"default_sides", opts.default_sides()},
          {"prompt", opts.prompt}, {"dtype", std::string(dtype_name(opts.dtype))},
          {"kernels", policy_name(opts.kernels)}, {"threads", opts.threads}, {"sampler", opts.sampler.describe()},
          {"seed", json_u64(opts.seed)}, {"step", r.step}, {"position", r.position},
          {"first_divergence", r.first_divergence < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.first_divergence)},
          {"kv_positions", {r.kv_begin, r.kv_end}}, {"on_token", r.on_token}, {"off_token", r.off_token}, {"continuation_length", r.off_continuation.size()},
          {"unpatched_max_abs_logit_diff", r.unpatched_max_abs_logit_diff}, {"rows", rows}};
}

nlohmann::json patch_settings(const PatchOptions& opts) {
  nlohmann::json j = {{"prompt", opts.prompt},
          {"dtype", std::string(dtype_name(opts.dtype))},
          {"kernels", policy_name(opts.kernels)},
          {"threads", opts.threads},
          {"sampler", opts.sampler.describe()},
          {"seed", json_u64(opts.seed)},
          {"max_new_tokens", opts.max_new_tokens},
          {"step", opts.step < 0 ? nlohmann::json("first divergence") : nlohmann::json(opts.step)},
          {"continuation", opts.continuation},
          {"kv_positions", {opts.kv_begin, opts.kv_end < 0 ? nlohmann::json("step") : nlohmann::json(opts.kv_end)}}};
  if (const std::string chat = chat_template_setting(opts.model, opts.tokenizer, opts.chat); !chat.empty())
    j["chat_template"] = chat;
  add_side_settings(j, opts.device, opts.simd, opts.baseline, opts.candidate);
  const auto [b, c] = patch_sides(opts);
  add_numerics_identity(j, {b, c});
  return j;
}

namespace {
SingleResult single_result(const PatchOptions& opts) {
  return {"patch", kPatchResultsFile, opts.model, opts.tokenizer, patch_settings(opts)};
}
}  // namespace

void check_patch_dir(const std::string& dir, const PatchOptions& opts) { check_single_result(dir, single_result(opts)); }

void save_patch(const std::string& dir, const nlohmann::json& patch, const PatchOptions& opts) {
  save_single_result(dir, single_result(opts), patch);
}

std::string patch_table(const PatchResult& r, bool default_sides) {
  const char* on = default_sides ? "cache ON" : "the candidate";
  const char* off = default_sides ? "cache OFF" : "the baseline";
  std::string s = fmt::format("step {} (position {}): {} chooses {}, {} chooses {}; unpatched max |Δlogit| {:.3e}\n",
                              r.step, r.position, on, r.on_token, off, r.off_token, r.unpatched_max_abs_logit_diff);
  s += fmt::format("{:<7} {:>22} {:>22}\n", "layer", "residual: next / cont", "KV: next / cont");
  auto cell = [&](const PatchRow& x) {
    const char* who = default_sides ? (x.next_follows_off ? "OFF" : "ON ") : (x.next_follows_off ? "BASE" : "CAND");
    return fmt::format("{} {:>2}/{:<2} {:.1e}", who, x.continuation_agree,
                       r.off_continuation.size(), x.max_abs_logit_diff_to_off);
  };
  const size_t half = r.rows.size() / 2;
  for (size_t i = 0; i < half; ++i) {
    const auto& a = r.rows[i];
    const auto& b = r.rows[half + i];
    s += fmt::format("{:<7} {:>22} {:>22}\n", a.layer < 0 ? std::string("all") : std::to_string(a.layer), cell(a), cell(b));
  }
  return s;
}

}  // namespace kvp
