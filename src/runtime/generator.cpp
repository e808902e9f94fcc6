#include "runtime/generator.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "runtime/interrupt.h"
#include "runtime/rng.h"

namespace kvp {

CacheMode parse_cache_mode(const std::string& s) {
  if (s == "on") return CacheMode::On;
  if (s == "off") return CacheMode::Off;
  fail_usage("--cache must be 'on' or 'off' (got '{}')", s);
}

namespace {
// Adds a pass of `rows` rows, and the time until it goes out of scope, to an engine's totals.
class PassClock {
 public:
  PassClock(PassTotals& t, long long rows) : t_(t), rows_(rows), t0_(std::chrono::steady_clock::now()) {}
  ~PassClock() {
    t_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    ++t_.passes;
    t_.rows += rows_;
  }
  PassClock(const PassClock&) = delete;
  PassClock& operator=(const PassClock&) = delete;

 private:
  PassTotals& t_;
  long long rows_;
  std::chrono::steady_clock::time_point t0_;
};

int capacity_for(const Model& m, const EngineOptions& o) {
  if (o.cache_capacity < 0) fail_usage("--cache-capacity must be positive (got {})", o.cache_capacity);
  return o.cache_capacity > 0 ? std::min(o.cache_capacity, m.config.max_seq_len) : m.config.max_seq_len;
}
}  // namespace

Engine::Engine(std::shared_ptr<const Model> model, const EngineOptions& opts)
    : model_(std::move(model)),
      opts_(opts),
      pool_(std::make_unique<ThreadPool>(std::max(1, opts.threads))),
      kernels_(make_kernels(opts.kernels, pool_.get(), opts.device, model_.get())),
      cache_(model_->config, capacity_for(*model_, opts), opts.kv_dtype, opts.device) {
  if (opts.threads < 1) fail_usage("--threads must be >= 1 (got {})", opts.threads);
  require_simd(opts.simd);
}

const float* Engine::forward(const int* tokens, int M, int start_pos, const ForwardOptions& fo) {
  use_simd(opts_.simd);
  PassClock clock(totals_, M);
  return kvp::forward(*model_, *kernels_, cache_, act_, tokens, M, start_pos, fo);
}

const float* Engine::forward_uncached(const int* tokens, int M, const ForwardOptions& fo) {
  use_simd(opts_.simd);
  if (opts_.kv_dtype.is_dtype()) {
    cache_.clear();
    return forward(tokens, M, 0, fo);
  }
  if (uncached_ == nullptr) uncached_ = std::make_unique<KVCache>(model_->config, cache_.capacity(), KvType::of(model_->dtype), opts_.device);
  uncached_->clear();
  PassClock clock(totals_, M);
  return kvp::forward(*model_, *kernels_, *uncached_, act_, tokens, M, 0, fo);
}

namespace {

// One sequence being generated: its tokens so far and the stop logic, shared by the solo and the
// batched loops so that both stop for the same reasons at the same step.
class SequenceRun {
 public:
  SequenceRun(std::vector<int> prompt_in, const ModelConfig& c, const Tokenizer* tokenizer, int limit) {
    r_.prompt_ids = std::move(prompt_in);
    if (r_.prompt_ids.empty()) {
      // An empty prompt starts from BOS: the tokenizer's when it has one, else the model's.
      int bos = tokenizer != nullptr ? tokenizer->bos_id() : -1;
      if (bos < 0 || bos >= c.vocab_size) bos = c.bos_id;
      if (bos < 0)
        fail_usage("the prompt is empty and this model ({}) has no BOS token to start from; give a non-empty prompt",
                   arch_name(c.arch));
      r_.prompt_ids.push_back(bos);
    }
    if (int(r_.prompt_ids.size()) > limit)
      fail("prompt of {} tokens does not fit the context ({} position{} of KV cache: the model's context, or "
           "--cache-capacity where smaller)",
           r_.prompt_ids.size(), limit, limit == 1 ? "" : "s");
    seq_ = r_.prompt_ids;
    r_.stop_reason = "max_new_tokens";
  }

  const std::vector<int>& seq() const { return seq_; }
  int length() const { return int(seq_.size()); }
  bool done() const { return done_; }

  // Stops before a step whose newest token would not fit the cache; returns done().
  bool check_room(int limit) {
    if (!done_ && length() > limit) {
      r_.stop_reason = "context_full";
      done_ = true;
    }
    return done_;
  }

  // Ends the run before its next step (teacher forcing ran out of tokens).
  void end(const char* reason) {
    r_.stop_reason = reason;
    done_ = true;
  }

