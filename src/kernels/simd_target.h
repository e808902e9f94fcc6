#pragma once
// Which SIMD code the CPU kernels run: Highway compiles every kernel file once per x86 target
// (AVX-512, AVX2, and a portable fallback: EMU128 or SCALAR) and dispatches at run time to the best one the
// CPU has. `--simd` (and `simd=` in a SPEC) pins a lesser one, so that one machine can measure and
// check what users with AVX2-only or non-x86 CPUs get (the standard and invariant kernels' sums
// are grouped by vector width, so their bits differ between targets; each target reproduces itself).
//
// The choice is process-wide (Highway keeps one dispatch table): engines apply theirs before each
// pass, so engines running one after the other may differ, engines running at the same time must
// agree.
#include <string>
#include <vector>

namespace kvp {

enum class SimdTarget { Auto, Avx512, Avx2, Scalar };

// auto|avx512|avx2|scalar; a usage error naming `option` otherwise.
SimdTarget parse_simd(const std::string& s, const std::string& option = "--simd");
std::string simd_name(SimdTarget t);
inline const std::vector<std::string> kSimdNames = {"auto", "avx512", "avx2", "scalar"};

// Refuses (exit 1, naming the target and what the CPU and the build have) a target this process
// cannot run: not compiled into this build, or not supported by the CPU.
void require_simd(SimdTarget t, const std::string& option = "--simd");
// Makes the kernels dispatch to `t` from the next kernel call on (Auto: the best the CPU has).
// Cheap when `t` is already in effect.
void use_simd(SimdTarget t);
// The Highway target the kernels dispatch to now, e.g. "AVX3" (AVX-512), "AVX2", "SCALAR".
std::string simd_in_use();
// The targets this build compiled that the CPU supports, best first (Highway's names).
std::vector<std::string> simd_available();
// What `auto` runs on this CPU, as --simd names it ("avx512", "avx2", "scalar"; Highway's name
// for a target outside those, e.g. on ARM): with the policy, what decides the standard and
// invariant kernels' bits where a side leaves its target to the machine.
std::string simd_auto_target();

}  // namespace kvp
