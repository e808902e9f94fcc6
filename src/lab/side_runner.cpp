#include "lab/side_runner.h"

#include <algorithm>

#include "core/error.h"
#include "runtime/rng.h"
#include "runtime/sampler.h"

namespace kvp {

int first_divergence(const std::vector<int>& a, const std::vector<int>& b) {
  const size_t common = std::min(a.size(), b.size());
  for (size_t i = 0; i < common; ++i)
    if (a[i] != b[i]) return int(i);
  return a.size() == b.size() ? -1 : int(common);
}

SideRunner::SideRunner(const RunSettings& settings, std::shared_ptr<const Model> model)
    : settings_(settings), model_(std::move(model)), engine_(model_, settings.engine_options()) {}

namespace {

void finish_trace(SideTrace& t, GenerationResult r, int batch_size, int slot) {
  t.ran = true;
  t.trajectory = r.output_ids;
  t.trajectory.insert(t.trajectory.end(), r.dropped_ids.begin(), r.dropped_ids.end());
  t.result = std::move(r);
  t.batch_size = batch_size;
  t.slot = slot;
}

void keep_step(SideTrace& t, const StepInfo& s, bool logits) {
  if (logits) t.logits.emplace_back(s.logits, s.logits + s.vocab);
  if (s.experts_size > 0) t.experts.emplace_back(s.experts, s.experts + s.experts_size);
}

}  // namespace

std::vector<SideTrace> SideRunner::generate(const std::vector<SidePrompt>& group, GenerationConfig g,
                                            const Tokenizer* tok, const std::function<bool(size_t)>& want,
                                            bool keep_logits) {
  std::vector<SideTrace> out(group.size());
  g.cache = settings_.cache;
  const size_t B = size_t(settings_.batch_size);
  for (size_t s0 = 0; s0 < group.size(); s0 += B) {
    const size_t s1 = std::min(group.size(), s0 + B);
    bool any = false;
    for (size_t i = s0; i < s1; ++i) any = any || want(i);
    if (!any) continue;
    if (B == 1) {
      g.sequence_id = group[s0].sequence_id;
      SideTrace& t = out[s0];  // wanted: the group's only prompt here
      GenerationResult r =
          engine_.generate(group[s0].ids, g, tok, [&](const StepInfo& s) { keep_step(t, s, keep_logits); });
      finish_trace(t, std::move(r), 1, 0);
      continue;
    }
    std::vector<std::vector<int>> ids;
    std::vector<uint64_t> sequence_ids;
    for (size_t i = s0; i < s1; ++i) {
      ids.push_back(group[i].ids);
      sequence_ids.push_back(group[i].sequence_id);
    }
    auto results = engine_.generate_batch(ids, sequence_ids, g, tok, [&](int b, const StepInfo& s) {
      if (want(s0 + size_t(b))) keep_step(out[s0 + size_t(b)], s, keep_logits);
    });
    for (size_t i = s0; i < s1; ++i) finish_trace(out[i], std::move(results[i - s0]), int(s1 - s0), int(i - s0));
  }
  return out;
}

void SideRunner::force(const std::vector<SidePrompt>& group, GenerationConfig g, const Tokenizer* tok,
                       const std::vector<SideTrace>& along, const std::vector<SideTrace>& own,
                       const std::function<bool(size_t)>& want, const std::function<size_t(size_t)>& own_rows,
                       const std::function<void(size_t, size_t)>& reuse,
                       const std::function<void(size_t, const StepInfo&)>& row) {
  if (along.size() != group.size() || own.size() != group.size())
    fail("teacher forcing: {} prompts, {} trajectories to follow, {} own runs", group.size(), along.size(), own.size());
  g.cache = settings_.cache;
  // The forced run ends with its forced tokens, where the followed run ended (its last token
  // already met that run's stopping rule).
  g.stop_at_eos = false;
  g.stop_strings.clear();
  // Steps each prompt got (reused and forced): its trajectory's, checked per sub-batch.
  std::vector<size_t> given(group.size());
  const auto take = [&](size_t i, size_t n) {
    reuse(i, n);
    given[i] += n;
  };
  const auto step = [&](size_t i, const StepInfo& s) {
    row(i, s);
    ++given[i];
  };
  const size_t B = size_t(settings_.batch_size);
  for (size_t s0 = 0; s0 < group.size(); s0 += B) {
    const size_t s1 = std::min(group.size(), s0 + B);
    bool any = false;
    // Steps [0, shared) have the same prefixes in the free and the forced run of this sub-batch,
    // and the same batch, so the free run's logits (and choices) are the forced run's there.
    size_t shared = SIZE_MAX;
    for (size_t i = s0; i < s1; ++i) {
      if (!want(i)) continue;
      any = true;
      if (!own[i].ran || !along[i].ran) fail("teacher forcing: prompt {} of the group was not run", i);
    }
    if (!any) continue;
    for (size_t i = s0; i < s1; ++i) {
      const int fd = first_divergence(along[i].trajectory, own[i].trajectory);
      if (fd >= 0) shared = std::min(shared, size_t(fd) + 1);
    }
    if (shared == SIZE_MAX) {  // every trajectory agrees: the forced run would be the free run
      for (size_t i = s0; i < s1; ++i)
        if (want(i)) take(i, own_rows(i));
      continue;
    }
    // With cache ON the forced run builds its cache from the first step; with cache OFF it starts
    // at the first step not shared.
    size_t skip = settings_.cache == CacheMode::Off ? shared : 0;
    // Each wanted prompt reuses min(skip, its trajectory) rows of its own run, which must have them.
    for (size_t i = s0; i < s1; ++i)
      if (want(i) && own_rows(i) < std::min(skip, along[i].trajectory.size())) skip = own_rows(i);
    g.forced_skip = int(skip);
    for (size_t i = s0; i < s1; ++i)
      if (want(i)) take(i, std::min(skip, along[i].trajectory.size()));
    g.max_new_tokens = 0;
    for (size_t i = s0; i < s1; ++i) g.max_new_tokens = std::max(g.max_new_tokens, int(along[i].trajectory.size()));
    if (B == 1) {
      g.sequence_id = group[s0].sequence_id;
      g.forced_tokens = {along[s0].trajectory};
      engine_.generate(group[s0].ids, g, tok, [&](const StepInfo& s) { step(s0, s); });
    } else {
      std::vector<std::vector<int>> ids;
      std::vector<uint64_t> sequence_ids;
      g.forced_tokens.clear();
      for (size_t i = s0; i < s1; ++i) {
        ids.push_back(group[i].ids);
        sequence_ids.push_back(group[i].sequence_id);
        g.forced_tokens.push_back(along[i].trajectory);
      }
      engine_.generate_batch(ids, sequence_ids, g, tok, [&](int b, const StepInfo& s) {
        if (want(s0 + size_t(b))) step(s0 + size_t(b), s);
      });
    }
    for (size_t i = s0; i < s1; ++i)
      if (want(i) && given[i] != along[i].trajectory.size())
        fail("teacher forcing: prompt {}: {} steps forced along a trajectory of {}", i, given[i],
             along[i].trajectory.size());
  }
}

std::vector<ForcedSteps> SideRunner::teacher_force(const std::vector<SidePrompt>& group, const GenerationConfig& g,
                                                   const Tokenizer* tok, const std::vector<SideTrace>& along,
                                                   std::vector<SideTrace>& own,
                                                   const std::function<bool(size_t)>& want) {
  std::vector<ForcedSteps> out(group.size());
  for (size_t i = 0; i < std::min(group.size(), own.size()); ++i) {
    if (!want(i) || !own[i].ran) continue;
    if (own[i].logits.size() != own[i].trajectory.size())
      fail("teacher forcing: prompt {}: {} logit rows for {} steps", i, own[i].logits.size(), own[i].trajectory.size());
    if (!own[i].experts.empty() && own[i].experts.size() != own[i].trajectory.size())
      fail("teacher forcing: prompt {}: {} routing rows for {} steps", i, own[i].experts.size(),
           own[i].trajectory.size());
  }
  const auto moved = [](auto& from, auto& to, size_t n) {
    to.assign(std::make_move_iterator(from.begin()), std::make_move_iterator(from.begin() + std::ptrdiff_t(n)));
  };
  force(
      group, g, tok, along, own, want, [&](size_t i) { return own[i].logits.size(); },
      [&](size_t i, size_t n) {
        moved(own[i].logits, out[i].logits, n);
        if (!own[i].experts.empty()) moved(own[i].experts, out[i].experts, n);
      },
      [&](size_t i, const StepInfo& s) {
        out[i].logits.emplace_back(s.logits, s.logits + s.vocab);
        if (s.experts_size > 0) out[i].experts.emplace_back(s.experts, s.experts + s.experts_size);
      });
  return out;
}

std::vector<SideRunner::ForcedChoices> SideRunner::teacher_force_choices(const std::vector<SidePrompt>& group,
                                                                         const GenerationConfig& g,
                                                                         const Tokenizer* tok,
                                                                         const std::vector<SideTrace>& along,
                                                                         const std::vector<SideTrace>& own,
                                                                         const std::function<bool(size_t)>& want) {
  std::vector<ForcedChoices> out(group.size());
  force(
      group, g, tok, along, own, want, [&](size_t i) { return own[i].trajectory.size(); },
      // A shared step's choice is the free run's sampled token: the same logits and the same draw.
      [&](size_t i, size_t n) {
        out[i].tokens.assign(own[i].trajectory.begin(), own[i].trajectory.begin() + std::ptrdiff_t(n));
        if (!own[i].experts.empty())
          out[i].experts.assign(own[i].experts.begin(), own[i].experts.begin() + std::ptrdiff_t(n));
      },
      [&](size_t i, const StepInfo& s) {
        const double u = uniform_at(g.seed, group[i].sequence_id, uint64_t(s.step));
        out[i].tokens.push_back(sample_token(s.logits, s.vocab, g.sampler, u));
        if (s.experts_size > 0) out[i].experts.emplace_back(s.experts, s.experts + s.experts_size);
      });
  return out;
}

}  // namespace kvp