  // Appends the chosen token and applies the stopping rules (see generator.h).
  void push(int token, const GenerationConfig& cfg, const Tokenizer* tokenizer, const ModelConfig& c) {
    seq_.push_back(token);
    r_.output_ids.push_back(token);
    if (cfg.stop_at_eos && (c.ends_generation(token) || (c.bos_ends_generation && token == c.bos_id))) {
      r_.stop_reason = c.ends_generation(token) ? "eos" : "bos";  // a model whose BOS is its EOS reports "eos"
      done_ = true;
      return;
    }
    if (cfg.stop_at_eos &&
        std::find(cfg.turn_end_ids.begin(), cfg.turn_end_ids.end(), token) != cfg.turn_end_ids.end()) {
      r_.stop_reason = "end_of_turn";
      done_ = true;
      return;
    }
    if (tokenizer == nullptr) return;
    const int prev = seq_[seq_.size() - 2];
    const size_t before = text_.size();
    text_ += utf8_.push(tokenizer->token_bytes(prev, token));
    if (cfg.stop_strings.empty()) return;
    // A token's bytes are all in text_ once the decoder holds no incomplete UTF-8 sequence back;
    // until then (a character split over byte tokens) its end is unknown and it stays unresolved.
    Utf8StreamDecoder probe = utf8_;
    if (probe.flush().empty()) ends_.resize(r_.output_ids.size(), text_.size());
    // Earlier text held no match (the run would have stopped), so a match ends in the new bytes.
    size_t cut = std::string::npos;
    const std::string* which = nullptr;
    for (const auto& s : cfg.stop_strings) {
      const size_t pos = text_.find(s, before + 1 > s.size() ? before + 1 - s.size() : 0);
      if (pos < cut) {
        cut = pos;
        which = &s;
      }
    }
    if (which == nullptr) return;
    text_.resize(cut);
    size_t keep = 0;
    while (keep < ends_.size() && ends_[keep] <= cut) ++keep;
    r_.dropped_ids.assign(r_.output_ids.begin() + std::ptrdiff_t(keep), r_.output_ids.end());
    r_.output_ids.resize(keep);
    r_.stop_reason = "stop_string";
    r_.stop_string = *which;
    done_ = true;
  }

  GenerationResult finish(const Tokenizer* tokenizer) {
    if (tokenizer != nullptr && r_.stop_reason != "stop_string") text_ += utf8_.flush();
    r_.text = text_;
    return std::move(r_);
  }

