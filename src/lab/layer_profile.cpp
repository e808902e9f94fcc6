#include "lab/layer_profile.h"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "lab/numerics_identity.h"
#include "lab/results_manifest.h"
#include "lab/side_step.h"
#include "model/model.h"
#include "model/moe_routing.h"
#include "runtime/chat_for_model.h"
#include "runtime/generator.h"
#include "runtime/tokenizer_for_model.h"

namespace kvp {
namespace {

// Keeps the rows of one absolute position for every (point, layer).
class RowCapture final : public ForwardHooks {
 public:
  explicit RowCapture(int position) : position_(position) {}
  void on(const HookSite& s, float* d) override {
    const int row = position_ - s.start_pos;
    if (row < 0 || row >= s.rows) return;
    rows_[{int(s.point), s.layer}].assign(d + size_t(row) * s.width, d + size_t(row + 1) * s.width);
  }
  bool writes(HookPoint, int) const override { return false; }
  const std::vector<float>& get(HookPoint p, int layer) const {
    auto it = rows_.find({int(p), layer});
    if (it == rows_.end()) fail("profile: hook point '{}' of layer {} was not captured", hook_point_name(p), layer);
    return it->second;
  }

 private:
  int position_;
  std::map<std::pair<int, int>, std::vector<float>> rows_;
};

MaxMean diff(const std::vector<float>& a, const std::vector<float>& b) {
  MaxMean r;
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    r.max = std::max(r.max, d);
    r.mean += d;
  }
  if (n) r.mean /= double(n);
  return r;
}

nlohmann::json mm(const MaxMean& m) { return {{"max", m.max}, {"mean", m.mean}}; }

}  // namespace

bool LayerProfile::experts_differ() const {
  std::vector<int> a = experts_baseline, b = experts_candidate;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a != b;
}

bool ProfileOptions::default_sides() const { return kvp::default_sides(baseline, candidate); }

std::vector<std::pair<RunSettings, RunSettings>> profile_sides(const ProfileOptions& opts) {
  std::vector<std::pair<RunSettings, RunSettings>> out;
  for (DType dt : opts.dtypes) {
    RunDefaults d;
    d.dtype = dt;
    d.kernels = opts.kernels;
    d.threads = opts.threads;
    d.device = opts.device;
    d.simd = opts.simd;
    const auto [b, c] = resolve_single_sequence_sides(opts.baseline, opts.candidate, d, "profile");
    for (const auto& [eb, ec] : out)
      if (eb == b && ec == c)
        fail_usage("--baseline '{}' / --candidate '{}': two --dtype values give the same comparison ({}); a key both "
                   "SPECs set overrides --dtype",
                   opts.baseline.text(), opts.candidate.text(), sides_key(b, c));
    out.emplace_back(b, c);
  }
  return out;
}

