// Long work reports how far it got (core/progress.h): synthesising and exporting a model hear every
// layer, tensor and byte, in order, up to the total; the command line shows it on a terminal only.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "cli_run.h"
#include "model/checkpoint_export.h"
#include "model/synthetic.h"
#include "test_util.h"

namespace kvp {
namespace {

using test::kvparity;
using test::q;

// Every report of one stage: done never falls, never passes the total, and the last is the total.
void expect_counts_up(const std::vector<std::pair<size_t, size_t>>& seen, size_t total, const std::string& what) {
  ASSERT_FALSE(seen.empty()) << what;
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].second, total) << what;
    EXPECT_LE(seen[i].first, total) << what;
    if (i > 0) EXPECT_GE(seen[i].first, seen[i - 1].first) << what;
  }
  EXPECT_EQ(seen.back().first, total) << what;
}

TEST(Progress, SynthAndExportReportEveryLayerTensorAndByte) {
  const ModelConfig cfg = synthetic_config("gemma2", "tiny");
  std::vector<std::pair<size_t, size_t>> layers;
  const Checkpoint ck = synthesize_checkpoint(cfg, DType::BF16, 7, kSynthFinalGain,
                                              [&](size_t d, size_t t) { layers.emplace_back(d, t); });
  expect_counts_up(layers, size_t(cfg.n_layers), "layers");
  EXPECT_EQ(layers.size(), size_t(cfg.n_layers));
  test::TempDir tmp;
  for (const char* format : {"gguf", "hf"}) {
    std::vector<std::pair<size_t, size_t>> writing;
    ExportOptions eo;
    eo.progress = [&](const char* stage, size_t d, size_t t) {
      // Tensors are converted as the writer reaches them: one stage, in bytes.
      EXPECT_STREQ(stage, "writing");
      writing.emplace_back(d, t);
    };
    const std::string out = tmp.file(std::string("m.") + format);
    export_checkpoint(ck, format, out, eo);
    EXPECT_EQ(writing.size(), ck.tensors.size()) << "one report a tensor";
    // The tensor bytes as written: safetensors packs them as they are; GGUF keeps norms in F32 and
    // aligns each tensor (the span from the first to the end of the last, inside the file).
    const Checkpoint back = open_checkpoint(out);
    size_t bytes = 0;
    for (const auto& [name, t] : back.tensors) bytes += t.nbytes();
    ASSERT_FALSE(writing.empty());
    if (std::string(format) == "hf") {
      EXPECT_EQ(writing.back().second, bytes);
    } else {
      EXPECT_GE(writing.back().second, bytes);
      EXPECT_LT(writing.back().second, std::filesystem::file_size(out));
    }
    expect_counts_up(writing, writing.back().second, std::string(format) + " writing");
  }
}

TEST(Progress, TheCommandLineShowsItOnATerminalOnly) {
  test::TempDir tmp;
  const std::string args = "synth --preset tiny --arch qwen2 --format gguf --out ";
  // A log (stderr to a file) gets the result line and nothing else.
  const auto log = kvparity(args + q(tmp.file("a.gguf")));
  ASSERT_EQ(log.status, 0) << log.err;
  EXPECT_EQ(log.err.find("[synth]"), std::string::npos) << log.err;
  EXPECT_EQ(log.err.find('\r'), std::string::npos) << log.err;
  // A terminal (script(1) gives the command one) sees the stages, then a cleared line.
  if (std::system("command -v script >/dev/null 2>&1") != 0) GTEST_SKIP() << "script(1) not installed";
  const auto tty = test::run_command("script -qec " +
                                     q(std::string(KVPARITY_BIN) + " " + args + q(tmp.file("b.gguf"))) + " /dev/null");
  ASSERT_EQ(tty.status, 0) << tty.out << tty.err;
  // Weights are drawn as they are written: one line of bytes.
  for (const char* s : {"[synth] writing: ", " MB", "[synth] written, syncing to disk: ", "\rwrote tiny"})
    EXPECT_NE(tty.out.find(s), std::string::npos) << s << "\n" << tty.out;
  EXPECT_TRUE(std::filesystem::exists(tmp.file("b.gguf")));
}

}  // namespace
}  // namespace kvp
