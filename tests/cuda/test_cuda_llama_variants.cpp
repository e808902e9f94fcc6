// Llama's decoder with a twist, on the GPU (CUDA suite): SmolLM3's NoPE layers (the identity
// rotation), Granite's multipliers (fp32 scales at their own rounding points) and Ministral 3's
// query temperature (YaRN, and queries past C = 8 scaled, on Mistral's decoder) and Phi-4-mini's
// rotary embedding (3/4 of each head rotating, longrope switching at position 8) run through the
// same forward pass, so under `portable` every step's logits and tokens are the CPU's bit for bit,
// on both cache paths, in fp16 and fp32.
#include <gtest/gtest.h>

#include <cstring>

#include "cuda/cuda_test_util.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/generator.h"

namespace kvp {
namespace {

using test::on_gpu;

ModelConfig variant(const char* which) {
  ModelConfig c = synthetic_config(std::string(which) == "ministral3" ? "mistral" : "llama", "tiny");
  if (std::string(which) == "ministral3") {
    c.sliding_window = 0;
    c.rope_scaling = ModelConfig::RopeScaling::Yarn;
    c.rope_factor = 4.0f;
    c.rope_original_max_pos = 8;
    c.query_temperature_beta = 0.1f;
    c.query_temperature_context = 8;
  } else if (std::string(which) == "phi4mini") {
    c.rotary_dim = c.head_dim * 3 / 4 / 2 * 2;
    c.rope_scaling = ModelConfig::RopeScaling::LongRope;
    c.rope_original_max_pos = 8;
    c.rope_factor = float(c.max_seq_len) / 8.0f;
    c.rope_attention_factor = 1.19;
    for (int i = 0; i < c.rotary_dim / 2; ++i) {
      c.rope_short_factors.push_back(1.0f + 0.02f * float(i));
      c.rope_long_factors.push_back(1.0f + 0.75f * float(i));
    }
  } else if (std::string(which) == "smollm3") {
    for (int l = 1; l < c.n_layers; l += 2) c.nope_layers.push_back(l);
  } else {  // granite-3.x-2b's multipliers
    c.embedding_multiplier = 12.0f;
    c.attention_multiplier = 0.015625f;
    c.residual_multiplier = 0.22f;
    c.logits_scaling = 8.0f;
  }
  return c;
}

TEST(CudaLlamaVariants, PortableStepsAreTheCpuBits) {
  KVP_REQUIRE_GPU();
  for (const char* which : {"smollm3", "granite", "ministral3", "phi4mini"})
    for (DType dt : {DType::F16, DType::F32}) {
      auto model = Model::from_checkpoint(synthesize_checkpoint(variant(which), dt), dt);
      for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
        std::vector<std::vector<float>> logits[2];
        std::vector<int> ids[2];
        for (int side = 0; side < 2; ++side) {
          EngineOptions eo = side == 0 ? EngineOptions{} : on_gpu(KvType::of(dt), KernelPolicy::Portable);
          eo.kernels = KernelPolicy::Portable;
          Engine e(model, eo);
          GenerationConfig g;
          g.max_new_tokens = 20;
          g.cache = mode;
          g.stop_at_eos = false;
          ids[side] = e.generate({1, 7, 42, 3, 99}, g, nullptr, [&](const StepInfo& st) {
                         logits[side].emplace_back(st.logits, st.logits + st.vocab);
                       }).output_ids;
        }
        const std::string what = std::string(which) + " " + std::string(dtype_name(dt)) +
                                 (mode == CacheMode::On ? " cache ON" : " cache OFF");
        EXPECT_EQ(ids[0], ids[1]) << what;
        ASSERT_EQ(logits[0].size(), logits[1].size()) << what;
        for (size_t i = 0; i < logits[0].size(); ++i)
          EXPECT_EQ(std::memcmp(logits[0][i].data(), logits[1][i].data(), logits[0][i].size() * sizeof(float)), 0)
              << what << " step " << i;
      }
    }
}

}  // namespace
}  // namespace kvp
