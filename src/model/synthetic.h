#pragma once
// Models the project generates itself: a preset's real shapes with seeded random weights, so
// speed and memory can be measured at real sizes and tests need no downloaded checkpoint.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/progress.h"
#include "io/checkpoint.h"

namespace kvp {

std::vector<std::string> synthetic_presets();
// Hyper-parameters of a preset for an architecture. "tiny" exists for every family (small test
// models that exercise each family's features); the others have a real model's shapes and belong
// to its family (synthetic_presets(): TinyLlama, Llama-2-7B, Mistral-7B-v0.3, Gemma-2-2B,
// Qwen2.5-0.5B, Qwen3-0.6B, Gemma-3-1B, OLMo-2 1B and 7B; the mixtures of experts Mixtral-8x7B,
// Qwen1.5-MoE-A2.7B, Qwen3-30B-A3B, OLMoE-1B-7B). An empty arch means the preset's own (llama for
// "tiny"); a mismatch is a usage error.
ModelConfig synthetic_config(const std::string& arch, const std::string& preset);

// Seeded weights in `dtype`, canonical HF names, Halves RoPE layout. The scale follows the
// reference models' recipe: linear weights ~ 1/sqrt(fan_in), q/k 2.5x larger so attention is not
// flat, RMSNorm gains 1 + 0.1 noise, final norm gain x`final_gain` so logits are peaked.
// Weights are drawn uniformly (matching the standard deviation) from the counter-based RNG,
// keyed by (seed, tensor index), so any tensor can be regenerated alone and in parallel.
// `progress` hears the layers generated so far.
constexpr float kSynthFinalGain = 8.0f;
Checkpoint synthesize_checkpoint(const ModelConfig& cfg, DType dtype, uint64_t seed = 1234,
                                 float final_gain = kSynthFinalGain, const Progress& progress = {});
// The tensors synthesize_checkpoint would make, names, shapes and dtype, each view pointing at the
// same single byte: for sizing a preset (footprints, parameter counts, memory) without generating
// it. Never to be run.
Checkpoint synthetic_shapes(const ModelConfig& cfg, DType dtype);

// synthesize_checkpoint's weights made one tensor at a time, for a writer that streams them (a
// 7B model is 13.5 GB of bf16; Mixtral-8x7B's 94): `shapes` is synthetic_shapes' checkpoint and
// make(view) fills that tensor alone, with the values synthesize_checkpoint gives it, into a
// buffer it adds to `keep`.
struct DeferredSynthetic {
  Checkpoint shapes;
  std::function<TensorView(const TensorView& shape, std::vector<std::shared_ptr<AlignedBuffer>>& keep)> make;
};
DeferredSynthetic synthesize_deferred(const ModelConfig& cfg, DType dtype, uint64_t seed = 1234,
                                      float final_gain = kSynthFinalGain);

}  // namespace kvp