std::vector<DtypeProfile> run_profile(const ProfileOptions& opts) {
  if (opts.step < 1) fail_usage("--step must be >= 1 (step 0 is the prefill, identical on both paths)");
  const auto sides = profile_sides(opts);
  ModelsByDtype models(opts.model);
  std::vector<DtypeProfile> out;
  for (size_t ci = 0; ci < sides.size(); ++ci) {
    const auto& [bs, cs] = sides[ci];
    auto model_c = models.get(cs.dtype), model_b = models.get(bs.dtype);
    auto tok = tokenizer_for_model(*model_c, opts.tokenizer);
    Engine cand(model_c, cs.engine_options()), base(model_b, bs.engine_options());
    // The shared prefix: prompt + the candidate's greedy tokens before `step`.
    std::vector<int> seq = encode_prompt_as(*model_c, *tok, opts.tokenizer, opts.chat, opts.prompt);
    const int P = int(seq.size());
    if (P == 0) fail_usage("--prompt: encodes to no tokens (the model adds no BOS); give a non-empty prompt");
    // Step s compares the row at position P + s - 1, whose logits choose generated token s. Both
    // caches must hold P + s positions.
    const int capacity = std::min(cand.cache().capacity(), base.cache().capacity());
    const int last_step = capacity - P;
    if (opts.step > last_step)
      fail_usage("--step {} is beyond the context: the prompt has {} tokens and the cache {} positions, so --step "
                 "can be at most {}",
                 opts.step, P, capacity, last_step);
    GenerationConfig g;
    g.max_new_tokens = opts.step;
    g.stop_at_eos = false;
    g.cache = cs.cache;
    const auto gen = cand.generate(seq, g, nullptr);
    if (int(gen.output_ids.size()) != opts.step)
      fail("profile: the candidate's run stopped after {} of {} tokens ({})", gen.output_ids.size(), opts.step,
           gen.stop_reason);
    seq.insert(seq.end(), gen.output_ids.begin(), gen.output_ids.end());
    const int n = int(seq.size());
    const int pos = n - 1;
    const ModelConfig& c = model_c->config;

    RowCapture cap_c(pos), cap_b(pos);
    const std::vector<float> logits_c = side_step_logits(cand, cs.cache, seq, P, &cap_c);
    const std::vector<float> logits_b = side_step_logits(base, bs.cache, seq, P, &cap_b);

    DtypeProfile d;
    d.dtype = std::string(dtype_name(opts.dtypes[ci]));
    d.condition = sides_key(bs, cs);
    d.baseline = bs;
    d.candidate = cs;
    d.position = pos;
    d.tokens = seq;
    d.logits = diff(logits_c, logits_b);
    // The cache-OFF pass keeps its K/V in the engine's own cache (resolve() gives a cache-OFF side
    // a float KV type), so both sides' caches hold every position of the sequence here.
    std::vector<float> ka(size_t(c.head_dim)), kb(size_t(c.head_dim));
    for (int l = 0; l < c.n_layers; ++l) {
      LayerProfile L;
      L.resid_mid = diff(cap_c.get(HookPoint::ResidMid, l), cap_b.get(HookPoint::ResidMid, l));
      L.resid_post = diff(cap_c.get(HookPoint::ResidPost, l), cap_b.get(HookPoint::ResidPost, l));
      L.attn_out = diff(cap_c.get(HookPoint::AttnOut, l), cap_b.get(HookPoint::AttnOut, l));
      L.mlp_out = diff(cap_c.get(HookPoint::MlpOut, l), cap_b.get(HookPoint::MlpOut, l));
      if (c.moe_layer(l)) {
        // The routing each side's pass took at the row, from the logits it saw (moe_routing.h).
        const auto& rb = cap_b.get(HookPoint::RouterLogits, l);
        const auto& rc = cap_c.get(HookPoint::RouterLogits, l);
        const ExpertRouting b = route_experts(rb.data(), 1, c.moe, DType::F32);
        const ExpertRouting k = route_experts(rc.data(), 1, c.moe, DType::F32);
        L.sparse = true;
        L.router = diff(rc, rb);
        L.experts_baseline = b.expert;
        L.experts_candidate = k.expert;
        L.router_margin = b.margin[0];
      }
      for (bool is_v : {false, true}) {
        auto& into = is_v ? L.v : L.k;
        for (int h = 0; h < c.n_kv_heads; ++h) {
          MaxMean m;
          for (int p = 0; p < n; ++p) {
            cand.cache().read(l, is_v, h, p, ka.data());
            base.cache().read(l, is_v, h, p, kb.data());
            const MaxMean e = diff(ka, kb);
            m.max = std::max(m.max, e.max);
            m.mean += e.mean / n;
          }
          into.push_back(m);
        }
      }
      d.layers.push_back(L);
    }
    out.push_back(std::move(d));
  }
  return out;
}

nlohmann::json profile_json(const std::vector<DtypeProfile>& ps, const ProfileOptions& opts) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& p : ps) {
    nlohmann::json layers = nlohmann::json::array();
    for (size_t l = 0; l < p.layers.size(); ++l) {
      const auto& L = p.layers[l];
      nlohmann::json k = nlohmann::json::array(), v = nlohmann::json::array();
      for (const auto& x : L.k) k.push_back(mm(x));
      for (const auto& x : L.v) v.push_back(mm(x));
      nlohmann::json layer = {{"layer", l},         {"resid_mid", mm(L.resid_mid)}, {"resid_post", mm(L.resid_post)},
                              {"attn_out", mm(L.attn_out)}, {"mlp_out", mm(L.mlp_out)},   {"k", k},
                              {"v", v}};
      if (L.sparse)
        layer["routing"] = {{"router_logits", mm(L.router)},
                            {"experts_baseline", L.experts_baseline},
                            {"experts_candidate", L.experts_candidate},
                            {"experts_differ", L.experts_differ()},
                            {"baseline_margin", std::isinf(L.router_margin) ? nlohmann::json(nullptr)
                                                                            : nlohmann::json(L.router_margin)}};
      layers.push_back(std::move(layer));
    }
    arr.push_back({{"dtype", p.dtype}, {"condition", p.condition}, {"baseline", p.baseline.spec()},
                   {"candidate", p.candidate.spec()}, {"position", p.position}, {"tokens", p.tokens},
                   {"logits", mm(p.logits)}, {"layers", layers}});
  }
  // 2: the sides are SPECs; every profile names its condition and both sides' settings.
  return {{"schema_version", 2}, {"kind", "profile"}, {"model", model_name(opts.model)}, {"model_path", opts.model},
          {"prompt", opts.prompt}, {"step", opts.step}, {"kernels", policy_name(opts.kernels)}, {"threads", opts.threads},
          {"baseline", opts.baseline.text()}, {"candidate", opts.candidate.text()},
          {"default_sides", opts.default_sides()}, {"profiles", arr}};
}

