// How a model holds its matrices (model/weights.cpp): an fp32 run of an fp16 or bf16 checkpoint
// keeps the file's bytes, which the kernels widen exactly, instead of a converted fp32 copy twice
// the size. The values, and so the logits, must be those of the converted copy.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "kernels/kernels.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

std::vector<float> last_logits(const std::shared_ptr<const Model>& m, KernelPolicy policy, bool cached) {
  EngineOptions eo;
  eo.kernels = policy;
  eo.kv_dtype = DType::F32;
  eo.threads = 1;
  Engine engine(m, eo);
  // 24 tokens: the cache-OFF pass runs the blocked GEMMs (M >= 16), the cached step the GEMVs.
  std::vector<int> tokens{1};
  for (int i = 1; i < 24; ++i) tokens.push_back((i * 37 + 11) % 250 + 3);
  const int n = int(tokens.size());
  const float* logits;
  if (cached) {
    engine.forward(tokens.data(), n - 1, 0, ForwardOptions{});
    logits = engine.forward(tokens.data() + n - 1, 1, n - 1, ForwardOptions{});
  } else {
    logits = engine.forward_uncached(tokens.data(), n, ForwardOptions{});
  }
  const int V = m->config.vocab_size;
  return std::vector<float>(logits, logits + V);
}

TEST(WeightStorage, Fp32RunKeepsNarrowFileBytesAndComputesWithTheirExactValues) {
  for (const char* arch : {"llama", "gemma2", "qwen2", "qwen3", "gemma3", "olmo2"}) {
    for (DType file : {DType::F16, DType::BF16}) {
      SCOPED_TRACE(std::string(arch) + " " + std::string(dtype_name(file)));
      const Checkpoint narrow_ck = synthesize_checkpoint(synthetic_config(arch, "tiny"), file);
      const Checkpoint wide_ck = test::widened_to_f32(narrow_ck);
      auto narrow = Model::from_checkpoint(narrow_ck, DType::F32);
      auto wide = Model::from_checkpoint(wide_ck, DType::F32);

      // The file's bytes, not a copy: half the bytes a decode step reads.
      const TensorView& wq = narrow->weights.layers[0].wq;
      EXPECT_EQ(wq.dtype, file);
      EXPECT_EQ(wq.data, narrow_ck.tensors.at("model.layers.0.self_attn.q_proj.weight").data);
      EXPECT_EQ(narrow->weights.matrix_bytes() * 2, wide->weights.matrix_bytes());
      // An fp16 run still converts a bf16 file (the values change), and keeps an fp16 one.
      auto half = Model::from_checkpoint(narrow_ck, DType::F16);
      EXPECT_EQ(half->weights.layers[0].wq.dtype, DType::F16);
      EXPECT_EQ(half->weights.layers[0].wq.data == wq.data, file == DType::F16);

      // The same values: every policy gives the logits of the converted copy, bit for bit (the
      // kernels widen fp16/bf16 exactly and then run the fp32 chain).
      for (KernelPolicy p : {KernelPolicy::Reference, KernelPolicy::Standard, KernelPolicy::Invariant,
                             KernelPolicy::Portable}) {
        for (bool cached : {true, false}) {
          SCOPED_TRACE(policy_name(p) + (cached ? " cache on" : " cache off"));
          const std::vector<float> a = last_logits(narrow, p, cached);
          const std::vector<float> b = last_logits(wide, p, cached);
          ASSERT_EQ(a.size(), b.size());
          EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvp
