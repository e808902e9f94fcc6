// Engines of one model share its device weights (cuda::shared_device_weights): a study's cache-ON,
// cache-OFF and teacher-forced sides hold one copy, uploaded once, and sharing changes no bit,
// whatever ran first on the copies. tests/test_shared_by_owner.cpp checks the registry on the CPU.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "cuda/cuda_runtime_api.h"
#include "cuda/cuda_test_util.h"
#include "model/model.h"
#include "runtime/generator.h"

namespace kvp {
namespace {

using test::on_gpu;
using test::same_bits;
using test::Trace;
using test::trace_on;
using test::wide_llama;
using test::wide_prompt;

size_t matrix_bytes(const Model& m) {
  size_t b = m.weights.embed.nbytes();
  if (m.weights.lm_head.data != m.weights.embed.data) b += m.weights.lm_head.nbytes();
  for (const LayerWeights& L : m.weights.layers)
    for (const TensorView* t : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) b += t->nbytes();
  return b;
}

// Device memory a second engine adds to a first one alive beside it, over the first pass of each.
size_t second_engine_adds(const std::shared_ptr<const Model>& first, const std::shared_ptr<const Model>& second,
                          const std::vector<int>& prompt) {
  const EngineOptions eo = on_gpu(KvType::of(DType::F16), KernelPolicy::Standard);
  Engine a(first, eo);
  trace_on(a, prompt, CacheMode::On, 2);
  cuda::reset_peak_allocated();  // the peak is what is allocated now
  const size_t before = cuda::peak_allocated();
  Engine b(second, eo);
  trace_on(b, prompt, CacheMode::Off, 2);
  return cuda::peak_allocated() - before;
}

TEST(CudaSharedWeights, EnginesOfOneModelUploadItsWeightsOnce) {
  KVP_REQUIRE_GPU();
  ModelConfig c;
  const Checkpoint ckpt = wide_llama(&c);
  const std::shared_ptr<const Model> m = Model::from_checkpoint(ckpt, DType::F16);
  const std::shared_ptr<const Model> twin = Model::from_checkpoint(ckpt, DType::F16);
  const std::vector<int> prompt = wide_prompt(c);
  const size_t weights = matrix_bytes(*m);
  const size_t same = second_engine_adds(m, m, prompt);
  const size_t other = second_engine_adds(m, twin, prompt);
  EXPECT_GE(other, same + weights * 9 / 10)
      << "a second engine of the same model added " << same << " bytes, one of another model " << other
      << ", the matrices are " << weights;
}

// A portable engine copies each matrix alone (it never groups); a standard or invariant engine of the
// same model beside it must still run its q/k/v and gate/up groups as one launch each, as it does
// alone: under `standard` cuBLAS may round one wide GEMM otherwise than its members.
TEST(CudaSharedWeights, SharingChangesNoBitWhateverRanFirst) {
  KVP_REQUIRE_GPU();
  ModelConfig c;
  const Checkpoint ckpt = wide_llama(&c);
  std::vector<int> prompt = wide_prompt(c);
  prompt.resize(40);
  for (KernelPolicy policy : {KernelPolicy::Standard, KernelPolicy::Invariant})
    for (CacheMode mode : {CacheMode::On, CacheMode::Off}) {
      const std::string what = policy_name(policy) + (mode == CacheMode::On ? " cache ON" : " cache OFF");
      const EngineOptions eo = on_gpu(KvType::of(DType::F16), policy);
      Trace alone;
      {
        Engine e(Model::from_checkpoint(ckpt, DType::F16), eo);
        alone = trace_on(e, prompt, mode, 12);
      }
      const std::shared_ptr<const Model> m = Model::from_checkpoint(ckpt, DType::F16);
      Engine first(m, on_gpu(KvType::of(DType::F16), KernelPolicy::Portable));
      trace_on(first, prompt, CacheMode::On, 3);
      Engine shared(m, eo);
      const Trace beside = trace_on(shared, prompt, mode, 12);
      EXPECT_EQ(beside.ids, alone.ids) << what;
      EXPECT_TRUE(same_bits(beside, alone)) << what << ": beside a portable engine of the same model";
      // And the portable engine, run again on copies the other one grouped, is itself.
      Engine again(Model::from_checkpoint(ckpt, DType::F16), on_gpu(KvType::of(DType::F16), KernelPolicy::Portable));
      EXPECT_TRUE(same_bits(trace_on(first, prompt, CacheMode::On, 3), trace_on(again, prompt, CacheMode::On, 3)))
          << what;
    }
}

}  // namespace
}  // namespace kvp
