#pragma once
// A loaded model: hyper-parameters, weights in the compute dtype, and the RoPE table.
#include <memory>
#include <optional>
#include <string>

#include "io/checkpoint.h"
#include "kernels/elementwise.h"
#include "model/config.h"
#include "model/weights.h"

namespace kvp {

struct Model {
  std::string path;
  std::string format;  // checkpoint format it came from
  ModelConfig config;
  DType dtype = DType::F32;
  ModelWeights weights;
  RopeTable rope;
  RopeTable rope_local;  // Gemma-3's and OLMo-3's windowed layers' (rope_local_theta, unscaled); empty otherwise
  RopeTable rope_none;   // SmolLM3's NoPE layers': the identity rotation; empty otherwise
  std::optional<VocabSpec> vocab;  // embedded (GGUF) vocabulary, if any
  std::string tokenizer_path;      // tokenizer.json found beside the checkpoint, if any
  std::string chat_template;       // the GGUF's chat template, if any (Checkpoint::chat_template)

  static std::shared_ptr<Model> from_checkpoint(const Checkpoint& ckpt, DType dtype);
  static std::shared_ptr<Model> load(const std::string& path, DType dtype);
};

}  // namespace kvp
