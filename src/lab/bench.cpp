#include "lab/bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/huge_pages.h"
#include "cuda/cuda_runtime_api.h"
#include "kernels/bandwidth.h"
#include "kernels/fma_peak.h"
#include "model/model.h"
#include "runtime/generator.h"
#include "runtime/sampler.h"

namespace kvp {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Flops of a prefill of P tokens: every matrix (2*N*K per row; the head on every row or on the
// last) and the causal attention (QK^T and P.V: 4*head_dim per query-key pair per head, P(P+1)/2
// pairs).
double prefill_flops(const ModelConfig& c, int P, bool all_logits) {
  const double q = double(c.n_heads) * c.head_dim, kv = double(c.n_kv_heads) * c.head_dim;
  const double per_layer = c.dim * (q + 2 * kv) + q * c.dim + 3.0 * c.dim * c.hidden_dim;
  const double matrices =
      2.0 * (double(P) * c.n_layers * per_layer + (all_logits ? P : 1) * double(c.vocab_size) * c.dim);
  const double attention = 4.0 * c.n_heads * c.head_dim * (double(P) * (P + 1) / 2) * c.n_layers;
  return matrices + attention;
}

double peak_rss_mb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) / 1024.0;
}

}  // namespace

void check_bench_config(const BenchConfig& cfg) {
  if (cfg.prompt_tokens < 1 || cfg.decode_tokens < 1 || cfg.cache_off_tokens < 1)
    fail_usage("bench token counts must be >= 1");
  if (cfg.batch_cache_off && cfg.batch < 2)
    fail_usage("--batch-cache-off times a step of the --batch-size sequences: it needs --batch-size 2 or more");
  if (cfg.op_times && std::count(cfg.devices.begin(), cfg.devices.end(), Device::Cuda) == 0)
    fail_usage("--op-times times the GPU's kernels: it needs --device cuda");
}

