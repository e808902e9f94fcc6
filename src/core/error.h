#pragma once
// Errors carry a kind so the CLI can map them to exit codes (DESIGN.md §8):
// bad input -> 1, usage -> 2. Messages name the file/tensor/option at fault.
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace kvp {

enum class ErrorKind { BadInput, Usage, Numeric, Internal };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message) : std::runtime_error(std::move(message)), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// An option with its value as the caller wrote it: "--device cuda" for a command-line option,
// "device='cuda'" for a Python keyword (an option name without the leading dashes).
inline std::string spelled_option(const std::string& option, const std::string& value) {
  return option.rfind("--", 0) == 0 ? option + " " + value : option + "='" + value + "'";
}

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(ErrorKind::BadInput, fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void fail_usage(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(ErrorKind::Usage, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace kvp
