#pragma once
// Where a run computes (DESIGN.md §4a): the CPU, or a CUDA GPU. Buffers the forward pass works on
// live on the run's device; this is the little the rest of the program needs to know about that
// memory (allocate it, copy to and from the host), so that nothing outside the kernels touches a
// device API. A build without CUDA (KVPARITY_CUDA off) refuses Device::Cuda with one message.
#include <cstddef>
#include <string>
#include <utility>

namespace kvp {

enum class Device { Cpu, Cuda };

std::string device_name(Device d);  // "cpu" | "cuda"
// Usage error (exit 2) naming `option` for anything but cpu|cuda.
Device parse_device(const std::string& s, const std::string& option = "--device");

// True when this binary was built with the CUDA backend (it may still find no usable GPU).
bool cuda_built();
// Throws (exit 1) unless `d` can run here: "built without CUDA", or the CUDA error met when
// opening the GPU (no device, driver too old, ...). The message names `option` as the caller
// spells it ("--device" on the command line, "device" from Python).
void require_device(Device d, const std::string& option = "--device");
// One line naming the device (the GPU's name, memory and compute capability; "cpu").
std::string device_description(Device d);

// Raw device memory. For Device::Cpu this is ordinary 64-byte aligned host memory.
void* device_alloc(Device d, size_t bytes);
void device_free(Device d, void* p) noexcept;
// Blocking copies between host memory and memory of device `d` (ordered after the work queued
// on that device, so the data is what the last operation wrote).
void device_to_host(Device d, void* host_dst, const void* dev_src, size_t bytes);
void host_to_device(Device d, void* dev_dst, const void* host_src, size_t bytes);

// The size a scratch buffer takes when it must grow from `have` to hold `need` (> have) bytes:
// at least a quarter more than before. A cache-OFF run's passes grow by a row (a batch: a row a
// sequence) every step; growing each time to the exact size would free and allocate every
// activation buffer at every step, and on a GPU each free waits for the device.
inline size_t grown_size(size_t have, size_t need) {
  return have == 0 || need > have + have / 4 ? need : have + have / 4;
}

// An owning buffer on a device.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device d, size_t bytes) : dev_(d), data_(bytes ? device_alloc(d, bytes) : nullptr), size_(bytes) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      dev_ = o.dev_;
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void reset() noexcept {
    if (data_ != nullptr) device_free(dev_, data_);
    data_ = nullptr;
    size_ = 0;
  }
  Device device() const { return dev_; }
  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T> T* as() { return static_cast<T*>(data_); }
  template <typename T> const T* as() const { return static_cast<const T*>(data_); }

 private:
  Device dev_ = Device::Cpu;
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kvp
