// --simd: pinning the CPU kernels to a lesser SIMD target at run time. Every target this machine
// has runs every family within 1e-4 of transformers in fp32, reproduces itself bit for bit, and
// keeps the invariant policy's cache ON == OFF; engines on different targets run one after the
// other in one process; SPECs and the CLI take the key.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "core/error.h"
#include "kernels/simd_target.h"
#include "lab/run_spec.h"
#include "model/model.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

using test::simd_targets_here;

std::vector<float> logits_of(const std::shared_ptr<const Model>& model, KernelPolicy pol, SimdTarget simd,
                             const std::vector<int>& ids, CacheMode cache) {
  EngineOptions eo;
  eo.kernels = pol;
  eo.threads = 2;
  eo.simd = simd;
  Engine e(model, eo);
  GenerationConfig g;
  g.max_new_tokens = 6;
  g.cache = cache;
  g.stop_at_eos = false;
  std::vector<float> out;
  e.generate(ids, g, nullptr, [&](const StepInfo& s) { out.insert(out.end(), s.logits, s.logits + s.vocab); });
  return out;
}

TEST(SimdTarget, NamesParseAndTheScalarFallbackIsAlwaysThere) {
  for (const auto& n : kSimdNames) EXPECT_EQ(simd_name(parse_simd(n)), n);
  try {
    parse_simd("avx3");
    ADD_FAILURE() << "avx3 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("--simd: 'avx3'"), std::string::npos) << e.what();
  }
  const auto here = simd_targets_here();
  ASSERT_FALSE(here.empty());
  EXPECT_EQ(here.back(), SimdTarget::Scalar);
  use_simd(SimdTarget::Scalar);
  // Highway's portable fallback: EMU128 (128-bit vectors in plain C++) or SCALAR (one lane),
  // whichever this Highway compiles.
  EXPECT_TRUE(simd_in_use() == "EMU128" || simd_in_use() == "SCALAR") << simd_in_use();
  use_simd(SimdTarget::Auto);
  EXPECT_EQ(simd_in_use(), simd_available().front());
  if (std::count(here.begin(), here.end(), SimdTarget::Avx2)) {
    use_simd(SimdTarget::Avx2);
    EXPECT_EQ(simd_in_use(), "AVX2");
    use_simd(SimdTarget::Auto);
  }
}

// Every target: fp32 within 1e-4 of transformers for every family, each target bitwise equal to
// itself, and the invariant kernels' cache ON == cache OFF in fp16 on each.
TEST(SimdTarget, EveryTargetMatchesTheReferencesAndKeepsTheInvariantGuarantee) {
  for (const std::string fam : {"llama", "mistral", "gemma2", "qwen2", "qwen3", "gemma3", "olmo2"}) {
    KVP_REQUIRE_REFERENCE(dir, fam);
    std::ifstream in(dir + "/tokens.json");
    const auto tokens = nlohmann::json::parse(in)["input_ids"].get<std::vector<int>>();
    std::ifstream ref_in(dir + "/logits.f32", std::ios::binary);
    std::vector<float> ref(tokens.size() * 512);
    ref_in.read(reinterpret_cast<char*>(ref.data()), std::streamsize(ref.size() * sizeof(float)));
    ASSERT_TRUE(ref_in) << dir;
    auto f32 = Model::load(dir, DType::F32);
    auto f16 = Model::load(dir, DType::F16);
    ASSERT_EQ(f32->config.vocab_size, 512);
    const std::vector<int> prompt(tokens.begin(), tokens.begin() + 12);
    for (SimdTarget t : simd_targets_here()) {
      SCOPED_TRACE(fam + " on " + simd_name(t));
      for (KernelPolicy pol : {KernelPolicy::Standard, KernelPolicy::Invariant}) {
        EngineOptions eo;
        eo.kernels = pol;
        eo.threads = 2;
        eo.simd = t;
        Engine e(f32, eo);
        const float* l = e.forward_uncached(tokens.data(), int(tokens.size()), ForwardOptions{});
        double worst = 0;
        for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::fabs(double(l[i]) - double(ref[i])));
        EXPECT_LE(worst, 1e-4) << policy_name(pol);
      }
      const auto a = logits_of(f16, KernelPolicy::Standard, t, prompt, CacheMode::On);
      EXPECT_EQ(a, logits_of(f16, KernelPolicy::Standard, t, prompt, CacheMode::On)) << "not reproducible";
      const auto on = logits_of(f16, KernelPolicy::Invariant, t, prompt, CacheMode::On);
      EXPECT_EQ(on, logits_of(f16, KernelPolicy::Invariant, t, prompt, CacheMode::Off)) << "invariant ON != OFF";
    }
  }
  use_simd(SimdTarget::Auto);
}

