// Inputs that hostile files are made of, run through the same code as the libFuzzer targets
// (fuzz/fuzz_targets.h): every file kept under fuzz/regressions/<target>/ (crashers found by
// fuzzing, after the fix) and hand-made extremes that must be refused before any allocation.
// Under the sanitizer CI stage (build-asan) these also check for out-of-bounds reads.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>

#include "../fuzz/fuzz_targets.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "test_io_util.h"
#include "tokenizer/tokenizer.h"

namespace kvp {
namespace {

namespace fs = std::filesystem;
using test::expect_error;

const std::map<std::string, std::function<int(const uint8_t*, size_t)>>& targets() {
  static const std::map<std::string, std::function<int(const uint8_t*, size_t)>> m = {
      {"fuzz_gguf", fuzz::run_gguf},
      {"fuzz_safetensors", fuzz::run_safetensors},
      {"fuzz_safetensors_index", fuzz::run_safetensors_index},
      {"fuzz_hf_config", fuzz::run_hf_config},
      {"fuzz_llama2c", fuzz::run_llama2c},
      {"fuzz_tokenizer_bin", fuzz::run_tokenizer_bin},
      {"fuzz_tokenizer_model", fuzz::run_tokenizer_model},
      {"fuzz_tokenizer_json", fuzz::run_tokenizer_json},
      {"fuzz_tokenize", fuzz::run_tokenize},
      {"fuzz_chat_template", fuzz::run_chat_template},
  };
  return m;
}

// Runs every file under fuzz/<kind>/<target>/ through its target; returns how many there were.
int run_kept_inputs(const std::string& kind) {
  const fs::path root = fs::path(KVPARITY_SOURCE_DIR) / "fuzz" / kind;
  EXPECT_TRUE(fs::is_directory(root)) << root;
  if (!fs::is_directory(root)) return 0;
  int n = 0;
  for (const auto& dir : fs::directory_iterator(root)) {
    if (!dir.is_directory()) continue;
    const std::string target = dir.path().filename().string();
    auto it = targets().find(target);
    EXPECT_NE(it, targets().end()) << "fuzz/" << kind << "/" << target << " names no fuzz target";
    if (it == targets().end()) continue;
    for (const auto& f : fs::directory_iterator(dir.path())) {
      if (!f.is_regular_file() || f.path().filename().string().rfind("README", 0) == 0) continue;
      std::ifstream in(f.path(), std::ios::binary);
      std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      SCOPED_TRACE(f.path().string());
      const auto t0 = std::chrono::steady_clock::now();
      it->second(bytes.data(), bytes.size());  // crashes, traps or throws anything but kvp::Error on failure
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_LT(s, 10.0) << "took " << s << " s (a hang in the fuzzer's terms)";
      ++n;
    }
  }
  std::cout << n << " kept fuzz inputs under fuzz/" << kind << " handled\n";
  return n;
}

// Inputs that once crashed, hung or over-allocated, kept after their fix.
TEST(HostileRegressions, EveryKeptFuzzInputIsHandled) { run_kept_inputs("regressions"); }

// The minimised corpora the fuzzers built from the project's own seeds: each input reached new
// coverage in some parser, so together they replay every path the fuzzers found, on every run.
TEST(HostileRegressions, EveryCorpusInputIsHandled) {
  const int n = run_kept_inputs("corpus");
  EXPECT_GT(n, 100) << "fuzz/corpus/ should hold the minimised corpora of every target";
}

// ---- hand-made extremes ---------------------------------------------------------------------

struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  Bytes& pod(T v) {
    size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
    return *this;
  }
  Bytes& raw(std::string_view s) {
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& str(std::string_view s) { return pod<uint64_t>(s.size()).raw(s); }
};

TEST(HostileInputs, GgufClaimingATerabyteStringIsRefusedBeforeAllocating) {
  // One kv pair whose key claims 2^40 bytes.
  Bytes g;
  g.raw("GGUF").pod<uint32_t>(3).pod<uint64_t>(0).pod<uint64_t>(1).pod<uint64_t>(uint64_t(1) << 40).raw("abc");
  expect_error([&] { parse_gguf(g.b.data(), g.b.size(), "tb.gguf"); }, {"tb.gguf"});
  EXPECT_EQ(fuzz::run_gguf(g.b.data(), g.b.size()), 0);
  // A string value of 2^40 bytes, and an array of 2^62 strings, after a valid key.
  Bytes v;
  v.raw("GGUF").pod<uint32_t>(3).pod<uint64_t>(0).pod<uint64_t>(1).str("general.name").pod<uint32_t>(8)
      .pod<uint64_t>(uint64_t(1) << 40).raw("x");
  expect_error([&] { parse_gguf(v.b.data(), v.b.size(), "tbv.gguf"); }, {"tbv.gguf"});
  Bytes a;
  a.raw("GGUF").pod<uint32_t>(3).pod<uint64_t>(0).pod<uint64_t>(1).str("tokenizer.ggml.tokens").pod<uint32_t>(9)
      .pod<uint32_t>(8).pod<uint64_t>(uint64_t(1) << 62).str("a");
  expect_error([&] { parse_gguf(a.b.data(), a.b.size(), "arr.gguf"); }, {"arr.gguf"});
  // Arrays of arrays nested until the input runs out.
  Bytes n;
  n.raw("GGUF").pod<uint32_t>(3).pod<uint64_t>(0).pod<uint64_t>(1).str("k").pod<uint32_t>(9);
  for (int i = 0; i < 20000; ++i) n.pod<uint32_t>(9).pod<uint64_t>(1);
  EXPECT_EQ(fuzz::run_gguf(n.b.data(), n.b.size()), 0);
}

TEST(HostileInputs, SafetensorsWithAnEnormousHeaderLengthIsRefused) {
  for (uint64_t len : {uint64_t(-1), uint64_t(1) << 62, kMaxSafetensorsHeader + 1, uint64_t(100)}) {
    Bytes s;
    s.pod<uint64_t>(len).raw("{}");
    expect_error([&] { parse_safetensors(s.b.data(), s.b.size(), "h.safetensors"); }, {"h.safetensors"});
    EXPECT_EQ(fuzz::run_safetensors(s.b.data(), s.b.size()), 0);
  }
  // Offsets that wrap around, and a shape whose element count overflows 64 bits.
  for (const char* hdr : {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[18446744073709551615,7]}})",
                          R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})",
                          R"({"a":{"dtype":"F32","shape":[-2,-4],"data_offsets":[0,32]}})"}) {
    Bytes s;
    s.pod<uint64_t>(std::strlen(hdr)).raw(hdr).raw(std::string(32, '\0'));
    expect_error([&] { parse_safetensors(s.b.data(), s.b.size(), "o.safetensors"); }, {"o.safetensors"});
  }
}

