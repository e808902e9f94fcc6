#include "cuda/cuda_fail.h"

#include "core/error.h"

namespace kvp::cuda {

void fail_input(const std::string& message) { throw Error(ErrorKind::BadInput, message); }
void fail_usage(const std::string& message) { throw Error(ErrorKind::Usage, message); }

std::string fixed(double value, int decimals) { return fmt::format("{:.{}f}", value, decimals); }

}  // namespace kvp::cuda
