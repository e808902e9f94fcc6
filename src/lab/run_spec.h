#pragma once
// One side of a comparison. The lab compares two ways of running the same model on the same
// inputs with the same random draws (`compare`, `eval gsm8k`, `profile`, `patch` take
// --baseline SPEC --candidate SPEC); everything that differs between the sides is a setting that
// "should not" change the output, so every difference measured is numerics.
//
// A SPEC is a comma-separated list of key=value, each key at most once:
//   cache=on|off                  cache ON (prefill, then one row per step) or OFF (recompute all)
//   dtype=fp32|fp16|bf16          compute dtype
//   kv-dtype=<KV type>            what the cache stores (core/kv_type.h)
//   kernels=reference|standard|invariant|portable
//   threads=N  batch-size=N  prefill-chunk=N
//   device=cpu|cuda               where the side runs (cuda: a build with CUDA and a GPU)
//   simd=auto|avx512|avx2|scalar  the CPU kernels' SIMD target (kernels/simd_target.h)
// Keys not given take the command's own options (RunDefaults), so `--dtype fp16,bf16` still
// sweeps dtypes for both sides. With cache=off nothing is cached: a quantised KV type that came
// from the command's options does not apply to that side (its K/V stay in the compute dtype), and
// one written in the side's own SPEC is refused.
#include <optional>
#include <string>
#include <string_view>

#include "core/kv_type.h"
#include "kernels/kernels.h"
#include "kernels/simd_target.h"
#include "runtime/generator.h"

namespace kvp {

// A side with every setting decided.
struct RunSettings {
  CacheMode cache = CacheMode::On;
  DType dtype = DType::F16;
  KvType kv_dtype = KvType::of(DType::F16);
  KernelPolicy kernels = KernelPolicy::Standard;
  int threads = 1;
  int batch_size = 1;     // > 1: prompts decoded in fixed groups of this many by index, one batch each
  int prefill_chunk = 0;  // cache ON: prompt rows per prefill forward (0: the whole prompt)
  Device device = Device::Cpu;
  SimdTarget simd = SimdTarget::Auto;

  // Every key in SPEC syntax, e.g. "cache=on,dtype=fp16,kv-dtype=fp16,kernels=standard,threads=1,
  // batch-size=1,prefill-chunk=0", then ",device=cuda" for a GPU side and ",simd=avx2" for a pinned
  // SIMD target (left out for the CPU and auto, so records written before those keys existed keep
  // their spelling); parses back to the same settings.
  std::string spec() const;
  EngineOptions engine_options() const;
  bool operator==(const RunSettings&) const = default;
};

// What the command's options say for one condition; a SPEC's keys take precedence.
struct RunDefaults {
  CacheMode cache = CacheMode::On;
  DType dtype = DType::F16;
  std::optional<KvType> kv_dtype;  // none: the side's own dtype
  KernelPolicy kernels = KernelPolicy::Standard;
  int threads = 1;
  int batch_size = 1;
  int prefill_chunk = 0;
  Device device = Device::Cpu;
  SimdTarget simd = SimdTarget::Auto;
};

class RunSpec {
 public:
  RunSpec() = default;
  // Usage errors (exit 2) name `option` and the key at fault: unknown keys (with the nearest
  // known one), bad values, a key given twice, an empty item.
  static RunSpec parse(std::string_view text, const std::string& option);

  // The settings of a side; refuses combinations that cannot run (named by option and key).
  RunSettings resolve(const RunDefaults& defaults) const;

  // The keys given, in canonical order and spelling ("" when none).
  std::string text() const;
  bool sets_cache() const { return cache_.has_value(); }
  bool sets_batch_size() const { return batch_size_.has_value(); }
  bool operator==(const RunSpec&) const = default;

 private:
  std::string option_;
  std::optional<CacheMode> cache_;
  std::optional<DType> dtype_;
  std::optional<KvType> kv_dtype_;
  std::optional<KernelPolicy> kernels_;
  std::optional<int> threads_, batch_size_, prefill_chunk_;
  std::optional<Device> device_;
  std::optional<SimdTarget> simd_;
};

// The SPECs a comparison uses when none is given: cache OFF (baseline) against cache ON.
inline constexpr const char* kDefaultBaselineSpec = "cache=off";
inline constexpr const char* kDefaultCandidateSpec = "cache=on";

// A short name for a pair of sides, for condition keys and tables: the compute dtype, KV type and
// kernels of both, "a->b" where they differ, then any other setting that differs
// ("fp16/kv=fp16->q8_0/standard", "fp16/kv=fp16/invariant/threads=1->2"). The cache setting is
// named unless it is the default pair (baseline off, candidate on).
std::string sides_key(const RunSettings& baseline, const RunSettings& candidate);

}  // namespace kvp
