// Faults a user can cause from the command line, each a clear one-line error and a non-zero exit:
// special tokens that are not in the vocabulary (tokenizer.json post_processor, config.json,
// GGUF metadata), sampler parameters out of range, and prompts that do not fit the context.
// Uses only a model the project synthesises, so it needs no shared data.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "test_util.h"

namespace kvp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using CliResult = test::CliRun;

using test::kvparity;
using test::q;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void spit(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

void expect_bad_input(const CliResult& r, std::initializer_list<const char*> parts) {
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one-line error expected: " << r.err;
  for (const char* p : parts) EXPECT_NE(r.err.find(p), std::string::npos) << "missing '" << p << "' in: " << r.err;
}

// One synthesised tiny model (HF directory and GGUF) shared by the tests in this file.
class HostileCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    ASSERT_EQ(kvparity("synth --preset tiny --format hf --dtype bf16 --out " + q(hf())).status, 0);
    ASSERT_EQ(kvparity("synth --preset tiny --format gguf --dtype bf16 --out " + q(gguf())).status, 0);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string file(const std::string& n) { return dir_->file(n); }
  static std::string hf() { return file("hf"); }
  static std::string gguf() { return file("m.gguf"); }
  // A copy of the HF directory with config.json / tokenizer.json edited.
  static std::string hf_copy(const std::string& name) {
    const std::string d = file(name);
    fs::create_directories(d);
    for (const char* f : {"config.json", "tokenizer.json", "model.safetensors"})
      fs::copy_file(hf() + "/" + f, d + "/" + f, fs::copy_options::overwrite_existing);
    return d;
  }
  static test::TempDir* dir_;
};
test::TempDir* HostileCli::dir_ = nullptr;

TEST_F(HostileCli, TokenizerJsonNamingAnUnknownSpecialTokenIsRefused) {
  json j = json::parse(slurp(hf() + "/tokenizer.json"));
  ASSERT_TRUE(j.contains("post_processor"));
  json pp = j;
  pp["post_processor"]["single"][0]["SpecialToken"]["id"] = "<no_such_bos>";
  pp["post_processor"]["special_tokens"].erase("<s>");
  spit(file("pp.json"), pp.dump());
  expect_bad_input(kvparity("tokenize --tokenizer " + q(file("pp.json")) + " --text hi --bos"),
                   {"pp.json", "<no_such_bos>", "not in the vocabulary"});
  json unk = j;
  unk["model"]["unk_token"] = "<no_such_unk>";
  spit(file("unk.json"), unk.dump());
  expect_bad_input(kvparity("tokenize --tokenizer " + q(file("unk.json")) + " --text hi"),
                   {"unk.json", "<no_such_unk>"});
}

TEST_F(HostileCli, ConfigJsonSpecialIdsOutsideTheVocabularyAreRefused) {
  for (const char* key : {"bos_token_id", "eos_token_id"}) {
    const std::string d = hf_copy(std::string("cfg_") + key);
    json c = json::parse(slurp(d + "/config.json"));
    c[key] = 99999;
    spit(d + "/config.json", c.dump());
    expect_bad_input(kvparity("generate --model " + q(d) + " --prompt hi --max-new-tokens 2"), {"config.json", "99999"});
  }
}

TEST_F(HostileCli, GgufSpecialIdsOutsideTheVocabularyAreRefused) {
  const std::string bytes = slurp(gguf());
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"}) {
    SCOPED_TRACE(key);
    size_t at = bytes.find(key);
    ASSERT_NE(at, std::string::npos);
    at += std::strlen(key);
    uint32_t type = 0;
    std::memcpy(&type, bytes.data() + at, 4);
    ASSERT_EQ(type, 4u);  // u32
    std::string bad = bytes;
    const uint32_t id = 70000;
    std::memcpy(bad.data() + at + 4, &id, 4);
    const std::string path = file(std::string(key) + ".gguf");
    spit(path, bad);
    expect_bad_input(kvparity("generate --model " + q(path) + " --prompt hi --max-new-tokens 2"),
                     {".gguf", "70000", "outside"});
  }
}

TEST_F(HostileCli, SamplerParametersOutOfRangeAreUsageErrors) {
  const std::string m = "generate --model " + q(hf()) + " --prompt hi --max-new-tokens 2 ";
  struct Case {
    const char* args;
    const char* names;
  };
  for (const Case& c : {Case{"--sampler top-p --top-p 0", "--top-p"}, Case{"--sampler top-p --top-p -0.5", "--top-p"},
                        Case{"--sampler top-p --top-p 1.0001", "--top-p"}, Case{"--sampler top-p --top-p nan", "--top-p"},
                        Case{"--sampler top-k --top-k 0", "--top-k"}, Case{"--sampler top-k --top-k -3", "--top-k"},
                        Case{"--sampler temperature --temperature 0", "--temperature"},
                        Case{"--sampler temperature --temperature -1", "--temperature"},
                        Case{"--sampler temperature --temperature inf", "--temperature"},
                        Case{"--sampler top-p --top-p 0.9 --temperature -0.5", "--temperature"},
                        Case{"--sampler min-p --min-p 2", "--min-p"}, Case{"--sampler min-p --min-p -0.1", "--min-p"},
                        Case{"--sampler nucleus", "nucleus"}}) {
    SCOPED_TRACE(c.args);
    const CliResult r = kvparity(m + c.args);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << r.err;
  }
  // The edges that are valid.
  EXPECT_EQ(kvparity(m + "--sampler top-p --top-p 1").status, 0);
  EXPECT_EQ(kvparity(m + "--sampler top-k --top-k 1").status, 0);
}

TEST_F(HostileCli, PromptsThatDoNotFitTheContextAreRefused) {
  // The cache holds 4 positions; the prompt needs more.
  expect_bad_input(kvparity("generate --model " + q(hf()) + " --cache-capacity 4 --prompt 'the cat sat on the mat'"),
                   {"does not fit the context"});
  // The model's own context (512 positions for the tiny preset).
  std::string prompt;
  for (int i = 0; i < 600; ++i) prompt += "a ";
  expect_bad_input(kvparity("generate --model " + q(gguf()) + " --prompt '" + prompt + "' --max-new-tokens 1"),
                   {"does not fit the context"});
  // Generation that reaches the end of the context stops there with a note (not an error).
  const CliResult r = kvparity("generate --model " + q(hf()) + " --cache-capacity 8 --prompt hi --max-new-tokens 50");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("end of the context"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kvp