 private:
  GenerationResult r_;
  std::vector<int> seq_;
  Utf8StreamDecoder utf8_;
  std::string text_;
  std::vector<size_t> ends_;  // per resolved output token: text_ length once its bytes were all in it
  bool done_ = false;
};

void validate(const GenerationConfig& cfg, const EngineOptions& eo, size_t sequences, int vocab) {
  cfg.sampler.validate();
  if (!cfg.forced_tokens.empty()) {
    if (cfg.forced_tokens.size() != sequences)
      fail_usage("teacher forcing: {} forced trajectories for {} sequences", cfg.forced_tokens.size(), sequences);
    for (const auto& f : cfg.forced_tokens)
      for (int t : f)
        if (t < 0 || t >= vocab) fail_usage("teacher forcing: token {} is outside the vocabulary ({})", t, vocab);
  }
  if (cfg.forced_skip < 0 || (cfg.forced_skip > 0 && (cfg.forced_tokens.empty() || cfg.cache != CacheMode::Off)))
    fail_usage("teacher forcing: forced_skip {} needs forced tokens and cache OFF", cfg.forced_skip);
  if (cfg.max_new_tokens < 0) fail_usage("--max-new-tokens must be >= 0 (got {})", cfg.max_new_tokens);
  // The CLI and Python refuse it before loading a model; this is for every other caller.
  for (const auto& s : cfg.stop_strings)
    if (s.empty()) fail_usage("stop strings: an empty one would match before the first token; give non-empty strings");
  if (eo.prefill_chunk < 0) fail_usage("--prefill-chunk must be >= 0 (got {})", eo.prefill_chunk);
}

}  // namespace

GenerationResult Engine::generate(const std::vector<int>& prompt_in, const GenerationConfig& cfg,
                                  const Tokenizer* tokenizer, const std::function<void(const StepInfo&)>& on_step) {
  validate(cfg, opts_, 1, model_->config.vocab_size);
  const ModelConfig& c = model_->config;
  const int limit = cache_.capacity();
  SequenceRun run(prompt_in, c, tokenizer, limit);
  const std::vector<int>* forced = cfg.forced_tokens.empty() ? nullptr : &cfg.forced_tokens[0];
  ForwardOptions fo;
  fo.on_nonfinite = cfg.on_nonfinite;
  fo.all_logits = true;
  for (int step = 0; step < cfg.max_new_tokens; ++step) {
    check_interrupt();
    if (forced != nullptr && size_t(step) >= forced->size()) {
      run.end("forced_end");
      break;
    }
    if (run.check_room(limit)) break;
    if (step < cfg.forced_skip) {
      run.push((*forced)[size_t(step)], cfg, tokenizer, c);
      if (run.done()) break;
      continue;
    }
    const std::vector<int>& seq = run.seq();
    const int n = run.length();
    const float* logits;
    if (cfg.cache == CacheMode::Off) {
      logits = forward_uncached(seq.data(), n, fo) + size_t(n - 1) * c.vocab_size;
    } else if (step == 0) {
      cache_.clear();
      const int chunk = opts_.prefill_chunk > 0 ? opts_.prefill_chunk : n;
      int p = 0;
      const float* all = nullptr;
      for (; p + chunk < n; p += chunk) forward(seq.data() + p, chunk, p, fo);
      all = forward(seq.data() + p, n - p, p, fo);
      logits = all + size_t(n - 1 - p) * c.vocab_size;
    } else {
      logits = forward(seq.data() + n - 1, 1, n - 1, fo);
    }
    const double u = uniform_at(cfg.seed, cfg.sequence_id, uint64_t(step));
    const int token = forced != nullptr ? (*forced)[size_t(step)] : sample_token(logits, c.vocab_size, cfg.sampler, u);
    if (on_step)
      on_step(StepInfo{step, n - 1, token, logits, c.vocab_size,
                       act_.last_row_experts.empty() ? nullptr : act_.last_row_experts.data(),
                       int(act_.last_row_experts.size())});
    run.push(token, cfg, tokenizer, c);
    if (run.done()) break;
  }
  return run.finish(tokenizer);
}

std::vector<GenerationResult> Engine::generate_batch(const std::vector<std::vector<int>>& prompts,
                                                     const GenerationConfig& cfg, const Tokenizer* tokenizer,
                                                     const std::function<void(int, const StepInfo&)>& on_step) {
  std::vector<uint64_t> ids(prompts.size());
  for (size_t b = 0; b < ids.size(); ++b) ids[b] = cfg.sequence_id + uint64_t(b);
  return generate_batch(prompts, ids, cfg, tokenizer, on_step);
}

std::vector<GenerationResult> Engine::generate_batch(const std::vector<std::vector<int>>& prompts,
                                                     const std::vector<uint64_t>& sequence_ids,
                                                     const GenerationConfig& cfg, const Tokenizer* tokenizer,
                                                     const std::function<void(int, const StepInfo&)>& on_step) {
  validate(cfg, opts_, prompts.size(), model_->config.vocab_size);
  use_simd(opts_.simd);
  if (sequence_ids.size() != prompts.size())
    fail("generate_batch: {} sequence ids for {} prompts", sequence_ids.size(), prompts.size());
  const ModelConfig& c = model_->config;
  const int B = int(prompts.size());
  const int limit = cache_.capacity();
  const size_t V = size_t(c.vocab_size);
  std::vector<SequenceRun> runs;
  runs.reserve(size_t(B));
  for (const auto& p : prompts) runs.emplace_back(p, c, tokenizer, limit);
  // Cache OFF has no cache: with a quantised KV type its passes attend over compute-dtype K/V,
  // as forward_uncached does.
  const KvType batch_kv =
      cfg.cache == CacheMode::Off && !cache_.type().is_dtype() ? KvType::of(model_->dtype) : cache_.type();
  // The batch caches hold the positions this batch can write (its longest prompt plus the
  // generation budget, in steps of 256, within the engine's capacity), not the whole context: 64
  // sequences of a Llama-2-7B shape would otherwise ask for 64 x 2 GiB for a few hundred positions
  // each. Any static capacity gives the same bits: kernels address the cache by capacity but read
  // only positions a sequence has written (the invariance battery compares exact and static caches).
  int need = 0;
  for (const auto& r : runs) need = std::max(need, r.length() + std::max(cfg.max_new_tokens, 0));
  need = std::min(limit, (need + 255) / 256 * 256);
  if (int(batch_caches_.size()) < B) batch_caches_.resize(size_t(B));
  for (int b = 0; b < B; ++b) {
    auto& bc = batch_caches_[size_t(b)];
    if (bc == nullptr || !(bc->type() == batch_kv) || bc->capacity() < need)
      bc = std::make_unique<KVCache>(c, need, batch_kv, opts_.device);
  }

  ForwardOptions fo;
  fo.on_nonfinite = cfg.on_nonfinite;
  fo.all_logits = false;  // each sequence's last row only
  std::vector<float> logits(size_t(B) * V);
  // A mixture of experts: each sequence's last-row routing (StepInfo::experts), [B][layers * k].
  const size_t R = c.is_moe() ? size_t(c.n_layers) * size_t(c.moe.n_used) : 0;
  std::vector<int> experts(size_t(B) * R);
  std::vector<int> active;
  std::vector<SequenceSlice> slices;
  // One pass over `slices` (sequence who[i] in slice i); keeps each one's last-row logits.
  auto run_pass = [&](const std::vector<int>& who) {
    long long rows = 0;
    for (const auto& sl : slices) rows += sl.n_tokens;
    PassClock clock(totals_, rows);
    const float* out = forward_batch(*model_, *kernels_, act_, slices, fo);
    for (size_t i = 0; i < who.size(); ++i) {
      std::copy_n(out + i * V, V, logits.data() + size_t(who[i]) * V);
      std::copy_n(act_.last_row_experts.begin() + std::ptrdiff_t(i * R), R,
                  experts.begin() + std::ptrdiff_t(size_t(who[i]) * R));
    }
  };
  for (int step = 0; step < cfg.max_new_tokens; ++step) {
    check_interrupt();
    active.clear();
    for (int b = 0; b < B; ++b) {
      SequenceRun& run = runs[size_t(b)];
      if (!cfg.forced_tokens.empty() && !run.done() && size_t(step) >= cfg.forced_tokens[size_t(b)].size())
        run.end("forced_end");
      if (!run.check_room(limit)) active.push_back(b);
    }
    if (active.empty()) break;
    if (step < cfg.forced_skip) {
      for (int b : active) runs[size_t(b)].push(cfg.forced_tokens[size_t(b)][size_t(step)], cfg, tokenizer, c);
      continue;
    }
    std::vector<int> who;
    if (cfg.cache == CacheMode::Off || step == 0) {
      // The whole sequence from position 0 (cache OFF, or the prefill), in chunks of
      // prefill_chunk rows per sequence when prefilling: pass k holds chunk k of every sequence
      // that still has one.
      int longest = 0;
      for (int b : active) {
        batch_caches_[size_t(b)]->clear();
        longest = std::max(longest, runs[size_t(b)].length());
      }
      const int chunk = (cfg.cache == CacheMode::On && opts_.prefill_chunk > 0) ? opts_.prefill_chunk : longest;
      for (int p = 0; p < longest; p += chunk) {
        slices.clear();
        who.clear();
        for (int b : active) {
          const int n = runs[size_t(b)].length();
          if (p >= n) continue;
          slices.push_back(SequenceSlice{batch_caches_[size_t(b)].get(), runs[size_t(b)].seq().data() + p,
                                         std::min(chunk, n - p), p});
          who.push_back(b);
        }
        run_pass(who);
      }
    } else {
      slices.clear();
      for (int b : active) {
        const int n = runs[size_t(b)].length();
        slices.push_back(SequenceSlice{batch_caches_[size_t(b)].get(), runs[size_t(b)].seq().data() + n - 1, 1, n - 1});
      }
      run_pass(active);
    }
    for (int b : active) {
      SequenceRun& run = runs[size_t(b)];
      const float* row = logits.data() + size_t(b) * V;
      const double u = uniform_at(cfg.seed, sequence_ids[size_t(b)], uint64_t(step));
      const int token = cfg.forced_tokens.empty() ? sample_token(row, c.vocab_size, cfg.sampler, u)
                                                  : cfg.forced_tokens[size_t(b)][size_t(step)];
      if (on_step)
        on_step(b, StepInfo{step, run.length() - 1, token, row, c.vocab_size,
                            R > 0 ? experts.data() + size_t(b) * R : nullptr, int(R)});
      run.push(token, cfg, tokenizer, c);
    }
  }
  std::vector<GenerationResult> out;
  out.reserve(size_t(B));
  for (auto& r : runs) out.push_back(r.finish(tokenizer));
  return out;
}

}  // namespace kvp
