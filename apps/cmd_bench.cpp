#include <unistd.h>

#include <iostream>

#include "cli_common.h"
#include "core/error.h"
#include "lab/bench.h"
#include "model/synthetic.h"

namespace kvp::cli {

void register_bench(CLI::App& app) {
  struct Opts {
    std::string model, synth = "tiny", dtypes = "fp32", kernels = "standard", threads = "1";
    int prompt = 64, decode = 32, cache_off = 64, repeats = 2;
    double bandwidth = 0;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("bench", "prefill/decode tok/s (cache ON) and cache-OFF step time vs the bandwidth bound");
  cmd->add_option("--model", o->model, "checkpoint to measure (default: a synthesised model, see --synth)");
  cmd->add_option("--synth", o->synth, "preset of the synthesised model when no --model: tiny, tinyllama-1.1b, llama2-7b, mistral-7b, gemma2-2b, qwen2.5-0.5b");
  cmd->add_option("--dtype", o->dtypes, "comma-separated dtypes");
  cmd->add_option("--kernels", o->kernels, "comma-separated kernel policies");
  cmd->add_option("--threads", o->threads, "comma-separated thread counts");
  cmd->add_option("--prompt-tokens", o->prompt, "prefill length");
  cmd->add_option("--decode-tokens", o->decode, "decode steps");
  cmd->add_option("--cache-off-tokens", o->cache_off, "sequence length of the cache-OFF step");
  cmd->add_option("--repeats", o->repeats, "best of N; each repeat runs every configuration and the bandwidth probe once, interleaved, starting one configuration later each time");
  cmd->add_option("--bandwidth-gbs", o->bandwidth, "skip measuring memory bandwidth and use this value");
  cmd->add_flag("--json", o->json, "print a JSON array instead of the table");
  cmd->callback([o] {
    auto split = [](const std::string& s) {
      std::vector<std::string> out;
      size_t i = 0;
      while (i <= s.size()) {
        size_t j = s.find(',', i);
        if (j == std::string::npos) j = s.size();
        if (j > i) out.push_back(s.substr(i, j - i));
        i = j + 1;
      }
      return out;
    };
    BenchConfig cfg;
    cfg.dtypes.clear();
    cfg.policies.clear();
    cfg.threads.clear();
    for (const auto& d : split(o->dtypes)) cfg.dtypes.push_back(parse_dtype(d));
    for (const auto& k : split(o->kernels)) cfg.policies.push_back(parse_policy(k));
    for (const auto& t : split(o->threads)) {
      const int n = std::atoi(t.c_str());
      if (n < 1) fail_usage("--threads: '{}' is not a positive thread count", t);
      cfg.threads.push_back(n);
    }
    cfg.prompt_tokens = o->prompt;
    cfg.decode_tokens = o->decode;
    cfg.cache_off_tokens = o->cache_off;
    cfg.repeats = o->repeats;
    cfg.bandwidth_gbs = o->bandwidth;
    const Checkpoint ckpt = o->model.empty()
                                ? synthesize_checkpoint(synthetic_config("", o->synth), DType::F16)
                                : open_checkpoint(o->model);
    const bool tty = isatty(STDERR_FILENO);
    auto progress = +[](const BenchResult& r) {
      std::cerr << "  done: " << r.kernels << " " << r.dtype << " threads=" << r.threads << "\n";
    };
    const auto rows = run_bench(ckpt, cfg, tty ? progress : nullptr);
    if (o->json)
      std::cout << bench_json(rows) << std::endl;
    else
      std::cout << "model: " << (o->model.empty() ? "synthetic " + o->synth : o->model) << "\n" << bench_table(rows);
  });
}

}  // namespace kvp::cli
