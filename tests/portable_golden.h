#pragma once
// The `portable` policy's pinned end-to-end digests, shared by the CPU suite (tests/test_portable.cpp:
// every SIMD target, both cache paths, 1 and 2 threads) and the CUDA suite (the GPU must give the
// same bits).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/sha256.h"
#include "kernels/simd_target.h"
#include "model/model.h"
#include "runtime/generator.h"

namespace kvp::test {

// The SHA-256 of a greedy run's logits (every step) and ids: 9 prompt tokens, 20 new ones, the KV
// cache in the model's dtype.
inline std::string run_digest(const std::shared_ptr<const Model>& model, SimdTarget simd, CacheMode cache, int threads,
                              Device device = Device::Cpu) {
  EngineOptions eo;
  eo.device = device;
  eo.kernels = KernelPolicy::Portable;
  eo.threads = threads;
  eo.simd = simd;
  eo.kv_dtype = model->dtype;
  Engine e(model, eo);
  GenerationConfig g;
  g.max_new_tokens = 20;
  g.cache = cache;
  g.stop_at_eos = false;
  std::vector<int> prompt;
  const int bos = model->config.bos_id, vocab = model->config.vocab_size;
  for (int i = 0; i < 9; ++i) prompt.push_back(i == 0 && bos >= 0 ? bos : (i * 37 + 11) % vocab);
  Sha256 h;
  const auto r =
      e.generate(prompt, g, nullptr, [&](const StepInfo& s) { h.update(s.logits, size_t(s.vocab) * sizeof(float)); });
  h.update(r.output_ids.data(), r.output_ids.size() * sizeof(int));
  return h.hex();
}

// Digests of run_digest on the synthesised tiny model of each family. They are properties of the
// model, the input and the policy's specification, not of this machine: a machine (or a change)
// that computes one different bit fails here.
inline const std::map<std::string, std::string> kPortableGolden = {
    {"llama fp16", "3787fb8451bd5836409767f445b77d6f6511ffa067f5fb4c65931eddd0e68179"},
    {"llama bf16", "27d5ddea80d036fd45c6eae3adf43f05d686b72947387f7362e4646250cee0c9"},
    {"llama fp32", "4ca4c66c326526a557c80563e60c062b03091524e35d808ed3b61b2de0f467fc"},
    {"mistral fp16", "14bd3270f0dacfb8ebc8298cd2f2a190f85df7d1a7b1ce4981e2842fdad7f317"},
    {"mistral bf16", "dddd102f659e7165451d2c08dd4498a6ad56312ea2deffe858151273bf00fd75"},
    {"mistral fp32", "ca956bd9db0da3a37d1ccdd7f9a088d6cea551f627198886fa979b835c0bfdc0"},
    {"gemma2 fp16", "c834519ad1ffbac7f251df896846a03d3932b2b55834158144f68db893a0ebf2"},
    {"gemma2 bf16", "387e5d3aa465455d6deb9b515841b3bf187d39d52363ee9bdc8511b1891f9a15"},
    {"gemma2 fp32", "798e5cbc6eb21afd8798abf414ae448b19d10f3ce59aa591cb2e109a234eb608"},
    {"qwen2 fp16", "74f3023d2a81e5b8df8adf11d3555295b6c3626e2cb52b4802f62c06562e7058"},
    {"qwen2 bf16", "c059303393ef93e3956ade8810f9214ea30d456244ee51db6488d206a0008bfd"},
    {"qwen2 fp32", "8710c5923f80c83d5ec3bdd85795cbeb2020fa79128854e90743c7c0d6378dda"},
    {"qwen3 fp16", "f63968f1b708e231954c0be295820b9cf14cb6b16cca2c840a0e5e3238da1e43"},
    {"qwen3 bf16", "7287239bc66058b1f5ec49ed76d7637d03530cd461fd240191826c0791197721"},
    {"qwen3 fp32", "1aebf3ca8fe3f035983a038bdb3afbdf20901690dca3af4dd70c6cd7d3424bf8"},
    {"gemma3 fp16", "52eac9d7591220112f148456de099504186f70f10fa5d29665ce39de41de481d"},
    {"gemma3 bf16", "77555aa80bf39d22c6a66b461d22f39d36488a38452f9370ebd8c13bb2e0f834"},
    {"gemma3 fp32", "a8e715166e3c822817a6918a633068c7bc2b8aac783fea57b3b281066c3a3804"},
    {"olmo2 fp16", "7846a6ed8ab9ef85d7b3e90ff869f6e24ec4eaf8f99065b6284f884228f7981a"},
    {"olmo2 bf16", "0c58fe949ec1df6f0d7e6f7f0a6a4b288707c76252730923f5881ee2d5057bf1"},
    {"olmo2 fp32", "9c895d978e7a8c030658fcacc2ef73f6158791001862f48361bc2834cde0dc71"},
    {"olmoe fp16", "e982bc8cccd30e95e64f6d3558027c592587ced5438184a5fc4a7186fc216f4d"},
    {"olmoe bf16", "0ce2d7a3c267807e31ba052796b4ae96f44699493d96b76715436c94b4f53c86"},
    {"olmoe fp32", "ee558f37c6a50473e77f15f08d1c2d7251e841845e04177193422abb9a9b5517"},
    {"olmo3 fp16", "fed956016e2c49e6e816e5dd755d82ede0fa8319a180437c5731c0d2775fdf6b"},
    {"olmo3 bf16", "a7ca1d4722b763215e000720554b021ea44586d103ef9e0e8dd2f286009f6f72"},
    {"olmo3 fp32", "b3357c568c8365135eca411899cf73346217eca1843bc9d8c6a3c8d75f10b406"},
    {"exaone4 fp16", "78015fc0809ec86752e6c37de071df7591b56d8cd201ae2ab2e122e1275a0691"},
    {"exaone4 bf16", "60e9a9e3422ea5968fa9f2b81bfcd63abcdc0e157d1b605a43b9ce43e23692cc"},
    {"exaone4 fp32", "09da29d44bdb58a3e83a9cf296f70425205d5f9bdbff690c1366ae73570c27b6"},
    {"gpt_oss fp16", "384883356a28f3b52e851280289ec296649a85c25880ed8374809ba60d63385a"},
    {"gpt_oss bf16", "acbfdf4e1685f4d80aa11e820b85a1d386cf3aead471751a0bfba10be1e36d17"},
    {"gpt_oss fp32", "6a12fd7d0782c4cf7e3866af029f90beac6742994b6b2b5d260cdd28831da46d"},
    {"mixtral fp16", "f02bc0d2a2acb2c09e09e2148dc30927536ad1a2b80cfbc1947a898b00519b42"},
    {"mixtral bf16", "031fa0ef42f053ca93a022ad619318897324c99c9dded0d3171298bc049f14e6"},
    {"mixtral fp32", "9202856c5665a6596d45c25263eccbc7b634a9fb967e69cdec19e727c3552ba6"},
    {"qwen2_moe fp16", "6bb90596fcbe2aff864f52c1318ee879e7d246ebbc21cd11b0a167d89cbca2e0"},
    {"qwen2_moe bf16", "6098dda60eeb9c05a896625ba93009eb3293cb93d7a37d8f106d18c3f16a50a3"},
    {"qwen2_moe fp32", "7c7aa379a8865435f17664c81b1ffc8c48056debdfb0cead32906f573a26c54a"},
    {"qwen3_moe fp16", "40cbb80d0f4a27c7dd2abf371d4cce00fab564dd621eefed645e0578e53fa1fd"},
    {"qwen3_moe bf16", "062bfe20e51d77721f04fe5bee3d12063efb5a3c3e4408b8ec3e7402ea2c18f0"},
    {"qwen3_moe fp32", "931853f86c5bc40230cacbc56382997b0c1f66db013e7d4262e3793d01428225"},
};

}  // namespace kvp::test
