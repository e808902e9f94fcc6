#include "core/env.h"

#include <cerrno>
#include <cstdlib>

#include "core/error.h"

namespace kvp {
namespace {

// The variable's value, or nullptr when unset or empty (both mean "the default").
const char* value_of(const char* name) {
  const char* e = std::getenv(name);
  return e == nullptr || *e == '\0' ? nullptr : e;
}

}  // namespace

bool env_switch(const char* name, bool unset) {
  const char* e = value_of(name);
  if (e == nullptr) return unset;
  const std::string v = e;
  if (v != "0" && v != "1") fail_usage("{}={}: not 0 or 1", name, v);
  return v == "1";
}

int env_int(const char* name, int unset, int lo, int hi) {
  const char* e = value_of(name);
  if (e == nullptr) return unset;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(e, &end, 10);
  if (end == e || *end != '\0' || errno == ERANGE || v < lo || v > hi)
    fail_usage("{}={}: not an integer in {}..{}", name, e, lo, hi);
  return int(v);
}

}  // namespace kvp