TEST(HostileInputs, TokenizerBinWithHugeLengthsIsRefused) {
  Bytes t;
  t.pod<int32_t>(INT32_MAX);
  expect_error([&] { tokenizer_from_llama2c_bin(t.b.data(), t.b.size(), "t.bin"); }, {"t.bin", "max_token_length"});
  Bytes p;
  p.pod<int32_t>(16).pod<float>(0.f).pod<int32_t>(INT32_MAX).raw("abc");
  expect_error([&] { tokenizer_from_llama2c_bin(p.b.data(), p.b.size(), "p.bin"); }, {"p.bin", "entry 0"});
  Bytes q;
  q.pod<int32_t>(16).pod<float>(0.f).pod<int32_t>(-5);
  expect_error([&] { tokenizer_from_llama2c_bin(q.b.data(), q.b.size(), "q.bin"); }, {"q.bin", "entry 0"});
}

TEST(HostileInputs, TokenizerJsonWithHugeIdsIsRefused) {
  for (const char* j : {R"({"model":{"type":"BPE","vocab":{"a":2147483647},"merges":[]}})",
                        R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"added_tokens":[{"id":1e300,"content":"x"}]})",
                        R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"added_tokens":[{"id":99999999,"content":"x"}]})"}) {
    SCOPED_TRACE(j);
    expect_error([&] { tokenizer_from_json(j, "big.json"); }, {"big.json"});
  }
}

}  // namespace
}  // namespace kvp