nlohmann::json profile_settings(const ProfileOptions& opts) {
  nlohmann::json dtypes = nlohmann::json::array();
  for (DType d : opts.dtypes) dtypes.push_back(std::string(dtype_name(d)));
  nlohmann::json j = {{"prompt", opts.prompt}, {"dtypes", dtypes}, {"kernels", policy_name(opts.kernels)},
                      {"threads", opts.threads}, {"step", opts.step}};
  if (const std::string chat = chat_template_setting(opts.model, opts.tokenizer, opts.chat); !chat.empty())
    j["chat_template"] = chat;
  add_side_settings(j, opts.device, opts.simd, opts.baseline, opts.candidate);
  std::vector<RunSettings> sides;
  for (const auto& [b, c] : profile_sides(opts)) sides.insert(sides.end(), {b, c});
  add_numerics_identity(j, sides);
  return j;
}

namespace {
SingleResult single_result(const ProfileOptions& opts) {
  return {"profile", kProfileResultsFile, opts.model, opts.tokenizer, profile_settings(opts)};
}
}  // namespace

void check_profile_dir(const std::string& dir, const ProfileOptions& opts) { check_single_result(dir, single_result(opts)); }

void save_profile(const std::string& dir, const nlohmann::json& profile, const ProfileOptions& opts) {
  save_single_result(dir, single_result(opts), profile);
}

std::string profile_table(const std::vector<DtypeProfile>& ps, bool default_sides) {
  // The cache study's columns are named by dtype, as they always were; other comparisons by a
  // number whose condition (naming both sides) is listed above the table.
  std::string legend;
  std::vector<std::string> labels;
  for (size_t i = 0; i < ps.size(); ++i) {
    labels.push_back(default_sides ? ps[i].dtype : fmt::format("[{}]", i + 1));
    if (!default_sides) legend += fmt::format("[{}] {}\n", i + 1, ps[i].condition);
  }
  auto label = [&](const DtypeProfile& p) { return labels[size_t(&p - ps.data())]; };
  size_t w = 13;
  for (const auto& p : ps) w = std::max(w, label(p).size() + 6);
  std::string s = legend + fmt::format("{:<7}", "layer");
  for (const auto& p : ps) s += fmt::format(" {:>{}}", label(p) + " resid", w);
  for (const auto& p : ps) s += fmt::format(" {:>{}}", label(p) + " K", w);
  const bool moe = !ps.empty() && std::any_of(ps[0].layers.begin(), ps[0].layers.end(),
                                              [](const LayerProfile& L) { return L.sparse; });
  if (moe)
    for (const auto& p : ps) s += fmt::format(" {:>{}}", label(p) + " experts", w + 4);
  s += "\n";
  const size_t L = ps.empty() ? 0 : ps[0].layers.size();
  for (size_t l = 0; l < L; ++l) {
    s += fmt::format("{:<7}", l);
    for (const auto& p : ps) s += fmt::format(" {:>{}.3e}", p.layers[l].resid_post.max, w);
    for (const auto& p : ps) {
      double k = 0;
      for (const auto& h : p.layers[l].k) k = std::max(k, h.max);
      s += fmt::format(" {:>{}.3e}", k, w);
    }
    // "same" or the experts that changed, baseline -> candidate ("-" for a dense layer).
    if (moe)
      for (const auto& p : ps) {
        const LayerProfile& Lp = p.layers[l];
        std::string e = !Lp.sparse ? "-" : !Lp.experts_differ() ? "same" : fmt::format("{} -> {}", fmt::join(Lp.experts_baseline, ","),
                                                                                 fmt::join(Lp.experts_candidate, ","));
        s += fmt::format(" {:>{}}", e, w + 4);
      }
    s += "\n";
  }
  s += fmt::format("{:<7}", "logits");
  for (const auto& p : ps) s += fmt::format(" {:>{}.3e}", p.logits.max, w);
  return s + "\n";
}

}  // namespace kvp
