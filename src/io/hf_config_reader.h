#pragma once
// Typed reads of config.json's fields, each error naming the file and the field (hf_config.cpp's
// ConfigReader; layer_types for every reader of per-layer kinds).
#include <cstdint>
#include <limits>
#include <optional>
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

// layer_types (transformers v4.54 on: every layer's kind, deciding over the flags it replaces):
// whether each layer is windowed (sliding_attention); nullopt when the field is absent or null.
inline std::optional<std::vector<bool>> hf_layer_types(const nlohmann::json& j, int n_layers,
                                                       const std::string& source) {
  if (!j.contains("layer_types") || j["layer_types"].is_null()) return std::nullopt;
  const nlohmann::json& lt = j["layer_types"];
  if (!lt.is_array() || int(lt.size()) != n_layers)
    fail("{}: field 'layer_types' must list one kind per layer ({} layers)", source, n_layers);
  std::vector<bool> windowed;
  for (const nlohmann::json& t : lt) {
    if (!t.is_string() || (t != "full_attention" && t != "sliding_attention"))
      fail("{}: layer kind {} is not supported (config.json field layer_types)", source, t.dump());
    windowed.push_back(t == "sliding_attention");
  }
  return windowed;
}

}  // namespace kvp
