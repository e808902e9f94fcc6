#include "kernels/simd_target.h"

#include <atomic>
#include <mutex>

#include "core/error.h"
#include "hwy/highway.h"
#include "hwy/targets.h"

namespace kvp {
namespace {

// The Highway targets each choice may use (a build may compile AVX3_DL besides AVX3).
int64_t target_bits(SimdTarget t) {
  switch (t) {
    case SimdTarget::Auto: return 0;
    case SimdTarget::Avx512: return HWY_AVX3 | HWY_AVX3_DL;
    case SimdTarget::Avx2: return HWY_AVX2;
    case SimdTarget::Scalar: return HWY_EMU128 | HWY_SCALAR;
  }
  return 0;
}

// What the CPU supports among the compiled targets, before any pinning.
int64_t native_targets() {
  static const int64_t bits = [] {
    hwy::SetSupportedTargetsForTest(0);
    return hwy::SupportedTargets() & HWY_TARGETS;
  }();
  return bits;
}

std::mutex g_mu;
std::atomic<SimdTarget> g_current{SimdTarget::Auto};

}  // namespace

SimdTarget parse_simd(const std::string& s, const std::string& option) {
  if (s == "auto") return SimdTarget::Auto;
  if (s == "avx512") return SimdTarget::Avx512;
  if (s == "avx2") return SimdTarget::Avx2;
  if (s == "scalar") return SimdTarget::Scalar;
  fail_usage("{}: '{}' is not one of auto, avx512, avx2, scalar", option, s);
}

std::string simd_name(SimdTarget t) {
  switch (t) {
    case SimdTarget::Auto: return "auto";
    case SimdTarget::Avx512: return "avx512";
    case SimdTarget::Avx2: return "avx2";
    case SimdTarget::Scalar: return "scalar";
  }
  return "?";
}

std::vector<std::string> simd_available() {
  std::vector<std::string> out;
  for (int64_t bits = native_targets(); bits != 0; bits &= bits - 1) out.push_back(hwy::TargetName(bits & -bits));
  return out;
}

void require_simd(SimdTarget t, const std::string& option) {
  if (t == SimdTarget::Auto) return;
  if ((native_targets() & target_bits(t)) == 0) {
    std::string have;
    for (const auto& n : simd_available()) have += (have.empty() ? "" : ", ") + n;
    fail("{}: this CPU and build cannot run it (targets available here: {})", spelled_option(option, simd_name(t)),
         have);
  }
}

void use_simd(SimdTarget t) {
  if (g_current.load(std::memory_order_relaxed) == t) return;
  std::lock_guard<std::mutex> lock(g_mu);
  require_simd(t);
  const int64_t bits = t == SimdTarget::Auto ? 0 : (native_targets() & target_bits(t));
  // Pinning is Highway's test mock of the CPU's targets; 0 restores the real ones. Either way the
  // dispatch tables are reset, so the next call of every kernel picks the new best target.
  hwy::SetSupportedTargetsForTest(bits);
  g_current.store(t);
}

std::string simd_auto_target() {
  const int64_t best = native_targets() & -native_targets();
  for (SimdTarget t : {SimdTarget::Avx512, SimdTarget::Avx2, SimdTarget::Scalar})
    if ((best & target_bits(t)) != 0) return simd_name(t);
  return hwy::TargetName(best);
}

std::string simd_in_use() {
  const int64_t bits = hwy::SupportedTargets() & HWY_TARGETS;
  return hwy::TargetName(bits & -bits);
}

}  // namespace kvp
