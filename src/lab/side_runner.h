#pragma once
// One side of a comparison at work (run_spec.h): its engine, its free-running generations of a
// group of prompts, and teacher forcing along another side's trajectories. `compare` and
// `eval gsm8k` both run their sides through it, so both define divergence and flips the same way.
//
// A group is a list of prompts whose first one starts a batch of this side: with batch size B the
// side decodes the group in sub-batches [0, B), [B, 2B), ... (Engine::generate_batch, every
// sequence under its own sequence id); with B = 1, one prompt at a time (Engine::generate). A
// sub-batch runs only when one of its prompts is wanted, so a resumed run forms the same batches.
#include <functional>
#include <memory>
#include <vector>

#include "lab/run_spec.h"
#include "model/model.h"
#include "runtime/generator.h"

namespace kvp {

using StepLogits = std::vector<std::vector<float>>;  // [step][vocab]
// A mixture of experts: per step, the experts each layer chose for the row the step's token comes
// from, [step][layers * k] (StepInfo::experts). Empty for a dense model.
using StepExperts = std::vector<std::vector<int>>;

// A side's teacher-forced steps: the logits of each, and (a mixture of experts) their routing.
struct ForcedSteps {
  StepLogits logits;
  StepExperts experts;
};

struct SidePrompt {
  std::vector<int> ids;
  uint64_t sequence_id = 0;
};

struct SideTrace {
  bool ran = false;
  GenerationResult result;
  std::vector<int> trajectory;  // every sampled token: result.output_ids, then result.dropped_ids
  StepLogits logits;            // one row per trajectory step (when logits were kept)
  StepExperts experts;          // a mixture of experts' routing of each step (wanted prompts, logits kept or not)
  int batch_size = 1, slot = 0;  // the sub-batch this prompt was decoded in
};

class SideRunner {
 public:
  SideRunner(const RunSettings& settings, std::shared_ptr<const Model> model);

  const RunSettings& settings() const { return settings_; }
  const Model& model() const { return *model_; }
  PassTotals pass_totals() const { return engine_.pass_totals(); }

  // Free-running generations of the group (GenerationConfig's cache mode is the side's). Fills the
  // traces of every sub-batch holding a wanted prompt; logits are kept for wanted prompts when
  // keep_logits, a mixture of experts' routing always.
  std::vector<SideTrace> generate(const std::vector<SidePrompt>& group, GenerationConfig g, const Tokenizer* tok,
                                  const std::function<bool(size_t)>& want, bool keep_logits);

  // This side's logits (and routing) along `along` (another side's traces of the same group): for
  // each wanted prompt, one row per step of along[i].trajectory. `own` is this side's free run of the
  // group (generate(), logits kept); its rows are reused (moved out) for the steps whose prefixes the two
  // trajectories share, and a sub-batch whose trajectories all agree is not run again. Otherwise
  // the side runs forced along the trajectories, batched as it was: with cache ON from the start,
  // with cache OFF from the first step it cannot reuse.
  std::vector<ForcedSteps> teacher_force(const std::vector<SidePrompt>& group, const GenerationConfig& g,
                                        const Tokenizer* tok, const std::vector<SideTrace>& along,
                                        std::vector<SideTrace>& own, const std::function<bool(size_t)>& want);

  // The same forcing, keeping for each step only the token this side chooses there (g's sampler,
  // the prompt's sequence id, the step's draw) instead of its logits: what counting flips needs,
  // without holding steps x vocab floats per prompt (a batch of 64 x 256 steps over a 256k
  // vocabulary would hold 17 GB); and a mixture of experts' routing of each step. A shared step's
  // choice is the free run's own token (its routing the free run's), so `own` needs no logits.
  struct ForcedChoices {
    std::vector<int> tokens;
    StepExperts experts;
  };
  std::vector<ForcedChoices> teacher_force_choices(const std::vector<SidePrompt>& group, const GenerationConfig& g,
                                                      const Tokenizer* tok, const std::vector<SideTrace>& along,
                                                      const std::vector<SideTrace>& own,
                                                      const std::function<bool(size_t)>& want);

 private:
  // Both forms' runs: per sub-batch, reuse(i, n) takes the first n steps of prompt i from its own
  // run (own_rows(i): how many it can give), and row(i, step) gets each forced step after them.
  void force(const std::vector<SidePrompt>& group, GenerationConfig g, const Tokenizer* tok,
             const std::vector<SideTrace>& along, const std::vector<SideTrace>& own,
             const std::function<bool(size_t)>& want, const std::function<size_t(size_t)>& own_rows,
             const std::function<void(size_t, size_t)>& reuse, const std::function<void(size_t, const StepInfo&)>& row);

  RunSettings settings_;
  std::shared_ptr<const Model> model_;
  Engine engine_;
};

// First index where two token sequences differ (the shorter one's length when one is a prefix of
// the other); -1 when they are equal.
int first_divergence(const std::vector<int>& a, const std::vector<int>& b);

}  // namespace kvp
