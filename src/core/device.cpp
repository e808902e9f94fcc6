#include "core/device.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"
#include "cuda/cuda_runtime_api.h"

namespace kvp {

std::string device_name(Device d) { return d == Device::Cuda ? "cuda" : "cpu"; }

Device parse_device(const std::string& s, const std::string& option) {
  if (s == "cpu") return Device::Cpu;
  if (s == "cuda") return Device::Cuda;
  fail_usage("{}: unknown device '{}' (expected cpu or cuda)", option, s);
}

bool cuda_built() { return cuda::built(); }

void require_device(Device d, const std::string& option) {
  if (d == Device::Cpu) return;
  if (!cuda::built())
    fail("{}: this kvparity was built without CUDA (configure with -DKVPARITY_CUDA=ON on a machine with nvcc); use {}",
         spelled_option(option, "cuda"), spelled_option(option, "cpu"));
  const std::string why = cuda::why_unusable();
  if (!why.empty()) fail("{}: {}", spelled_option(option, "cuda"), why);
}

std::string device_description(Device d) { return d == Device::Cuda ? cuda::describe() : "cpu"; }

void* device_alloc(Device d, size_t bytes) {
  if (d == Device::Cuda) return cuda::alloc(bytes);
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void device_free(Device d, void* p) noexcept {
  if (d == Device::Cuda)
    cuda::release(p);
  else
    std::free(p);
}

void device_to_host(Device d, void* host_dst, const void* dev_src, size_t bytes) {
  if (d == Device::Cuda) return cuda::to_host(host_dst, dev_src, bytes);
  std::memcpy(host_dst, dev_src, bytes);
}

void host_to_device(Device d, void* dev_dst, const void* host_src, size_t bytes) {
  if (d == Device::Cuda) return cuda::to_device(dev_dst, host_src, bytes);
  std::memcpy(dev_dst, host_src, bytes);
}

}  // namespace kvp
