#pragma once
// What decides a side's bits besides its SPEC, kept in a results folder's settings (`compare`'s
// manifest.json, `eval gsm8k`'s gsm8k_manifest.json) so that a run resumed on another machine, or
// under another switch, is refused instead of adding records of other numerics to the study, and
// so that a report says where its numbers were computed:
//   "numerics": {"cpu":  {"standard": {"simd": "avx512"}, "invariant": {...}},
//                "cuda": {"standard": {"gpu", "cublas", "gemv", ...}, "invariant": {"gpu_arch", "gemm_family"}}}
// cpu: the target `simd=auto` runs here, for sides that leave it to the machine (standard and
// invariant sum by vector width; a pinned target is in the SPEC already). cuda:
// cuda::numerics_identity, the card and the process's bit-changing switches. The reference and
// portable policies' bits follow nothing here and add nothing.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lab/run_spec.h"

namespace kvp {

// The identity of every (device, policy) the sides use that has one; null when none has (a folder
// of such sides keeps the settings it had before this existed). A CUDA side opens the GPU, and
// refuses as a CUDA side does where there is none (or in a build without CUDA).
nlohmann::json numerics_identity(const std::vector<RunSettings>& sides);
// settings["numerics"] = numerics_identity(sides), where there is one.
void add_numerics_identity(nlohmann::json& settings, const std::vector<RunSettings>& sides);

// The settings a folder recorded, as this run compares them: a folder written before the identity
// was recorded (2026-11-28) takes this run's, with a note on stderr naming `where` (once per
// process: profile and patch check their folder before and after the work), since nothing can be
// checked against what was never kept; everything else is left as recorded.
nlohmann::json with_numerics_of(nlohmann::json recorded, const nlohmann::json& now, const std::string& where);

// What to add to a refusal whose first difference (json_first_difference's "path: a vs b") lies in
// the identity: "; its records were computed on another machine or under other switches (...)";
// "" for any other difference.
std::string numerics_difference_hint(const std::string& difference);

}  // namespace kvp
