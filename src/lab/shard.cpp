#include "lab/shard.h"

#include <charconv>
#include <set>

#include "core/error.h"

namespace kvp {

ShardSpec parse_shard(const std::string& spec, const std::string& option) {
  const size_t slash = spec.find('/');
  ShardSpec s;
  auto to_int = [](const std::string& t, int* v) {
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), *v);
    return !t.empty() && ec == std::errc() && p == t.data() + t.size();
  };
  if (slash == std::string::npos || !to_int(spec.substr(0, slash), &s.index) ||
      !to_int(spec.substr(slash + 1), &s.count))
    fail_usage("{}: expected i/n (e.g. 0/4)", spelled_option(option, spec));
  if (s.count < 1 || s.index < 0 || s.index >= s.count)
    fail_usage("{}: need 0 <= i < n (shards are numbered from 0)", spelled_option(option, spec));
  return s;
}

std::optional<ShardSpec> shard_from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("index") || !j["index"].is_number_integer() || !j.contains("count") ||
      !j["count"].is_number_integer())
    return std::nullopt;
  return ShardSpec{j["index"].get<int>(), j["count"].get<int>()};
}

std::vector<std::string> missing_shards(const std::vector<nlohmann::json>& have) {
  std::set<int> seen;
  int count = -1;
  auto field = [](const nlohmann::json& sh, const char* key, int otherwise) {
    return sh.is_object() && sh.contains(key) && sh[key].is_number_integer() ? sh[key].get<int>() : otherwise;
  };
  for (const auto& sh : have) {
    const int c = field(sh, "count", 1);
    if (c < 1 || c > 1000000 || (count >= 0 && c != count)) return {};  // none of them a real shard count
    count = c;
    seen.insert(field(sh, "index", 0));
  }
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i)
    if (!seen.count(i)) out.push_back(std::to_string(i) + "/" + std::to_string(count));
  return out;
}

}  // namespace kvp
