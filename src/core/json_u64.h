#pragma once
// 64-bit unsigned values (seeds, hashes) in JSON. Readers in JavaScript and Python's json module
// with float parsing lose integers above 2^53, so such values are written as decimal strings;
// smaller ones stay numbers so existing readers keep working.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace kvp {

inline constexpr uint64_t kJsonExactIntegerLimit = uint64_t(1) << 53;

inline nlohmann::json json_u64(uint64_t v) {
  if (v <= kJsonExactIntegerLimit) return nlohmann::json(v);
  return nlohmann::json(std::to_string(v));
}

}  // namespace kvp
