#include "lab/layer_profile.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "lab/results_manifest.h"
#include "model/model.h"
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

std::vector<DtypeProfile> run_profile(const ProfileOptions& opts) {
  if (opts.step < 1) fail_usage("--step must be >= 1 (step 0 is the prefill, identical on both paths)");
  const Checkpoint ckpt = open_checkpoint(opts.model);
  std::vector<DtypeProfile> out;
  for (DType dt : opts.dtypes) {
    auto model = Model::from_checkpoint(ckpt, dt);
    auto tok = tokenizer_for_model(*model, opts.tokenizer);
    EngineOptions eo;
    eo.kernels = opts.kernels;
    eo.threads = opts.threads;
    eo.device = opts.device;
    eo.kv_dtype = KvType::of(dt);
    Engine on(model, eo), off(model, eo);
    // The shared prefix: prompt + the cache-ON path's greedy tokens before `step`.
    std::vector<int> seq = tok->encode(opts.prompt, tok->default_add_bos());
    const int P = int(seq.size());
    if (P == 0) fail_usage("--prompt: encodes to no tokens (the model adds no BOS); give a non-empty prompt");
    // Step s compares the decode row at position P + s - 1, whose logits choose generated token s:
    // the cache-ON path feeds the s tokens generated before it, one row each. The cache must hold
    // P + s positions.
    const int last_step = on.cache().capacity() - P;
    if (opts.step > last_step)
      fail_usage("--step {} is beyond the context: the prompt has {} tokens and the cache {} positions, so --step "
                 "can be at most {}",
                 opts.step, P, on.cache().capacity(), last_step);
    GenerationConfig g;
    g.max_new_tokens = opts.step;
    g.stop_at_eos = false;
    const auto gen = on.generate(seq, g, nullptr);
    if (int(gen.output_ids.size()) != opts.step)
      fail("profile: the cache-ON run stopped after {} of {} tokens ({})", gen.output_ids.size(), opts.step,
           gen.stop_reason);
    seq.insert(seq.end(), gen.output_ids.begin(), gen.output_ids.end());
    const int n = int(seq.size());
    const int pos = n - 1;
    const ModelConfig& c = model->config;

    // Cache ON: prefill the prompt, decode the generated tokens one row at a time; hooks on the last.
    ForwardOptions fo;
    on.cache().clear();
    on.forward(seq.data(), P, 0, fo);
    for (int p = P; p < n - 1; ++p) on.forward(seq.data() + p, 1, p, fo);
    RowCapture cap_on(pos), cap_off(pos);
    fo.hooks = &cap_on;
    const float* lo = on.forward(seq.data() + pos, 1, pos, fo);
    std::vector<float> logits_on(lo, lo + c.vocab_size);
    // Cache OFF: all rows at once.
    off.cache().clear();
    fo.hooks = &cap_off;
    const float* lf = off.forward(seq.data(), n, 0, fo);
    std::vector<float> logits_off(lf + size_t(pos) * c.vocab_size, lf + size_t(pos + 1) * c.vocab_size);

    DtypeProfile d;
    d.dtype = std::string(dtype_name(dt));
    d.position = pos;
    d.tokens = seq;
    d.logits = diff(logits_on, logits_off);
    std::vector<float> ka(size_t(c.head_dim)), kb(size_t(c.head_dim));
    for (int l = 0; l < c.n_layers; ++l) {
      LayerProfile L;
      L.resid_mid = diff(cap_on.get(HookPoint::ResidMid, l), cap_off.get(HookPoint::ResidMid, l));
      L.resid_post = diff(cap_on.get(HookPoint::ResidPost, l), cap_off.get(HookPoint::ResidPost, l));
      L.attn_out = diff(cap_on.get(HookPoint::AttnOut, l), cap_off.get(HookPoint::AttnOut, l));
      L.mlp_out = diff(cap_on.get(HookPoint::MlpOut, l), cap_off.get(HookPoint::MlpOut, l));
      for (bool is_v : {false, true}) {
        auto& into = is_v ? L.v : L.k;
        for (int h = 0; h < c.n_kv_heads; ++h) {
          MaxMean m;
          for (int p = 0; p < n; ++p) {
            on.cache().read(l, is_v, h, p, ka.data());
            off.cache().read(l, is_v, h, p, kb.data());
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
      layers.push_back({{"layer", l}, {"resid_mid", mm(L.resid_mid)}, {"resid_post", mm(L.resid_post)},
                        {"attn_out", mm(L.attn_out)}, {"mlp_out", mm(L.mlp_out)}, {"k", k}, {"v", v}});
    }
    arr.push_back({{"dtype", p.dtype}, {"position", p.position}, {"tokens", p.tokens}, {"logits", mm(p.logits)},
                   {"layers", layers}});
  }
  return {{"schema_version", 1}, {"kind", "profile"}, {"model", model_name(opts.model)}, {"model_path", opts.model},
          {"prompt", opts.prompt}, {"step", opts.step}, {"kernels", policy_name(opts.kernels)}, {"threads", opts.threads},
          {"profiles", arr}};
}

nlohmann::json profile_settings(const ProfileOptions& opts) {
  nlohmann::json dtypes = nlohmann::json::array();
  for (DType d : opts.dtypes) dtypes.push_back(std::string(dtype_name(d)));
  nlohmann::json j = {{"prompt", opts.prompt}, {"dtypes", dtypes}, {"kernels", policy_name(opts.kernels)},
                      {"threads", opts.threads}, {"step", opts.step}};
  if (opts.device != Device::Cpu) j["device"] = device_name(opts.device);  // CPU folders keep their manifests
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

std::string profile_table(const std::vector<DtypeProfile>& ps) {
  std::string s = fmt::format("{:<7}", "layer");
  for (const auto& p : ps) s += fmt::format(" {:>13}", p.dtype + " resid");
  for (const auto& p : ps) s += fmt::format(" {:>13}", p.dtype + " K");
  s += "\n";
  const size_t L = ps.empty() ? 0 : ps[0].layers.size();
  for (size_t l = 0; l < L; ++l) {
    s += fmt::format("{:<7}", l);
    for (const auto& p : ps) s += fmt::format(" {:>13.3e}", p.layers[l].resid_post.max);
    for (const auto& p : ps) {
      double k = 0;
      for (const auto& h : p.layers[l].k) k = std::max(k, h.max);
      s += fmt::format(" {:>13.3e}", k);
    }
    s += "\n";
  }
  s += fmt::format("{:<7}", "logits");
  for (const auto& p : ps) s += fmt::format(" {:>13.3e}", p.logits.max);
  return s + "\n";
}

}  // namespace kvp
