#pragma once
// `kvparity inspect`: what kvparity reads in a checkpoint, before anything runs. The family and
// shape it found, the features that change the numerics (RoPE form and scaling, windows,
// soft-capping, biases, the q/k row layout), the parameters, the file's tensor types, the tokenizer
// a run would take, and for each compute dtype what the weights hold in memory, what a decoded
// token reads and what the static KV cache takes. The weights go through the loader's own checks
// (model/weights.h: weights_footprint), so a checkpoint inspect accepts is one a run loads, and one
// it refuses gets the run's error; nothing is converted, so a 7B model takes a moment.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/kv_type.h"

namespace kvp {

struct InspectOptions {
  std::string model;
  // Instead of a file: a synth preset's shapes (synthetic_config(synth_arch, synth)), described as
  // the bf16 checkpoint `synth --dtype bf16` would write, nothing generated: a study sized before a
  // 94 GB model is made.
  std::string synth, synth_arch;
  std::string tokenizer;     // empty: the one a run would find (model/tokenizer_for_model.h)
  int cache_capacity = 0;    // KV cache positions a sequence (0: the model's context length)
  int batch_size = 1;        // sequences, each with its own cache
  std::optional<KvType> kv;  // unset: each compute dtype's own
};

// The description as JSON (the keys are listed in docs/results-schema.md, "inspect").
nlohmann::json inspect_model(const InspectOptions& opts);
// The same, as the aligned text `inspect` prints.
std::string inspect_text(const nlohmann::json& description);

}  // namespace kvp
