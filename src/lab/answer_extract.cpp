#include "lab/answer_extract.h"

#include "tokenizer/tokenizer_impl.h"

namespace kvp {
namespace {

// One number: optional sign and "$", digits with optional thousands commas, optional decimals.
// A comma or "." is only taken when digits follow, so "3, 4" is two numbers and "18." is 18.
constexpr const char* kNumber = R"(-?\$?(?:\d(?:,?\d)*)(?:\.\d+)?|-?\$?\.\d+)";

const tok::Regex& number_regex() {
  static const tok::Regex re(kNumber, "answer_extract");
  return re;
}

const tok::Regex& strict_regex() {
  // \K keeps the number alone in the match; "#### $18" is accepted as well (lm-eval would not).
  static const tok::Regex re(std::string(R"(####\s*\K(?:)") + kNumber + ")", "answer_extract");
  return re;
}

}  // namespace

std::optional<std::string> normalize_number(std::string_view s) {
  std::string t;
  for (char c : s)
    if (c != ',' && c != '$' && c != ' ') t += c;
  while (!t.empty() && t.back() == '.') t.pop_back();
  bool neg = false;
  if (!t.empty() && (t[0] == '-' || t[0] == '+')) {
    neg = t[0] == '-';
    t.erase(0, 1);
  }
  const size_t dot = t.find('.');
  std::string ip = t.substr(0, dot), fp = dot == std::string::npos ? "" : t.substr(dot + 1);
  if (ip.empty() && fp.empty()) return std::nullopt;
  for (char c : ip + fp)
    if (c < '0' || c > '9') return std::nullopt;
  ip.erase(0, ip.find_first_not_of('0'));
  if (ip.empty()) ip = "0";
  while (!fp.empty() && fp.back() == '0') fp.pop_back();
  std::string out = fp.empty() ? ip : ip + "." + fp;
  if (neg && out != "0") out = "-" + out;
  return out;
}

std::optional<std::string> extract_strict(std::string_view text) {
  const auto m = strict_regex().find_all(text);
  if (m.empty()) return std::nullopt;
  return normalize_number(text.substr(m[0].first, m[0].second - m[0].first));
}

std::optional<std::string> extract_flexible(std::string_view text) {
  const auto m = number_regex().find_all(text);
  for (auto it = m.rbegin(); it != m.rend(); ++it)
    if (auto n = normalize_number(text.substr(it->first, it->second - it->first))) return n;
  return std::nullopt;
}

}  // namespace kvp
