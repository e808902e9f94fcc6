// Tokenizer throughput: encoding 10 KB of mixed text and a 10 KB word without spaces (the merge
// loop's worst case) with the three tokenizer routes, and loading Llama-2's 32000-piece
// tokenizer.bin. The Llama-2 rows need the shared models ($KVPARITY_SHARED, default ../shared);
// without them only the synthetic byte-fallback tokenizer.json is measured.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace kvp::bench {
namespace {

std::string llama2_tokenizer_bin() {
  const char* env = std::getenv("KVPARITY_SHARED");
  std::filesystem::path p = std::filesystem::path(env ? env : "../shared") / "models/llama2-tokenizer/tokenizer.bin";
  return std::filesystem::exists(p) ? p.string() : std::string();
}

const std::string& mixed_text() {
  static const std::string text = [] {
    std::string t;
    while (t.size() < 10000)
      t += "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
           "Größe 日本語 😀 12345\n";
    return t;
  }();
  return text;
}

const std::string& no_space_text() {
  static const std::string text(10000, 'a');
  return text;
}

// 0: llama2.c tokenizer.bin, 1: the same vocabulary through the GGUF route, 2: tokenizer.json.
const Tokenizer* tokenizer(int route) {
  static std::unique_ptr<Tokenizer> made[3];
  if (!made[route]) {
    if (route == 2) {
      made[2] = tokenizer_from_json(make_synthetic_tokenizer_json(32000), "synthetic");
    } else {
      const std::string path = llama2_tokenizer_bin();
      if (path.empty()) return nullptr;
      auto bin = load_tokenizer(path);
      made[route] = route == 0 ? std::move(bin) : tokenizer_from_vocab(vocab_from_tokenizer(*bin));
    }
  }
  return made[route].get();
}

void BM_Encode(benchmark::State& state) {
  const Tokenizer* tok = tokenizer(int(state.range(0)));
  if (tok == nullptr) {
    state.SkipWithError("shared models not found: set KVPARITY_SHARED");
    return;
  }
  const std::string& text = state.range(1) == 0 ? mixed_text() : no_space_text();
  size_t n_tokens = 0;
  for (auto _ : state) {
    auto ids = tok->encode(text, true);
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
  state.counters["tokens"] = double(n_tokens);
}
BENCHMARK(BM_Encode)
    ->Name("tokenizer/encode_10KB")
    ->ArgNames({"route", "nospace"})
    ->ArgsProduct({{0, 1, 2}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

void BM_LoadLlama2TokenizerBin(benchmark::State& state) {
  const std::string path = llama2_tokenizer_bin();
  if (path.empty()) {
    state.SkipWithError("shared models not found: set KVPARITY_SHARED");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(load_tokenizer(path).get());
}
BENCHMARK(BM_LoadLlama2TokenizerBin)->Name("tokenizer/load_llama2_tokenizer_bin")->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kvp::bench
