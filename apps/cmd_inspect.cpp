// `kvparity inspect`: what kvparity reads in a checkpoint, before anything runs (lab/model_inspection.h).
#include <iostream>

#include "cli_common.h"
#include "lab/model_inspection.h"

namespace kvp::cli {

void register_inspect(CLI::App& app) {
  struct Opts {
    InspectOptions in;
    std::string kv_dtype;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "inspect", "what kvparity reads in a model: family, shape, numerics features, tensor types, tokenizer, memory");
  auto* model = cmd->add_option("--model", o->in.model, "llama2.c .bin, .gguf, .safetensors or HF directory");
  auto* synth = one_of(cmd->add_option("--synth", o->in.synth,
                                       "instead of --model: a synth preset's shapes, described without generating it"),
                       kSynthPresets);
  model->excludes(synth);
  one_of(cmd->add_option("--arch", o->in.synth_arch, "with --synth: the family (default: the preset's; llama for tiny)"), kSynthArchNames)
      ->needs(synth);
  cmd->add_option("--tokenizer", o->in.tokenizer,
                  "tokenizer.json, SentencePiece tokenizer.model or llama2.c tokenizer.bin (default: the one the model "
                  "carries or sits beside)");
  one_of(cmd->add_option("--kv-dtype", o->kv_dtype, "KV-cache type of the memory table (default: each compute dtype)"),
         kKvTypeNames);
  int_at_least(cmd->add_option("--cache-capacity", o->in.cache_capacity,
                               "static KV cache positions of the memory table (0: the model's context)"),
               0);
  int_at_least(cmd->add_option("--batch-size", o->in.batch_size, "sequences of the memory table, each with its cache"),
               1);
  cmd->add_flag("--json", o->json, "print the description as JSON");
  cmd->callback([o] {
    if (!o->kv_dtype.empty()) o->in.kv = parse_kv_type(o->kv_dtype);
    const nlohmann::json d = inspect_model(o->in);
    if (o->json)
      print_json(d.dump(2));
    else
      std::cout << inspect_text(d);
  });
}

}  // namespace kvp::cli
