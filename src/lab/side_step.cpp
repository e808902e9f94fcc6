#include "lab/side_step.h"

#include <algorithm>

#include "core/error.h"

namespace kvp {

std::pair<RunSettings, RunSettings> resolve_single_sequence_sides(const RunSpec& baseline, const RunSpec& candidate,
                                                                  const RunDefaults& d, const std::string& command) {
  const RunSettings b = baseline.resolve(d), c = candidate.resolve(d);
  for (const auto& [side, option] : {std::pair{&b, "--baseline"}, std::pair{&c, "--candidate"}})
    if (side->batch_size != 1)
      fail_usage("{}: batch-size={}: {} follows one sequence; compare a batch against solo runs with kvparity "
                 "compare (--batch-size or batch-size= in a SPEC)",
                 option, side->batch_size, command);
  return {b, c};
}

bool default_sides(const RunSpec& baseline, const RunSpec& candidate) {
  return baseline == RunSpec::parse(kDefaultBaselineSpec, "--baseline") &&
         candidate == RunSpec::parse(kDefaultCandidateSpec, "--candidate");
}

void add_side_settings(nlohmann::json& settings, Device device, SimdTarget simd, const RunSpec& baseline,
                       const RunSpec& candidate) {
  if (device != Device::Cpu) settings["device"] = device_name(device);
  if (simd != SimdTarget::Auto) settings["simd"] = simd_name(simd);
  if (!default_sides(baseline, candidate)) {
    settings["baseline"] = baseline.text();
    settings["candidate"] = candidate.text();
  }
}

void cache_on_prefix(Engine& engine, const std::vector<int>& seq, int prompt_len, int end) {
  ForwardOptions fo;
  fo.all_logits = true;  // as the generator's passes
  engine.cache().clear();
  const int prefill_end = std::min(prompt_len, end);
  const int chunk = engine.options().prefill_chunk > 0 ? engine.options().prefill_chunk : std::max(prefill_end, 1);
  for (int p = 0; p < prefill_end; p += chunk) engine.forward(seq.data() + p, std::min(chunk, prefill_end - p), p, fo);
  for (int p = prefill_end; p < end; ++p) engine.forward(seq.data() + p, 1, p, fo);
}

std::vector<float> side_step_logits(Engine& engine, CacheMode cache, const std::vector<int>& seq, int prompt_len,
                                    ForwardHooks* hooks) {
  const int n = int(seq.size()), vocab = engine.model().config.vocab_size;
  if (prompt_len < 1 || prompt_len > n) fail("side step: a prompt of {} tokens in a sequence of {}", prompt_len, n);
  ForwardOptions fo;
  fo.all_logits = true;  // as the generator's passes, so the last row's logits are computed alike
  if (cache == CacheMode::Off) {
    fo.hooks = hooks;
    const float* l = engine.forward_uncached(seq.data(), n, fo) + size_t(n - 1) * vocab;
    return {l, l + vocab};
  }
  // The last position is a decode step of its own (M = 1), also when it is the prompt's last token.
  cache_on_prefix(engine, seq, prompt_len, n - 1);
  fo.hooks = hooks;
  const float* l = engine.forward(seq.data() + n - 1, 1, n - 1, fo);
  return {l, l + vocab};
}

ModelsByDtype::ModelsByDtype(const std::string& path) : ckpt_(open_checkpoint(path)) {}

std::shared_ptr<const Model> ModelsByDtype::get(DType dtype) {
  for (const auto& [d, m] : models_)
    if (d == dtype) return m;
  models_.emplace_back(dtype, Model::from_checkpoint(ckpt_, dtype));
  return models_.back().second;
}

}  // namespace kvp
