#pragma once
// Errors from the backend's .cu files. They cannot include core/error.h (nvcc's front end rejects
// parts of the fmt headers in C++20), so messages are plain strings and the throwing happens in
// cuda_fail.cpp, compiled by the host compiler.
#include <string>

namespace kvp::cuda {

[[noreturn]] void fail_input(const std::string& message);  // Error(BadInput): exit 1
[[noreturn]] void fail_usage(const std::string& message);  // Error(Usage): exit 2
// "%.Nf" of a value, for messages.
std::string fixed(double value, int decimals);

}  // namespace kvp::cuda
