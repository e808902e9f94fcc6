#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <iostream>

#include "cli_common.h"
#include "core/error.h"
#include "cuda/cuda_runtime_api.h"
#include "lab/bench.h"
#include "lab/load_bench.h"
#include "model/synthetic.h"

namespace kvp::cli {

void register_bench(CLI::App& app) {
  struct Opts {
    std::string model, synth = "tiny", dtypes = "fp32", kv_dtypes, kernels = "standard", threads = "1", devices = "cpu", simds = "auto",
                logits = "last";
    int prompt = 64, decode = 32, cache_off = 64, repeats = 2, batch = 1;
    double bandwidth = 0;
    bool json = false, load = false, op_times = false, batch_cache_off = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd =
      app.add_subcommand("bench", "prefill/decode tok/s (cache ON) and cache-OFF step time vs the bandwidth bound");
  auto* model =
      cmd->add_option("--model", o->model, "checkpoint to measure (default: a synthesised model, see --synth)");
  one_of(cmd->add_option("--synth", o->synth, "preset of the synthesised model measured when there is no --model"),
         kSynthPresets)
      ->excludes(model);
  list_of(cmd->add_option("--dtype", o->dtypes, "dtypes, comma-separated, each measured"), kDtypeNames);
  list_of(cmd->add_option("--kv-dtype", o->kv_dtypes, "KV-cache types, comma-separated, each measured (default: each --dtype)"),
          kKvTypeNames);
  list_of(cmd->add_option("--kernels", o->kernels, "kernel policies, comma-separated, each measured"), kPolicyNames);
  int_list_in(cmd->add_option("--threads", o->threads, "thread counts, comma-separated, each measured"), kMinThreads,
              kMaxThreads);
  list_of(cmd->add_option("--device", o->devices, "devices, comma-separated, each measured (cpu, cuda)"),
          {"cpu", "cuda"});
  list_of(cmd->add_option("--simd", o->simds,
                          "CPU SIMD targets, comma-separated, each measured (auto: the best this CPU has; avx512, "
                          "avx2, scalar)"),
          kSimdNames);
  int_at_least(cmd->add_option("--prompt-tokens", o->prompt, "prefill length"), 1);
  int_at_least(cmd->add_option("--decode-tokens", o->decode, "decode steps"), 1);
  int_at_least(cmd->add_option("--batch-size", o->batch,
                               "also decode B sequences of --prompt-tokens as one batch (greedy, cache on) and report "
                               "their decode tokens per second, all sequences together (prefill excluded)"),
               1);
  int_at_least(cmd->add_option("--cache-off-tokens", o->cache_off, "sequence length of the cache-OFF step"), 1);
  cmd->add_flag("--batch-cache-off", o->batch_cache_off,
                "also time one cache-OFF step of the --batch-size sequences together (B x --cache-off-tokens rows "
                "from position 0 in one pass, as each step of `eval gsm8k --batch-size B`'s cache-OFF side)");
  int_at_least(
      cmd->add_option("--repeats", o->repeats,
                      "best of N; each repeat runs every configuration and the bandwidth probe once, interleaved, "
                      "starting one configuration later each time"),
      1);
  real_in(cmd->add_option("--bandwidth-gbs", o->bandwidth, "skip measuring memory bandwidth and use this value"), 0,
          true, HUGE_VAL, false)
      ->default_str("measured");
  one_of(cmd->add_option("--logits", o->logits,
                         "rows whose logits the prefill and the cache-OFF step compute: last (as serving stacks and "
                         "llama-bench do) or all (as `generate` does, so that its cache-OFF last row is the prefill's)"),
         {"last", "all"})
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "print a JSON array instead of the table");
  cmd->add_flag("--op-times", o->op_times,
                "cuda: also print the GPU time of each kernel operation per pass (prefill, decode, cache-off), timed "
                "with events; passes then run without graph replay, so decode tok/s is lower while it is on");
  cmd->add_flag("--load", o->load,
                "measure instead how long --model takes to load and be ready (weights touched) per --dtype, against "
                "mapping and touching the file once (page cache warm); best of --repeats")
      ->needs(model);
  cmd->callback([o, cmd] {
    if (o->load) {
      refuse_unless(cmd, "--kv-dtype", false, "a speed run (no --load)", "loading allocates no KV cache");
      refuse_unless(cmd, "--device", false, "a speed run (no --load)", "loading reads the file into host memory");
      refuse_unless(cmd, "--simd", false, "a speed run (no --load)", "loading runs no kernels");
      refuse_unless(cmd, "--batch-size", false, "a speed run (no --load)", "loading decodes nothing");
      refuse_unless(cmd, "--batch-cache-off", false, "a speed run (no --load)", "loading decodes nothing");
      refuse_unless(cmd, "--op-times", false, "a speed run (no --load)", "loading runs no kernels");
      refuse_unless(cmd, "--logits", false, "a speed run (no --load)", "loading computes no logits");
      std::vector<DType> dtypes;
      for (const auto& d : split_list(o->dtypes)) dtypes.push_back(parse_dtype(d));
      const auto rows = measure_load(o->model, dtypes, o->repeats);
      if (o->json)
        std::cout << load_json(rows) << std::endl;
      else
        std::cout << "model: " << o->model << "\n" << load_table(rows);
      return;
    }
    BenchConfig cfg;
    cfg.dtypes.clear();
    cfg.policies.clear();
    cfg.threads.clear();
    for (const auto& d : split_list(o->dtypes)) cfg.dtypes.push_back(parse_dtype(d));
    for (const auto& k : split_list(o->kernels)) cfg.policies.push_back(parse_policy(k));
    for (const auto& k : split_list(o->kv_dtypes)) cfg.kv_types.push_back(*parse_kv_type(k));
    for (const auto& t : split_list(o->threads)) cfg.threads.push_back(std::stoi(t));  // checked by int_list_in
    cfg.devices.clear();
    for (const auto& d : split_list(o->devices)) {
      cfg.devices.push_back(parse_device(d));
      require_device(cfg.devices.back());
    }
    cfg.simds.clear();
    for (const auto& s : split_list(o->simds)) {
      cfg.simds.push_back(parse_simd(s));
      require_simd(cfg.simds.back());
    }
    check_threads_policies(cmd, *std::max_element(cfg.threads.begin(), cfg.threads.end()), split_list(o->kernels));
    cfg.prompt_tokens = o->prompt;
    cfg.decode_tokens = o->decode;
    cfg.cache_off_tokens = o->cache_off;
    cfg.repeats = o->repeats;
    cfg.bandwidth_gbs = o->bandwidth;
    cfg.op_times = o->op_times;
    cfg.batch = o->batch;
    cfg.batch_cache_off = o->batch_cache_off;
    cfg.all_logits = o->logits == "all";
    check_bench_config(cfg);  // before a model is synthesised or loaded
    // Synthesised in the first --dtype: the model of that dtype then uses the checkpoint's tensors
    // as they are. (Always fp16, a bf16 run held an fp16 checkpoint beside its converted weights:
    // twice the memory, and a 7B bf16 bench was killed for it on a 24 GB host.)
    const Checkpoint ckpt = o->model.empty()
                                ? synthesize_checkpoint(synthetic_config("", o->synth), cfg.dtypes.front())
                                : open_checkpoint(o->model);
    const bool tty = isatty(STDERR_FILENO);
    auto progress = +[](const BenchResult& r) {
      std::cerr << "  done: " << r.kernels << " " << r.dtype << " threads=" << r.threads << "\n";
    };
    const auto rows = run_bench(ckpt, cfg, tty ? progress : nullptr);
    const bool on_cuda = std::count(cfg.devices.begin(), cfg.devices.end(), Device::Cuda) > 0;
    if (o->json)
      std::cout << bench_json(rows) << std::endl;
    else
      std::cout << "model: " << (o->model.empty() ? "synthetic " + o->synth : o->model) << "\n"
                << (on_cuda ? "gpu: " + device_description(Device::Cuda) + "\n" : std::string()) << bench_table(rows);
    if (on_cuda) {
      // The switches that change a GPU run's speed (and no bit, but for grouping, the decode GEMV
      // and the decode split under `standard`: cuBLAS's algorithm for the wider shape, the GEMV's
      // and the attention's orders), so that a figure says what ran.
      (o->json ? std::cerr : std::cout) << "cuda launches: fusion " << (cuda::launch_fusion_on() ? "on" : "off")
                                        << ", grouped projections " << (cuda::group_launches_on() ? "on" : "off")
                                        << ", dead write-backs " << (cuda::skip_dead_writes_on() ? "skipped" : "kept")
                                        << ", standard GEMM outputs " << (cuda::gemm_out16_on() ? "16-bit" : "fp32")
                                        << ", programmatic launch "
                                        << (!cuda::programmatic_launch_on()         ? "off"
                                            : cuda::programmatic_launch_available() ? "on"
                                                                                    : "asked for, unavailable here")
                                        << ", invariant GEMM kernel " << cuda::invariant_gemm_kernel()
                                        << (cuda::invariant_gemm_kernel() == cuda::invariant_gemm_kernel_here()
                                                ? std::string()
                                                : " = " + cuda::invariant_gemm_kernel_here())
                                        << " (tile groups of " << cuda::gemm_tile_group() << ")"
                                        << ", standard decode splits of " << cuda::decode_split_keys() << "+ keys"
                                        << ", standard decode GEMMs on "
                                        << (cuda::standard_gemv_on() ? "kvparity's GEMV" : "cuBLAS") << "\n";
      // The weights' upload (and the gains'): what a run pays once before its first pass.
      const cuda::UploadTotals up = cuda::upload_totals();
      (o->json ? std::cerr : std::cout) << fmt::format(
          "cuda uploads: {:.1f} MB in {:.2f} s ({:.2f} GB/s; pinned staging {})\n", double(up.bytes) / 1e6, up.seconds,
          up.seconds > 0 ? double(up.bytes) / up.seconds / 1e9 : 0.0, cuda::staged_upload_on() ? "on" : "off");
    }
    if (o->op_times) (o->json ? std::cerr : std::cout) << op_times_table();
    // What a replayed decode step costs the GPU's front end, for each configuration.
    for (const BenchResult& r : rows)
      if (r.decode_graph_nodes > 0)
        (o->json ? std::cerr : std::cout)
            << "cuda graph of a decode step (" << r.kernels << " " << r.dtype << "): " << r.decode_graph_kernel_nodes
            << " kernel nodes (" << r.decode_graph_nodes << " nodes in all)"
            << (r.decode_graph_kernels.empty() ? "" : ": " + r.decode_graph_kernels) << "\n";
  });
}

}  // namespace kvp::cli