std::vector<BenchResult> run_bench(const Checkpoint& ckpt, const BenchConfig& cfg,
                                   void (*progress)(const BenchResult&)) {
  check_bench_config(cfg);
  const ModelConfig& c = ckpt.config;
  // The batched cache-OFF step's sequences take one token more: generate_batch sizes its caches
  // for the prompt and the token it generates.
  const int needed =
      std::max(cfg.prompt_tokens + cfg.decode_tokens, cfg.cache_off_tokens + (cfg.batch_cache_off ? 1 : 0));
  if (needed > c.max_seq_len)
    fail("bench needs {} positions but the model's context is {}", needed, c.max_seq_len);
  // Deterministic token ids spread over the vocabulary.
  std::vector<int> tokens(static_cast<size_t>(needed));
  for (int i = 0; i < needed; ++i) tokens[size_t(i)] = (c.bos_id >= 0 && i == 0) ? c.bos_id : (i * 7919 + 13) % c.vocab_size;

  if (cfg.op_times) {
    cuda::reset_op_times();
    cuda::set_op_timing(true);
  }
  std::vector<BenchResult> rows;
  for (DType dt : cfg.dtypes) {
    std::shared_ptr<Model> model = Model::from_checkpoint(ckpt, dt);
    // On a shared host the memory bandwidth drifts by up to 2x within minutes. So that every
    // configuration and the bandwidth probe see the same conditions, each repeat runs all of them
    // once, in turn (configurations interleaved, the probe beside them), and every figure is the
    // best over the repeats.
    // threads (CPU) or -1 (the GPU) -> best read GB/s seen beside this dtype's runs
    std::map<int, double> bandwidth;
    // (SIMD target, threads) -> best fp32 FMA GFLOP/s seen beside this dtype's runs
    std::map<std::pair<int, int>, double> fma_peak;
    const bool on_cpu = std::count(cfg.devices.begin(), cfg.devices.end(), Device::Cpu) > 0;
    const bool on_gpu = std::count(cfg.devices.begin(), cfg.devices.end(), Device::Cuda) > 0;
    auto probe_bandwidth = [&] {
      for (int t : cfg.threads) {
        if (!on_cpu) break;
        const double gbs = cfg.bandwidth_gbs > 0 ? cfg.bandwidth_gbs : measure_read_bandwidth_gbs(size_t(1) << 30, t);
        bandwidth[t] = std::max(bandwidth[t], gbs);
        for (SimdTarget simd : cfg.simds) {
          use_simd(simd);
          double& p = fma_peak[{int(simd), t}];
          p = std::max(p, measure_fma_peak_gflops(t));
        }
      }
      if (on_gpu) {
        // 4 GiB: far beyond any GPU's L2, so the figure is HBM's.
        const double gbs = cfg.bandwidth_gbs > 0 ? cfg.bandwidth_gbs : cuda::read_bandwidth(size_t(4) << 30, 3) / 1e9;
        bandwidth[-1] = std::max(bandwidth[-1], gbs);
      }
    };
    struct Run {
      std::unique_ptr<Engine> engine;
      BenchResult r;
      SimdTarget simd = SimdTarget::Auto;
      double best_prefill = 1e30, best_decode = 1e30, best_off = 1e30, best_batch = 1e30, best_batch_off = 1e30;
    };
    std::vector<Run> runs;
    const std::vector<KvType> kvs = cfg.kv_types.empty() ? std::vector<KvType>{KvType::of(dt)} : cfg.kv_types;
    for (const Device dev : cfg.devices)
    for (const SimdTarget simd : cfg.simds)
    for (const KvType& kv : kvs) {
      for (KernelPolicy pol : cfg.policies) {
        for (int th : cfg.threads) {
          // The thread count is the CPU's: one GPU row per (kernels, KV type).
          if (dev == Device::Cuda && (th != cfg.threads.front() || simd != cfg.simds.front())) continue;
          EngineOptions eo;
          eo.device = dev;
          eo.kernels = pol;
          eo.threads = dev == Device::Cuda ? 1 : th;
          eo.kv_dtype = kv;
          eo.cache_capacity = needed;
          eo.simd = simd;
          Run run;
          run.engine = std::make_unique<Engine>(model, eo);
          run.r.device = device_name(dev);
          run.r.kernels = policy_name(pol);
          run.r.dtype = std::string(dtype_name(dt));
          run.r.kv_dtype = kv.name();
          run.simd = simd;
          run.r.kv_bytes = kv_bytes_per_decode_step(model->config, kv, cfg.prompt_tokens, cfg.decode_tokens);
          if (dev == Device::Cpu) {
            use_simd(simd);
            run.r.simd = simd_in_use();
          }
          run.r.threads = eo.threads;
          run.r.prompt_tokens = cfg.prompt_tokens;
          run.r.decode_tokens = cfg.decode_tokens;
          run.r.cache_off_tokens = cfg.cache_off_tokens;
          runs.push_back(std::move(run));
        }
      }
    }
    // Decode steps have one row; the prefill and the cache-OFF step compute the head on every row
    // only when asked (on a GPU that also times copying [M, vocab] fp32 logits back over PCIe).
    ForwardOptions fo;
    ForwardOptions whole_seq = fo;  // the prefill and the cache-OFF step
    whole_seq.all_logits = cfg.all_logits;
    // With several policies the table keeps each one's operations apart.
    const bool by_policy = cfg.policies.size() > 1;
    std::string kernels;
    const auto phase = [&](const char* name) {
      const std::string tagged = by_policy && name != std::string("-") ? kernels + " " + name : name;
      if (cfg.op_times) cuda::op_timing_phase(tagged);
      if (on_gpu) cuda::profile_phase(tagged);
    };
    for (int rep = 0; rep < std::max(1, cfg.repeats); ++rep) {
      probe_bandwidth();
      // The order rotates from repeat to repeat: in short runs the slot a configuration runs in
      // mattered by itself (the second of five identical two-thread configurations decoded up to
      // 15% slower than the others, in run after run), and rotation lets every configuration's
      // best come from every slot.
      for (size_t k = 0; k < runs.size(); ++k) {
        Run& run = runs[(k + size_t(rep)) % runs.size()];
        Engine& engine = *run.engine;
        engine.cache().clear();
        kernels = run.r.kernels;
        phase("prefill");
        double t0 = now_s();
        engine.forward(tokens.data(), cfg.prompt_tokens, 0, whole_seq);
        run.best_prefill = std::min(run.best_prefill, now_s() - t0);
        phase("decode");
        if (run.r.device == "cuda") cuda::reset_busiest_pass_graph();
        t0 = now_s();
        for (int s = 0; s < cfg.decode_tokens; ++s) {
          const int pos = cfg.prompt_tokens + s;
          engine.forward(tokens.data() + pos, 1, pos, fo);
        }
        run.best_decode = std::min(run.best_decode, now_s() - t0);
        if (run.r.device == "cuda") {
          const cuda::GraphNodes g = cuda::busiest_pass_graph_nodes();
          run.r.decode_graph_kernel_nodes = g.kernels, run.r.decode_graph_nodes = g.total;
          run.r.decode_graph_kernels = g.kernel_names;
        }
        phase("cache-off");
        t0 = now_s();
        engine.forward_uncached(tokens.data(), cfg.cache_off_tokens, whole_seq);
        run.best_off = std::min(run.best_off, now_s() - t0);
        phase("-");
        if (cfg.batch > 1) {
          // B prompts (rotations of the bench tokens, so no two are equal). The clock starts
          // when the last sequence has its first token (the prefills are done).
          std::vector<std::vector<int>> prompts(size_t(cfg.batch));
          for (int b = 0; b < cfg.batch; ++b)
            for (int i = 0; i < cfg.prompt_tokens; ++i)
              prompts[size_t(b)].push_back(tokens[size_t((i + b) % cfg.prompt_tokens)]);
          GenerationConfig g;
          g.stop_at_eos = false;
          g.max_new_tokens = cfg.decode_tokens + 1;
          double decode_start = 0;
          phase("batch decode");
          engine.generate_batch(prompts, g, nullptr, [&](int, const StepInfo& st) {
            if (st.step == 0) decode_start = now_s();
          });
          run.best_batch = std::min(run.best_batch, now_s() - decode_start);
          phase("-");
        }
        if (cfg.batch_cache_off) {  // with a batch of 2 or more (check_bench_config)
          // B rotations of the bench tokens' first cache_off_tokens, all from position 0 in one
          // pass (generate_batch's first step: with cache OFF, what every later step computes too).
          std::vector<std::vector<int>> seqs(size_t(cfg.batch));
          for (int b = 0; b < cfg.batch; ++b)
            for (int i = 0; i < cfg.cache_off_tokens; ++i)
              seqs[size_t(b)].push_back(tokens[size_t((i + b) % cfg.cache_off_tokens)]);
          GenerationConfig g;
          g.cache = CacheMode::Off;
          g.stop_at_eos = false;
          g.max_new_tokens = 1;
          phase("batch cache-off");
          const double t1 = now_s();
          engine.generate_batch(seqs, g, nullptr, nullptr);
          run.best_batch_off = std::min(run.best_batch_off, now_s() - t1);
          phase("-");
        }
      }
    }
    const HugePageShare huge = huge_page_share(model->weights.matrix_ranges());
    for (Run& run : runs) {
      BenchResult& r = run.r;
      r.weights_huge_page_share = huge.known ? huge.share() : -1.0;
      r.prefill_tok_s = cfg.prompt_tokens / run.best_prefill;
      r.decode_tok_s = cfg.decode_tokens / run.best_decode;
      r.cache_off_step_s = run.best_off;
      r.batch = cfg.batch;
      if (cfg.batch > 1) r.batch_decode_tok_s = double(cfg.batch) * cfg.decode_tokens / run.best_batch;
      if (cfg.batch_cache_off) r.batch_cache_off_step_s = run.best_batch_off;
      r.model_bytes = double(model->weights.matrix_bytes());
      r.bandwidth_gbs = bandwidth[r.device == "cpu" ? r.threads : -1];
      r.bandwidth_bound_tok_s = r.bandwidth_gbs * 1e9 / (r.model_bytes + r.kv_bytes);
      r.decode_fraction_of_bound = r.decode_tok_s / r.bandwidth_bound_tok_s;
      r.all_logits = cfg.all_logits;
      r.prefill_gflops = prefill_flops(model->config, cfg.prompt_tokens, cfg.all_logits) / run.best_prefill / 1e9;
      if (r.device == "cpu") {
        r.peak_gflops = fma_peak[{int(run.simd), r.threads}];
        r.prefill_fraction_of_peak = r.prefill_gflops / r.peak_gflops;
      }
      r.peak_rss_mb = peak_rss_mb();
      if (r.device == "cuda") r.peak_device_mb = double(cuda::peak_allocated()) / 1e6;
      if (progress) progress(r);
      rows.push_back(r);
    }
  }
  return rows;
}

