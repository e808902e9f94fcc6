#pragma once
// Typed reads of config.json's fields, each error naming the file and the field (hf_config.cpp's).
#include <cstdint>
#include <limits>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kvp {

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& j, const std::string& source) : j_(j), src_(source) {}

  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  int get_int(const char* key) const {
    if (!has(key)) fail("{}: missing required field '{}'", src_, key);
    return to_int(j_.at(key), key);
  }
  int get_int(const char* key, int dflt) const { return has(key) ? to_int(j_.at(key), key) : dflt; }

  double get_num(const char* key, double dflt) const {
    if (!has(key)) return dflt;
    const nlohmann::json& v = j_.at(key);
    if (!v.is_number()) fail("{}: field '{}' must be a number, got {}", src_, key, v.dump());
    return v.get<double>();
  }

  bool get_bool(const char* key, bool dflt) const {
    if (!has(key)) return dflt;
    const nlohmann::json& v = j_.at(key);
    if (!v.is_boolean()) fail("{}: field '{}' must be true or false, got {}", src_, key, v.dump());
    return v.get<bool>();
  }

  std::string get_str(const char* key, const std::string& dflt) const {
    if (!has(key)) return dflt;
    const nlohmann::json& v = j_.at(key);
    if (!v.is_string()) fail("{}: field '{}' must be a string, got {}", src_, key, v.dump());
    return v.get<std::string>();
  }

  // bos/eos: an int, null, or (eos in newer configs) a list whose first entry is used.
  // Every id of an int or list field (none for null or absent).
  std::vector<int> get_token_ids(const char* key) const {
    std::vector<int> out;
    if (!j_.contains(key) || j_.at(key).is_null()) return out;
    const nlohmann::json& v = j_.at(key);
    if (v.is_array())
      for (const nlohmann::json& e : v) out.push_back(to_int(e, key));
    else
      out.push_back(to_int(v, key));
    return out;
  }

  int get_token_id(const char* key, int dflt) const {
    if (!j_.contains(key)) return dflt;
    const nlohmann::json& v = j_.at(key);
    if (v.is_null()) return -1;
    if (v.is_array()) {
      if (v.empty()) return -1;
      return to_int(v.front(), key);
    }
    return to_int(v, key);
  }

  int to_int(const nlohmann::json& v, const char* key) const {
    if (v.is_number_unsigned()) {
      auto u = v.get<uint64_t>();
      if (u > uint64_t(std::numeric_limits<int>::max())) fail("{}: field '{}' = {} is out of range", src_, key, u);
      return int(u);
    }
    if (v.is_number_integer()) {
      auto i = v.get<int64_t>();
      if (i < std::numeric_limits<int>::min() || i > std::numeric_limits<int>::max())
        fail("{}: field '{}' = {} is out of range", src_, key, i);
      return int(i);
    }
    fail("{}: field '{}' must be an integer, got {}", src_, key, v.dump());
  }

 private:
  const nlohmann::json& j_;
  const std::string& src_;
};

}  // namespace kvp
