#include "lab/demo.h"

#include <fmt/format.h>

#include "lab/path_comparison.h"
#include "model/synthetic.h"
#include "runtime/tokenizer_for_model.h"

namespace kvp {

std::vector<DemoRow> run_demo(const DemoOptions& opts, std::string* description) {
  Checkpoint ckpt;
  std::unique_ptr<Tokenizer> tok;
  if (opts.model.empty()) {
    ckpt = synthesize_checkpoint(synthetic_config("llama", "tiny"), DType::F32);
    tok = tokenizer_from_json(make_synthetic_tokenizer_json(ckpt.config.vocab_size), "synthetic tokenizer");
    *description = "synthetic llama 'tiny' (4 layers, hidden 128, 8 heads / 4 KV heads, vocab 512), seeded weights";
  } else {
    ckpt = open_checkpoint(opts.model);
    *description = opts.model;
  }
  std::vector<DemoRow> rows;
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    auto model = Model::from_checkpoint(ckpt, dt);
    if (!tok) tok = tokenizer_for_model(*model, opts.tokenizer);
    EngineOptions eo;
    eo.kernels = opts.kernels;
    eo.device = opts.device;
    eo.simd = opts.simd;
    eo.threads = opts.threads;
    eo.kv_dtype = KvType::of(dt);
    GenerationConfig g;
    g.max_new_tokens = opts.max_new_tokens;
    g.stop_at_eos = false;
    for (const auto& prompt : opts.prompts) {
      const auto ids = tok->encode(prompt, tok->default_add_bos());
      const PathComparison c = compare_cache_paths(model, eo, ids, g);
      rows.push_back(DemoRow{std::string(dtype_name(dt)), prompt, c.first_divergence, int(c.on_ids.size()),
                             c.max_abs_logit_diff});
    }
  }
  return rows;
}

std::string demo_table(const std::vector<DemoRow>& rows) {
  std::string s = fmt::format("{:<6} {:<40} {:<28} {:>14}\n", "dtype", "prompt", "cache ON vs OFF", "max |Δlogit|");
  for (const auto& r : rows) {
    const std::string verdict = r.first_divergence < 0
                                    ? fmt::format("identical ({} tokens)", r.generated)
                                    : fmt::format("diverge at token {}", r.first_divergence);
    std::string p = r.prompt.size() > 38 ? r.prompt.substr(0, 35) + "..." : r.prompt;
    s += fmt::format("{:<6} {:<40} {:<28} {:>14.3e}\n", r.dtype, "\"" + p + "\"", verdict, r.max_abs_logit_diff);
  }
  return s;
}

}  // namespace kvp
