#include "runtime/generator.h"

#include <algorithm>

#include "core/error.h"
#include "runtime/rng.h"

namespace kvp {

CacheMode parse_cache_mode(const std::string& s) {
  if (s == "on") return CacheMode::On;
  if (s == "off") return CacheMode::Off;
  fail_usage("--cache must be 'on' or 'off' (got '{}')", s);
}

namespace {
int capacity_for(const Model& m, const EngineOptions& o) {
  if (o.cache_capacity < 0) fail_usage("--cache-capacity must be positive (got {})", o.cache_capacity);
  return o.cache_capacity > 0 ? std::min(o.cache_capacity, m.config.max_seq_len) : m.config.max_seq_len;
}
}  // namespace

Engine::Engine(std::shared_ptr<const Model> model, const EngineOptions& opts)
    : model_(std::move(model)),
      opts_(opts),
      pool_(std::make_unique<ThreadPool>(std::max(1, opts.threads))),
      kernels_(make_kernels(opts.kernels, pool_.get())),
      cache_(model_->config, capacity_for(*model_, opts), opts.kv_dtype) {
  if (opts.threads < 1) fail_usage("--threads must be >= 1 (got {})", opts.threads);
}

const float* Engine::forward(const int* tokens, int M, int start_pos, const ForwardOptions& fo) {
  return kvp::forward(*model_, *kernels_, cache_, act_, tokens, M, start_pos, fo);
}

GenerationResult Engine::generate(const std::vector<int>& prompt_in, const GenerationConfig& cfg,
                                  const Tokenizer* tokenizer, const std::function<void(const StepInfo&)>& on_step) {
  cfg.sampler.validate();
  if (cfg.max_new_tokens < 0) fail_usage("--max-new-tokens must be >= 0 (got {})", cfg.max_new_tokens);
  const ModelConfig& c = model_->config;
  GenerationResult r;
  r.prompt_ids = prompt_in;
  if (r.prompt_ids.empty()) {
    // An empty prompt starts from BOS: the tokenizer's when it has one, else the model's.
    int bos = tokenizer != nullptr ? tokenizer->bos_id() : -1;
    if (bos < 0 || bos >= c.vocab_size) bos = c.bos_id;
    if (bos < 0)
      fail_usage("the prompt is empty and this model ({}) has no BOS token to start from; give a non-empty prompt",
                 arch_name(c.arch));
    r.prompt_ids.push_back(bos);
  }
  const int limit = cache_.capacity();
  if (int(r.prompt_ids.size()) > limit)
    fail("prompt of {} tokens does not fit the context ({} positions)", r.prompt_ids.size(), limit);

  std::vector<int> seq = r.prompt_ids;
  ForwardOptions fo;
  fo.on_nonfinite = cfg.on_nonfinite;
  fo.all_logits = true;
  Utf8StreamDecoder utf8;
  std::string text;
  r.stop_reason = "max_new_tokens";
  for (int step = 0; step < cfg.max_new_tokens; ++step) {
    const int n = int(seq.size());
    if (n > limit) {  // the newest token's position must still fit the cache
      r.stop_reason = "context_full";
      break;
    }
    const float* logits;
    if (cfg.cache == CacheMode::Off || step == 0) {
      cache_.clear();
      const float* all = forward(seq.data(), n, 0, fo);
      logits = all + size_t(n - 1) * c.vocab_size;
    } else {
      logits = forward(seq.data() + n - 1, 1, n - 1, fo);
    }
    const double u = uniform_at(cfg.seed, cfg.sequence_id, uint64_t(step));
    const int token = sample_token(logits, c.vocab_size, cfg.sampler, u);
    if (on_step) on_step(StepInfo{step, n - 1, token, logits, c.vocab_size});
    seq.push_back(token);
    r.output_ids.push_back(token);
    if (cfg.stop_at_eos && token == c.eos_id) {
      r.stop_reason = "eos";
      break;
    }
    if (tokenizer != nullptr) {
      const int prev = seq[size_t(seq.size()) - 2];
      text += utf8.push(tokenizer->token_bytes(prev, token));
      bool hit = false;
      for (const auto& s : cfg.stop_strings) {
        const auto pos = s.empty() ? std::string::npos : text.find(s);
        if (pos != std::string::npos) {
          text.resize(pos);
          hit = true;
        }
      }
      if (hit) {
        r.stop_reason = "stop_string";
        break;
      }
    }
  }
  if (tokenizer != nullptr && r.stop_reason != "stop_string") text += utf8.flush();
  r.text = text;
  return r;
}

}  // namespace kvp
