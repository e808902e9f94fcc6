// NaN/Inf detection: an fp16 overflow stops the run with the tensor, layer and position named
// (or is recorded under NonFinitePolicy::Warn), while bf16's wider range runs the same model fine.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "model/checkpoint_export.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/generator.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include <sys/wait.h>

namespace kvp {
namespace {

// The synthetic tiny model with layer 1's up_proj scaled so its activations exceed fp16's 65504.
Checkpoint overflowing_checkpoint() {
  Checkpoint ck = synthesize_checkpoint(synthetic_config("llama", "tiny"), DType::F32);
  TensorView& up = ck.tensors.at("model.layers.1.mlp.up_proj.weight");
  float* w = static_cast<float*>(const_cast<void*>(up.data));
  for (int64_t i = 0; i < up.numel(); ++i) w[i] *= 4.0e5f;
  return ck;
}

TEST(Numerics, Fp16OverflowIsReportedWithTensorLayerAndPosition) {
  const Checkpoint ck = overflowing_checkpoint();
  auto model = Model::from_checkpoint(ck, DType::F16);
  EngineOptions eo;
  eo.kv_dtype = DType::F16;
  Engine engine(model, eo);
  const std::vector<int> tokens{1, 40, 41, 42};
  try {
    engine.forward(tokens.data(), 4, 0, ForwardOptions{});
    FAIL() << "fp16 overflow went unnoticed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Numeric);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("up_proj"), std::string::npos) << msg;
    EXPECT_NE(msg.find("layer 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("position"), std::string::npos) << msg;
  }
}

TEST(Numerics, WarnPolicyRecordsTheFirstEventAndContinues) {
  const Checkpoint ck = overflowing_checkpoint();
  auto model = Model::from_checkpoint(ck, DType::F16);
  Engine engine(model, EngineOptions{});
  const std::vector<int> tokens{1, 40, 41, 42};
  ForwardOptions fo;
  fo.on_nonfinite = NonFinitePolicy::Warn;
  EXPECT_NO_THROW(engine.forward(tokens.data(), 4, 0, fo));
  ASSERT_FALSE(engine.activations().nonfinite.empty());
  EXPECT_EQ(engine.activations().nonfinite[0].tensor, "up_proj");
  EXPECT_EQ(engine.activations().nonfinite[0].layer, 1);
}

TEST(Numerics, Bf16HasTheRangeToRunTheSameModel) {
  const Checkpoint ck = overflowing_checkpoint();
  for (DType dt : {DType::BF16, DType::F32}) {
    auto model = Model::from_checkpoint(ck, dt);
    Engine engine(model, EngineOptions{});
    const std::vector<int> tokens{1, 40, 41, 42};
    const float* logits = nullptr;
    ASSERT_NO_THROW(logits = engine.forward(tokens.data(), 4, 0, ForwardOptions{})) << dtype_name(dt);
    for (int v = 0; v < 4 * model->config.vocab_size; ++v) ASSERT_TRUE(std::isfinite(logits[v]));
  }
}

TEST(Numerics, GenerateCommandExitsOneNamingTheLayer) {
  test::TempDir tmp;
  export_checkpoint(overflowing_checkpoint(), "hf", tmp.file("m"));
  const std::string tok = tmp.file("m/tokenizer.json");
  {
    std::FILE* f = std::fopen(tok.c_str(), "w");
    const std::string json = make_synthetic_tokenizer_json(512);
    std::fwrite(json.data(), 1, json.size(), f);
    std::fclose(f);
  }
  const std::string base = std::string(KVPARITY_BIN) + " generate --model " + tmp.file("m") +
                           " --prompt 'Once upon a time' --max-new-tokens 4 --dtype ";
  EXPECT_EQ(WEXITSTATUS(std::system((base + "fp16 2>" + tmp.file("err")).c_str())), 1);
  std::FILE* f = std::fopen(tmp.file("err").c_str(), "r");
  char buf[1024] = {0};
  std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  EXPECT_NE(std::string(buf).find("layer 1"), std::string::npos) << buf;
  EXPECT_EQ(WEXITSTATUS(std::system((base + "bf16 >/dev/null 2>&1").c_str())), 0);
}

}  // namespace
}  // namespace kvp
