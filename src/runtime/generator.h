#pragma once
// The generation loop, with the two paths the project compares:
//   cache ON : prefill the prompt once (M = prompt length, or chunks of prefill_chunk rows), then
//              one row per step (M = 1);
//   cache OFF: every step recomputes the whole sequence from position 0 (M = t + 1).
// Both paths draw the same uniform at the same step (seed, sequence id, step), so any token
// difference between them comes from numerics.
// Batched generation runs B sequences in lockstep, each with its own KV cache: one forward per
// step whose rows come from all unfinished sequences (M = B in decode). Sequence b draws with
// sequence id (GenerationConfig::sequence_id + b), or with the id given for it explicitly, so it
// is comparable with a solo run of the same prompt under that id; with the invariant kernels the
// two are bitwise identical.
//
// Stopping (solo and batched alike, so a batched sequence stops exactly where its solo run does):
//  - EOS ends the run (stop_reason "eos"); for llama2.c checkpoints (ModelConfig::bos_ends_generation)
//    so does BOS ("bos"), as in llama2.c's run.c. GenerationConfig::stop_at_eos = false (--ignore-eos)
//    runs on past both. The ending token stays in output_ids: it was sampled (and on_step saw it),
//    so cache ON/OFF comparisons see it like any other step; it adds no text. A chat format's
//    end-of-turn token (GenerationConfig::turn_end_ids) ends it the same way ("end_of_turn").
//  - A stop string ends the run as soon as the decoded text contains it ("stop_string"). The text is
//    cut where the earliest match begins (lm-evaluation-harness's rule; GSM8K answer extraction
//    relies on it), and output_ids keep only the tokens whose bytes all lie before that point: a
//    token straddling the start of the match is dropped with the tokens after it. Decoding
//    output_ids therefore gives a prefix of the text. The dropped tokens are kept apart in
//    GenerationResult::dropped_ids (on_step saw them too), for comparisons of whole trajectories.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/simd_target.h"
#include "model/forward.h"
#include "model/model.h"
#include "runtime/kv_cache.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace kvp {

enum class CacheMode { On, Off };
CacheMode parse_cache_mode(const std::string& s);  // on|off

struct GenerationConfig {
  int max_new_tokens = 64;
  CacheMode cache = CacheMode::On;
  SamplerConfig sampler;
  uint64_t seed = 0;
  uint64_t sequence_id = 0;
  bool stop_at_eos = true;                // false: run on past EOS (and BOS for llama2.c models)
  std::vector<int> turn_end_ids;          // end a run as EOS does, under stop_at_eos (a chat format's end of turn)
  std::vector<std::string> stop_strings;  // need a tokenizer to take effect
  NonFinitePolicy on_nonfinite = NonFinitePolicy::Error;
  // Teacher forcing: when not empty, sequence b (of generate_batch; 0 for generate) takes
  // forced_tokens[b][step] in place of the token it would sample (StepInfo::token is the forced
  // one), and its run ends when they are used up (stop_reason "forced_end"). The stopping rules
  // still apply to forced tokens, so a trajectory that ended at EOS ends there again.
  std::vector<std::vector<int>> forced_tokens;
  // Teacher forcing with cache OFF, where no step depends on an earlier one's work: steps
  // [0, forced_skip) take their forced tokens without a forward pass or an on_step call (a caller
  // that already has those steps' logits from a run over the same prefixes skips recomputing them).
  int forced_skip = 0;
};

struct StepInfo {
  int step;              // 0-based index of the generated token
  int position;          // sequence position the logits predict
  int token;             // chosen token
  const float* logits;   // [vocab], valid only during the callback
  int vocab;
  // A mixture of experts: the experts each layer's router chose for the row these logits come
  // from, [n_layers][k] (k = ModelConfig::moe.n_used; largest probability first; -1 for a dense
  // layer), valid only during the callback. Null (size 0) for a dense model.
  const int* experts = nullptr;
  int experts_size = 0;
};

