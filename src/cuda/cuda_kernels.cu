// CudaKernels (cuda_kernels.cuh) as make_kernels hands it out.
#include "cuda/cuda_kernels.cuh"

namespace kvp::cuda {

std::unique_ptr<Kernels> make_kernels(KernelPolicy policy) {
  open();
  if (policy == KernelPolicy::Reference)
    fail_input("--kernels reference --device cuda: the reference kernels run on the CPU only (use --kernels "
               "standard, invariant or portable on CUDA, or --device cpu)");
  return std::make_unique<CudaKernels>(policy);
}

}  // namespace kvp::cuda
