// export_checkpoint makes each tensor's bytes as the writer reaches it (ExportOptions::source,
// TensorBytes): `synth`'s weights drawn one tensor at a time (synthesize_deferred) give the same
// files, byte for byte, as the whole model generated first, in every format, dtype and quant mix,
// MoE GGUFs' stacked experts included; and a tensor that cannot be written leaves no file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "io/checkpoint.h"
#include "model/checkpoint_export.h"
#include "model/synthetic.h"
#include "test_util.h"

namespace kvp {
namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(ExportStreaming, DeferredSynthWritesTheFilesOfTheWholeModel) {
  struct Case {
    const char* arch;
    const char* format;
    std::optional<DType> dtype;
    const char* quant;
  };
  const Case cases[] = {
      {"llama", "hf", std::nullopt, ""},        {"llama", "gguf", DType::F16, ""},
      {"gemma2", "gguf", std::nullopt, ""},     {"qwen2", "gguf", std::nullopt, "Q4_K_M"},
      {"mixtral", "gguf", std::nullopt, ""},    {"qwen2_moe", "gguf", std::nullopt, "Q8_0"},
      {"qwen3_moe", "hf", DType::F32, ""},      {"olmoe", "gguf", DType::F16, ""},
  };
  test::TempDir tmp;
  int n = 0;
  for (const Case& c : cases) {
    const ModelConfig cfg = synthetic_config(c.arch, "tiny");
    ExportOptions eo;
    eo.dtype = c.dtype;
    eo.quant = c.quant;
    const std::string whole = tmp.file("whole" + std::to_string(n)), deferred = tmp.file("deferred" + std::to_string(n));
    ++n;
    export_checkpoint(synthesize_checkpoint(cfg, DType::BF16, 99), c.format, whole, eo);
    const DeferredSynthetic d = synthesize_deferred(cfg, DType::BF16, 99);
    eo.source = d.make;
    export_checkpoint(d.shapes, c.format, deferred, eo);
    const std::string what = std::string(c.arch) + " " + c.format + " " + c.quant;
    const std::string file = std::string(c.format) == "hf" ? "/model.safetensors" : "";
    const std::string a = file_bytes(whole + file), b = file_bytes(deferred + file);
    ASSERT_FALSE(a.empty()) << what;
    EXPECT_TRUE(a == b) << what << ": the files differ";
    // And it loads: every tensor the model reads is there.
    EXPECT_NO_THROW(open_checkpoint(deferred)) << what;
  }
}

TEST(ExportStreaming, ATensorThatCannotBeWrittenLeavesNoFile) {
  const ModelConfig cfg = synthetic_config("llama", "tiny");
  Checkpoint ck = synthesize_checkpoint(cfg, DType::F32);
  // An infinity a quantised format cannot hold, in a tensor the writer reaches after others.
  TensorView& w = ck.tensors.at("model.layers.1.mlp.up_proj.weight");
  std::vector<float> bad(size_t(w.numel()), 0.5f);
  bad[7] = std::numeric_limits<float>::infinity();
  w.data = bad.data();
  test::TempDir tmp;
  ExportOptions eo;
  eo.quant = "Q8_0";
  const std::string out = tmp.file("m.gguf");
  const std::string e = test::error_of([&] { export_checkpoint(ck, "gguf", out, eo); });
  EXPECT_NE(e.find("tensor 'model.layers.1.mlp.up_proj.weight': element 7 is inf"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(out));
  for (const auto& f : std::filesystem::directory_iterator(tmp.path())) ADD_FAILURE() << "left behind: " << f.path();
}

}  // namespace
}  // namespace kvp
