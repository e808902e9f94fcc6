#pragma once
// Shared by the libFuzzer targets. Each target feeds the input to one loader; a kvp::Error is the
// expected outcome for garbage (a clear, named refusal). Any other exception escapes and aborts, so
// libFuzzer records it as a finding just like a crash, a sanitizer report, a hang or a huge allocation.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"

namespace kvp::fuzz {

template <typename F>
void expect_ok_or_error(F&& f) {
  try {
    f();
  } catch (const kvp::Error& e) {
    // Every refusal must say something.
    if (std::string_view(e.what()).empty()) __builtin_trap();
  }
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

}  // namespace kvp::fuzz
