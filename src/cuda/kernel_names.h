#pragma once
// What a replayed pass's kernel nodes are, by name: `bench --device cuda` prints the tally of a
// decode step's graph, so that a node count above the one the code's fusion predicts says whose
// launches it is (cuBLAS's own split-K reductions, say, or a rounding point left unfused).
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kvp::cuda {

// A kernel's name without namespaces, arguments or return type, its template arguments kept
// (they tell the instances apart): "_ZN3kvp4cuda...decode_kernelILi1ELi4ELb1EEEv..." ->
// "decode_kernel<1, 4, true>". A name that does not demangle is returned as it is, cut to 80.
inline std::string short_kernel_name(const char* mangled) {
  if (mangled == nullptr) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && d != nullptr ? d : mangled;
  std::free(d);
  for (const std::string anon : {"(anonymous namespace)::", "{anonymous}::"})
    for (size_t at; (at = s.find(anon)) != std::string::npos;) s.erase(at, anon.size());
  // The arguments: from the first '(' at template depth 0.
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') ++depth;
    if (s[i] == '>') --depth;
    if (s[i] == '(' && depth == 0) {
      s.resize(i);
      break;
    }
  }
  // The return type: up to the last space at depth 0 (template arguments hold spaces).
  depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') ++depth;
    if (s[i] == '>') --depth;
    if (s[i] == ' ' && depth == 0) start = i + 1;
  }
  s = s.substr(start);
  // The namespaces: up to the last "::" before the template arguments.
  const size_t lt = s.find('<');
  const size_t colons = s.rfind("::", lt == std::string::npos ? std::string::npos : lt);
  if (colons != std::string::npos) s = s.substr(colons + 2);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s.empty() ? "?" : s;
}

// "name x count" for each name, the most frequent first (ties by name), comma-separated.
inline std::string kernel_tally(const std::vector<std::string>& names) {
  std::map<std::string, int> n;
  for (const std::string& s : names) ++n[s];
  std::vector<std::pair<int, std::string>> v;
  for (const auto& [name, count] : n) v.emplace_back(-count, name);
  std::sort(v.begin(), v.end());
  std::string out;
  for (const auto& [neg, name] : v) out += (out.empty() ? "" : ", ") + name + " x" + std::to_string(-neg);
  return out;
}

}  // namespace kvp::cuda
