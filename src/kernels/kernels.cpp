#include "kernels/kernels.h"

#include "core/error.h"
#include "cuda/cuda_runtime_api.h"
#include "kernels/policies.h"

namespace kvp {

std::string policy_name(KernelPolicy p) {
  switch (p) {
    case KernelPolicy::Reference: return "reference";
    case KernelPolicy::Standard: return "standard";
    case KernelPolicy::Invariant: return "invariant";
    case KernelPolicy::Portable: return "portable";
  }
  return "?";
}

KernelPolicy parse_policy(const std::string& s) {
  if (s == "reference") return KernelPolicy::Reference;
  if (s == "standard") return KernelPolicy::Standard;
  if (s == "invariant") return KernelPolicy::Invariant;
  if (s == "portable") return KernelPolicy::Portable;
  fail_usage("unknown kernel policy '{}' (expected reference, standard, invariant or portable)", s);
}

std::unique_ptr<Kernels> make_kernels(KernelPolicy policy, ThreadPool* pool, Device device, const void* weights_owner) {
  if (device == Device::Cuda) {
    require_device(device);
    return cuda::make_kernels(policy, weights_owner);
  }
  switch (policy) {
    case KernelPolicy::Reference: return make_reference_kernels();
    case KernelPolicy::Standard: return make_standard_kernels(pool);
    case KernelPolicy::Invariant: return make_invariant_kernels(pool);
    case KernelPolicy::Portable: return make_portable_kernels(pool);
  }
  fail_usage("kernel policy '{}' is not implemented", policy_name(policy));
}

}  // namespace kvp
