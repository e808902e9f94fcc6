// The environment switches (core/env.h): defaults when unset or empty, the values each takes, and
// a usage error naming the variable and its value for anything else.
#include "core/env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/error.h"

namespace kvp {
namespace {

constexpr const char* kVar = "KVPARITY_TEST_ENV_SWITCH";

// Sets kVar for one scope (nullptr: unset), and unsets it after.
struct EnvValue {
  explicit EnvValue(const char* v) { v == nullptr ? unsetenv(kVar) : setenv(kVar, v, 1); }
  ~EnvValue() { unsetenv(kVar); }
};

// The usage error `f` throws, naming kVar and `value` (fails when it throws nothing).
template <class F>
void expect_usage_error(const char* value, const F& f) {
  const EnvValue set(value);
  try {
    f();
    ADD_FAILURE() << kVar << "=" << value << " was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::string(kVar) + "=" + value), std::string::npos) << e.what();
  }
}

TEST(Env, SwitchTakesZeroOrOne) {
  for (bool unset : {false, true}) {
    {
      const EnvValue set(nullptr);
      EXPECT_EQ(env_switch(kVar, unset), unset);
    }
    {
      const EnvValue set("");
      EXPECT_EQ(env_switch(kVar, unset), unset);
    }
    {
      const EnvValue set("0");
      EXPECT_FALSE(env_switch(kVar, unset));
    }
    {
      const EnvValue set("1");
      EXPECT_TRUE(env_switch(kVar, unset));
    }
  }
  for (const char* bad : {"yes", "2", "01", " 1", "true"}) expect_usage_error(bad, [] { env_switch(kVar, true); });
}

TEST(Env, IntTakesADecimalInRange) {
  {
    const EnvValue set(nullptr);
    EXPECT_EQ(env_int(kVar, 32, 16, 4096), 32);
  }
  {
    const EnvValue set("16");
    EXPECT_EQ(env_int(kVar, 32, 16, 4096), 16);
  }
  {
    const EnvValue set("4096");
    EXPECT_EQ(env_int(kVar, 32, 16, 4096), 4096);
  }
  for (const char* bad : {"15", "4097", "-1", "64k", "abc", "99999999999999999999", "1.5"})
    expect_usage_error(bad, [] { env_int(kVar, 32, 16, 4096); });
}

}  // namespace
}  // namespace kvp