double kv_bytes_per_decode_step(const ModelConfig& cfg, const KvType& kv, int first, int steps) {
  if (steps <= 0) return 0;
  const double row = 2.0 * cfg.n_kv_heads * double(kv.bytes(size_t(cfg.head_dim)));  // K and V of one position
  double positions = 0;
  for (int l = 0; l < cfg.n_layers; ++l) {
    const int w = cfg.window_for_layer(l);
    for (int p = first; p < first + steps; ++p) positions += w > 0 ? std::min(p + 1, w) : p + 1;
  }
  return row * positions / steps;
}

std::string bench_table(const std::vector<BenchResult>& rows) {
  const bool any_gpu = std::any_of(rows.begin(), rows.end(), [](const BenchResult& r) { return r.device != "cpu"; });
  const int batch = rows.empty() ? 1 : rows.front().batch;
  const bool batch_off = !rows.empty() && rows.front().batch_cache_off_step_s > 0;
  std::string s = fmt::format(
      "{:<6} {:<7} {:<10} {:<5} {:<8} {:>7} {:>12} {:>9} {:>7} {:>11} {:>13} {:>10} {:>8} {:>9} {:>9} {:>9}{}{}{}\n",
      "device", "simd", "kernels", "dtype", "kv", "threads", "prefill t/s", "GFLOP/s", "% peak", "decode t/s",
      "cache-off s", "model MB", "KV MB", "BW GB/s", "bound t/s", "% bound", any_gpu ? "  peak device MB" : "",
      batch > 1 ? fmt::format(" {:>16}", fmt::format("B={} decode t/s", batch)) : "",
      batch_off ? fmt::format(" {:>15}", fmt::format("B={} cache-off s", batch)) : "");
  for (const auto& r : rows)
    s += fmt::format(
        "{:<6} {:<7} {:<10} {:<5} {:<8} {:>7} {:>12.1f} {:>9.1f} {:>7} {:>11.2f} {:>13.4f} {:>10.1f} {:>8.1f} {:>9.1f} "
        "{:>9.2f} {:>8.0f}%{}{}{}\n",
        r.device, r.simd.empty() ? "-" : r.simd, r.kernels, r.dtype, r.kv_dtype, r.threads, r.prefill_tok_s,
        r.prefill_gflops,
        r.peak_gflops > 0 ? fmt::format("{:.0f}%", 100.0 * r.prefill_fraction_of_peak) : std::string("-"),
        r.decode_tok_s, r.cache_off_step_s, r.model_bytes / 1e6, r.kv_bytes / 1e6, r.bandwidth_gbs,
        r.bandwidth_bound_tok_s, 100.0 * r.decode_fraction_of_bound,
        r.device == "cpu" ? (any_gpu ? fmt::format(" {:>15}", "-") : std::string())
                          : fmt::format(" {:>15.0f}", r.peak_device_mb),
        batch > 1 ? fmt::format(" {:>16.1f}", r.batch_decode_tok_s) : std::string(),
        batch_off ? fmt::format(" {:>15.4f}", r.batch_cache_off_step_s) : std::string());
  if (!rows.empty())
    s += rows.front().all_logits ? "prefill and cache-off: logits of every row (--logits all)\n"
                                 : "prefill and cache-off: logits of the last row only (--logits last)\n";
  for (const auto& r : rows) {
    if (r.weights_huge_page_share < 0 || r.weights_huge_page_share >= 0.5 || r.model_bytes < 256e6) continue;
    s += fmt::format(
        "note: only {:.0f}% of the {} weights were mapped in 2 MiB pages, and decode from 4 KiB pages is\n"
        "      markedly slower. A model file just written by another program sits in the page cache in\n"
        "      small pages; dropping it from the cache (dd if=MODEL iflag=nocache count=0) lets the next\n"
        "      run read it back in 2 MiB pages. Files kvparity writes are dropped for you.\n",
        100.0 * r.weights_huge_page_share, r.dtype);
    break;
  }
  return s;
}

