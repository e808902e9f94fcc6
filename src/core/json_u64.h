#pragma once
// 64-bit unsigned values (seeds, hashes) in JSON. Readers in JavaScript and Python's json module
// with float parsing lose integers above 2^53, so such values are written as decimal strings;
// smaller ones stay numbers so existing readers keep working. read_json_u64 accepts both.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace kvp {

inline constexpr uint64_t kJsonExactIntegerLimit = uint64_t(1) << 53;

inline nlohmann::json json_u64(uint64_t v) {
  if (v <= kJsonExactIntegerLimit) return nlohmann::json(v);
  return nlohmann::json(std::to_string(v));
}

// A number or a decimal string written by json_u64; nullopt for anything else.
inline std::optional<uint64_t> read_json_u64(const nlohmann::json& j) {
  if (j.is_number_unsigned()) return j.get<uint64_t>();
  if (j.is_number_integer() && j.get<int64_t>() >= 0) return uint64_t(j.get<int64_t>());
  if (!j.is_string()) return std::nullopt;
  const std::string& s = j.get_ref<const std::string&>();
  if (s.empty() || s.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t d = uint64_t(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

}  // namespace kvp