// Engines on different targets take turns in one process, each computing what it computes alone.
TEST(SimdTarget, EnginesOnDifferentTargetsTakeTurns) {
  KVP_REQUIRE_SHARED(dir, "reference/llama");
  auto model = Model::load(dir, DType::F16);
  const std::vector<int> ids{1, 81, 213, 287, 262, 424, 213, 75};
  const auto scalar_alone = logits_of(model, KernelPolicy::Standard, SimdTarget::Scalar, ids, CacheMode::On);
  const auto best_alone = logits_of(model, KernelPolicy::Standard, SimdTarget::Auto, ids, CacheMode::On);
  EngineOptions a, b;
  a.simd = SimdTarget::Scalar;
  b.simd = SimdTarget::Auto;
  Engine ea(model, a), eb(model, b);
  GenerationConfig g;
  g.max_new_tokens = 6;
  g.stop_at_eos = false;
  std::vector<float> la, lb;
  ea.cache().clear();
  eb.cache().clear();
  // Interleave the two engines' passes step by step.
  const float* p = ea.forward(ids.data(), int(ids.size()), 0, ForwardOptions{});
  la.assign(p + (ids.size() - 1) * 512, p + ids.size() * 512);
  p = eb.forward(ids.data(), int(ids.size()), 0, ForwardOptions{});
  lb.assign(p + (ids.size() - 1) * 512, p + ids.size() * 512);
  EXPECT_EQ(std::vector<float>(scalar_alone.begin(), scalar_alone.begin() + 512), la);
  EXPECT_EQ(std::vector<float>(best_alone.begin(), best_alone.begin() + 512), lb);
}

TEST(SimdTarget, SpecsNameTheTargetAndKeepTheirOldSpellingWithoutIt) {
  const RunSettings autos = RunSpec::parse("", "x").resolve(RunDefaults{});
  EXPECT_EQ(autos.spec().find("simd"), std::string::npos);
  const RunSettings scalar = RunSpec::parse("simd=scalar", "x").resolve(RunDefaults{});
  EXPECT_EQ(scalar.simd, SimdTarget::Scalar);
  EXPECT_NE(scalar.spec().find(",simd=scalar"), std::string::npos);
  EXPECT_EQ(scalar.engine_options().simd, SimdTarget::Scalar);
  EXPECT_EQ(RunSpec::parse(scalar.spec(), "x").resolve(RunDefaults{}), scalar);
  EXPECT_NE(sides_key(autos, scalar).find("/simd=auto->scalar"), std::string::npos);
}

TEST(SimdTargetCli, GenerateAndBenchTakeSimd) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  const std::string m = " --model " + test::shell_quoted(model) + " --tokenizer " + test::shell_quoted(tok);
  const auto a = test::run_kvparity("generate" + m + " --dtype fp32 --max-new-tokens 8 --json --simd scalar");
  ASSERT_EQ(a.status, 0) << a.err;
  const auto b = test::run_kvparity("generate" + m + " --dtype fp32 --max-new-tokens 8 --json");
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_EQ(nlohmann::json::parse(a.out)["output_ids"], nlohmann::json::parse(b.out)["output_ids"]);
  const auto bad = test::run_kvparity("generate" + m + " --simd avx3");
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(bad.err.rfind("error: --simd", 0), 0u) << bad.err;
  const auto bench = test::run_kvparity("bench --synth tiny --simd auto,scalar --prompt-tokens 8 --decode-tokens 4 "
                                        "--cache-off-tokens 8 --repeats 1 --bandwidth-gbs 10 --json");
  ASSERT_EQ(bench.status, 0) << bench.err;
  const auto rows = nlohmann::json::parse(bench.out);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["simd"], simd_available().front());
  for (const auto& r : rows) {
    // Prefill against the fp32 FMA peak measured on the row's own target.
    EXPECT_GT(r["peak_fma_gflops"].get<double>(), 0.0);
    EXPECT_GT(r["prefill_gflops"].get<double>(), 0.0);
    EXPECT_NEAR(r["prefill_fraction_of_peak"].get<double>(),
                r["prefill_gflops"].get<double>() / r["peak_fma_gflops"].get<double>(), 1e-9);
  }
  // The scalar fallback's peak is below the best target's.
  EXPECT_LT(rows[1]["peak_fma_gflops"].get<double>(), rows[0]["peak_fma_gflops"].get<double>());
  EXPECT_TRUE(rows[1]["simd"] == "EMU128" || rows[1]["simd"] == "SCALAR") << rows[1]["simd"];
}

}  // namespace
}  // namespace kvp