std::string bench_json(const std::vector<BenchResult>& rows) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& r : rows) {
    arr.push_back({{"device", r.device},
                   {"simd", r.simd},
                   {"kernels", r.kernels},
                   {"dtype", r.dtype},
                   {"kv_dtype", r.kv_dtype},
                   {"threads", r.threads},
                   {"prompt_tokens", r.prompt_tokens},
                   {"decode_tokens", r.decode_tokens},
                   {"cache_off_tokens", r.cache_off_tokens},
                   {"logits", r.all_logits ? "all" : "last"},
                   {"prefill_tok_s", r.prefill_tok_s},
                   {"prefill_gflops", r.prefill_gflops},
                   {"peak_fma_gflops", r.peak_gflops},
                   {"prefill_fraction_of_peak", r.prefill_fraction_of_peak},
                   {"decode_tok_s", r.decode_tok_s},
                   {"cache_off_step_s", r.cache_off_step_s},
                   {"model_bytes", r.model_bytes},
                   {"kv_bytes", r.kv_bytes},
                   {"bandwidth_gbs", r.bandwidth_gbs},
                   {"bandwidth_bound_tok_s", r.bandwidth_bound_tok_s},
                   {"decode_fraction_of_bound", r.decode_fraction_of_bound},
                   {"batch", r.batch},
                   {"batch_decode_tok_s", r.batch_decode_tok_s},
                   {"batch_cache_off_step_s", r.batch_cache_off_step_s},
                   {"peak_rss_mb", r.peak_rss_mb},
                   {"peak_device_mb", r.peak_device_mb},
                   {"decode_graph_kernel_nodes", r.decode_graph_kernel_nodes},
                   {"decode_graph_nodes", r.decode_graph_nodes},
                   {"decode_graph_kernels", r.decode_graph_kernels},
                   {"weights_huge_page_share", r.weights_huge_page_share}});
  }
  return arr.dump(2);
}

std::string op_times_table() {
  const auto times = cuda::op_times();
  // Passes of a phase: every pass embeds its tokens once.
  std::map<std::string, long> passes;
  std::map<std::string, double> phase_ms;
  for (const auto& t : times) {
    if (t.op == "embed") passes[t.phase] = t.count;
    phase_ms[t.phase] += t.ms;
  }
  std::string s = fmt::format("GPU time per pass, by operation (events around each; no graph replay while timing)\n"
                              "{:<20} {:<12} {:>10} {:>8} {:>12}\n",
                              "phase", "operation", "ms/pass", "share", "calls/pass");
  for (const auto& t : times) {
    if (t.phase == "-") continue;
    const double n = double(std::max(1L, passes[t.phase]));
    s += fmt::format("{:<20} {:<12} {:>10.3f} {:>7.1f}% {:>12.1f}\n", t.phase, t.op, t.ms / n,
                     100.0 * t.ms / std::max(1e-9, phase_ms[t.phase]), double(t.count) / n);
  }
  for (const auto& [ph, ms] : phase_ms)
    if (ph != "-") s += fmt::format("{:<20} {:<12} {:>10.3f}\n", ph, "total", ms / double(std::max(1L, passes[ph])));
  return s;
}

}  // namespace kvp
