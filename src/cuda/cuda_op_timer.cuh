#pragma once
// GPU time per kernel operation, for `kvparity bench --device cuda --op-times`: each operation of
// the Kernels interface is bracketed by two events on the stream; the report sums them per
// (phase, operation). While it is on, passes run eagerly (no graph replay), so that the events
// fall between the launches they measure.
#include <cuda_runtime.h>

namespace kvp::cuda {

bool op_timing_on();

// Brackets one operation (does nothing while timing is off).
class OpSpan {
 public:
  explicit OpSpan(const char* name);
  ~OpSpan();
  OpSpan(const OpSpan&) = delete;
  OpSpan& operator=(const OpSpan&) = delete;

 private:
  const char* name_;
  cudaEvent_t start_ = nullptr;
};

}  // namespace kvp::cuda