struct GenerationResult {
  std::vector<int> prompt_ids;
  std::vector<int> output_ids;  // generated tokens: EOS/BOS included when it ended the run, cut before a stop string
  std::string text;             // decoded continuation (empty without a tokenizer), cut before a stop string
  std::string
      stop_reason;  // "max_new_tokens" | "eos" | "bos" | "end_of_turn" | "stop_string" | "context_full" | "forced_end"
  std::string stop_string;      // the stop string that matched (stop_reason "stop_string" only)
  // The sampled tokens a stop string cut from output_ids (the straddling token and those after it),
  // so output_ids + dropped_ids is the whole sampled trajectory, one token per on_step call.
  std::vector<int> dropped_ids;
};

struct EngineOptions {
  KernelPolicy kernels = KernelPolicy::Standard;
  Device device = Device::Cpu;  // where the pass runs: weights, activations and caches live there
  int threads = 1;
  KvType kv_dtype;          // what the cache stores (a quantised format only on cache-ON paths)
  int cache_capacity = 0;  // 0: the model's context length (a static cache, DESIGN.md §5)
  int prefill_chunk = 0;   // cache ON: prefill at most this many prompt tokens per forward (0: all)
  SimdTarget simd = SimdTarget::Auto;  // CPU kernels' SIMD target, applied before each pass (simd_target.h)
};

// The forward passes an engine has run: how many, over how many rows, and the wall time inside
// them (on a GPU a pass ends with its one wait, so this is the device's time and the host's
// launches). A run's time less this is the loop's own: sampling, stopping rules, callbacks.
struct PassTotals {
  double seconds = 0.0;
  long long passes = 0, rows = 0;
};

class Engine {
 public:
  Engine(std::shared_ptr<const Model> model, const EngineOptions& opts);

  const Model& model() const { return *model_; }
  Kernels& kernels() { return *kernels_; }
  KVCache& cache() { return cache_; }
  // Positions of each batch slot's cache (generate_batch), 0 for a slot not yet used.
  std::vector<int> batch_cache_capacities() const {
    std::vector<int> v;
    for (const auto& c : batch_caches_) v.push_back(c ? c->capacity() : 0);
    return v;
  }
  Activations& activations() { return act_; }
  PassTotals pass_totals() const { return totals_; }
  const EngineOptions& options() const { return opts_; }

  // Runs forward over tokens at start_pos into this engine's cache.
  const float* forward(const int* tokens, int M, int start_pos, const ForwardOptions& fo);
  // The cache-OFF path: the whole sequence [0, M) in one pass, from no cache. K/V meet attention
  // as computed (the compute dtype): with a quantised KV type the pass runs on a compute-dtype
  // cache of its own instead; with a float KV type, on this engine's cache, as before.
  const float* forward_uncached(const int* tokens, int M, const ForwardOptions& fo);

  GenerationResult generate(const std::vector<int>& prompt, const GenerationConfig& cfg, const Tokenizer* tokenizer,
                            const std::function<void(const StepInfo&)>& on_step = {});

  // Generates from every prompt together (see the top of this file); results in prompt order.
  // on_step(b, info) is called for sequence b at each of its steps.
  std::vector<GenerationResult> generate_batch(const std::vector<std::vector<int>>& prompts, const GenerationConfig& cfg,
                                               const Tokenizer* tokenizer,
                                               const std::function<void(int, const StepInfo&)>& on_step = {});
  // The same with sequence b drawing under sequence_ids[b] (one id per prompt; cfg.sequence_id is
  // not used), e.g. the id a solo run of that prompt uses.
  std::vector<GenerationResult> generate_batch(const std::vector<std::vector<int>>& prompts,
                                               const std::vector<uint64_t>& sequence_ids, const GenerationConfig& cfg,
                                               const Tokenizer* tokenizer,
                                               const std::function<void(int, const StepInfo&)>& on_step = {});

 private:
  std::shared_ptr<const Model> model_;
  EngineOptions opts_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Kernels> kernels_;
  KVCache cache_;
  std::unique_ptr<KVCache> uncached_;  // forward_uncached's compute-dtype cache (quantised KV only)
  Activations act_;
  std::vector<std::unique_ptr<KVCache>> batch_caches_;  // one per batch slot, sized to the batch's need
  PassTotals totals_;
};

}  // namespace kvp
