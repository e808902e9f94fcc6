#include "lab/numerics_identity.h"

#include <iostream>
#include <mutex>
#include <set>
#include <utility>

#include "cuda/cuda_runtime_api.h"
#include "kernels/simd_target.h"

namespace kvp {

nlohmann::json numerics_identity(const std::vector<RunSettings>& sides) {
  nlohmann::json id = nlohmann::json::object();
  for (const RunSettings& s : sides) {
    if (s.kernels != KernelPolicy::Standard && s.kernels != KernelPolicy::Invariant) continue;
    const std::string policy = policy_name(s.kernels);
    if (s.device == Device::Cuda) {
      nlohmann::json& entry = id["cuda"][policy];
      if (entry.is_null())
        for (const auto& [key, value] : cuda::numerics_identity(s.kernels)) entry[key] = value;
    } else if (s.simd == SimdTarget::Auto) {
      id["cpu"][policy]["simd"] = simd_auto_target();
    }
  }
  return id.empty() ? nlohmann::json() : id;
}

void add_numerics_identity(nlohmann::json& settings, const std::vector<RunSettings>& sides) {
  if (auto numerics = numerics_identity(sides); !numerics.is_null()) settings["numerics"] = std::move(numerics);
}

nlohmann::json with_numerics_of(nlohmann::json recorded, const nlohmann::json& now, const std::string& where) {
  if (recorded.is_object() && !recorded.contains("numerics") && now.is_object() && now.contains("numerics")) {
    static std::mutex mu;
    static std::set<std::string> noted;
    std::lock_guard<std::mutex> lock(mu);
    if (noted.insert(where).second)
      std::cerr << "note: " << where
                << ": recorded before the machine and switches that decide the bits were kept; this run "
                   "records its own ("
                << now["numerics"].dump() << ")\n";
    recorded["numerics"] = now["numerics"];
  }
  return recorded;
}

std::string numerics_difference_hint(const std::string& difference) {
  // One side of the difference spells simd= and the other does not: a run given --simd and one
  // left to pick the machine's best, which record the target in different places.
  const size_t vs = difference.find(" vs ");
  if (vs != std::string::npos && (difference.find("simd=") < vs) != (difference.find("simd=", vs) != std::string::npos))
    return "; one of the runs was given --simd (or a SPEC's simd=) and the other was not: give it the same way "
           "to every run of a study (a run without it takes this machine's best target and records that under "
           "numerics)";
  if (difference.find("settings/numerics") == std::string::npos) return "";
  return "; its records were computed on another machine or under other switches (a CPU whose best SIMD target "
         "differs, another GPU or cuBLAS, other KVPARITY_CUDA_* settings that change bits), and this run's would "
         "not be comparable with them";
}

}  // namespace kvp
