// CudaKernels (cuda_kernels.cuh) as make_kernels hands it out.
#include "core/shared_by_owner.h"
#include "cuda/cuda_kernels.cuh"

namespace kvp::cuda {

std::shared_ptr<DeviceWeights> shared_device_weights(const void* owner) {
  static SharedByOwner<DeviceWeights> held;
  return held.get(owner, [] { return std::make_shared<DeviceWeights>(); });
}

std::unique_ptr<Kernels> make_kernels(KernelPolicy policy, const void* owner) {
  open();
  if (policy == KernelPolicy::Reference)
    fail_input("--kernels reference --device cuda: the reference kernels run on the CPU only (use --kernels "
               "standard, invariant or portable on CUDA, or --device cpu)");
  return std::make_unique<CudaKernels>(policy, owner);
}

}  // namespace kvp::cuda
