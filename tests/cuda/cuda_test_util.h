#pragma once
// What the CUDA suite's files share: skipping without a GPU, and greedy runs' logits to compare.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "core/device.h"
#include "cuda/cuda_runtime_api.h"
#include "invariance_battery.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/generator.h"

// Skips the test, naming why, where no CUDA device can be used.
#define KVP_REQUIRE_GPU()                                   \
  do {                                                      \
    try {                                                   \
      require_device(Device::Cuda);                         \
    } catch (const std::exception& e) {                     \
      GTEST_SKIP() << "no usable CUDA device: " << e.what(); \
    }                                                       \
  } while (0)

namespace kvp::test {

// n greedy tokens from `prompt` on an engine the caller keeps (several alive at once, say).
inline Trace trace_on(Engine& e, const std::vector<int>& prompt, CacheMode mode, int n) {
  GenerationConfig g;
  g.max_new_tokens = n;
  g.cache = mode;
  g.stop_at_eos = false;
  Trace r;
  r.ids = e.generate(prompt, g, nullptr, [&](const StepInfo& s) { r.logits.emplace_back(s.logits, s.logits + s.vocab); })
              .output_ids;
  return r;
}

inline Trace trace(std::shared_ptr<const Model> model, const EngineOptions& eo, const std::vector<int>& prompt,
                   CacheMode mode, int n, bool poison = false) {
  Engine e(std::move(model), eo);
  if (poison) e.cache().poison();
  return trace_on(e, prompt, mode, n);
}

// A batch of 4 mixed-length prompts, and every step's logits of each sequence when they are
// decoded together (generate_batch, greedy, no EOS stop).
inline const std::vector<std::vector<int>>& mixed_prompts() {
  static const std::vector<std::vector<int>> p{{1, 5, 9}, {1, 7, 8, 9, 10, 11, 12}, {1}, {1, 40, 41, 42, 43}};
  return p;
}
inline std::vector<std::vector<std::vector<float>>> batch_logits(std::shared_ptr<const Model> model,
                                                                 const EngineOptions& eo,
                                                                 const std::vector<std::vector<int>>& prompts, int n) {
  Engine e(std::move(model), eo);
  GenerationConfig gc;
  gc.max_new_tokens = n;
  gc.stop_at_eos = false;
  std::vector<std::vector<std::vector<float>>> logits(prompts.size());
  e.generate_batch(prompts, gc, nullptr,
                   [&](int b, const StepInfo& s) { logits[size_t(b)].emplace_back(s.logits, s.logits + s.vocab); });
  return logits;
}

// ||a - b|| / ||b||, infinite where a holds a NaN/Inf.
inline double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

inline bool same_bits(const Trace& a, const Trace& b) {
  if (a.logits.size() != b.logits.size()) return false;
  for (size_t s = 0; s < a.logits.size(); ++s)
    if (std::memcmp(a.logits[s].data(), b.logits[s].data(), a.logits[s].size() * sizeof(float)) != 0) return false;
  return true;
}

// `standard`'s GEMM outputs in 16 bits (cuda::set_gemm_out16) within its scope.
struct GemmOut16 {
  explicit GemmOut16(bool on) { cuda::set_gemm_out16(on); }
  ~GemmOut16() { cuda::set_gemm_out16(false); }
  GemmOut16(const GemmOut16&) = delete;
  GemmOut16& operator=(const GemmOut16&) = delete;
};

// A run on the GPU under `policy`, its KV cache of type kv.
inline EngineOptions on_gpu(KvType kv = KvType::of(DType::F32), KernelPolicy policy = KernelPolicy::Standard) {
  EngineOptions eo;
  eo.device = Device::Cuda;
  eo.kernels = policy;
  eo.kv_dtype = kv;
  return eo;
}

// A family's tiny synthesised model (fp32 weights) with compute dtype dt.
inline std::shared_ptr<Model> tiny(const char* family, DType dt) {
  return Model::from_checkpoint(synthesize_checkpoint(synthetic_config(family, "tiny"), DType::F32), dt);
}

// A synthesised Llama wide enough that cuBLAS picks different kernels for one row and for a whole
// sequence (dim 1024, head_dim 128, 4 layers), and a 200-token prompt long enough that the
// standard decode step splits its keys: where the standard GPU path shows the phenomenon.
inline Checkpoint wide_llama(ModelConfig* config = nullptr) {
  ModelConfig c = synthetic_config("llama", "tiny");
  c.dim = 1024;
  c.n_heads = 8;
  c.n_kv_heads = 8;
  c.head_dim = 128;
  c.hidden_dim = 2816;
  c.n_layers = 4;
  if (config != nullptr) *config = c;
  return synthesize_checkpoint(c, DType::F32);
}
inline std::vector<int> wide_prompt(const ModelConfig& c) {
  std::vector<int> prompt;
  for (int i = 0; i < 200; ++i) prompt.push_back(1 + (i * 37) % (c.vocab_size - 1));
  return prompt;
}

}  // namespace kvp::test
