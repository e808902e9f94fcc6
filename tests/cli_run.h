#pragma once
// Runs the built `kvparity` binary as a user's shell would, for the command-line tests.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include "test_util.h"

namespace kvp::test {

struct CliRun {
  int status = -1;
  std::string out, err;
};

inline std::string shell_quoted(const std::string& s) { return "'" + s + "'"; }

// Runs `cmd` through /bin/sh, collecting stdout, stderr and the exit status (128 + signal when
// killed by one).
inline CliRun run_command(const std::string& cmd) {
  TempDir tmp;
  CliRun r;
  FILE* p = popen((cmd + " 2>" + shell_quoted(tmp.file("err"))).c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  std::ifstream e(tmp.file("err"));
  r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  return r;
}

// `args` is passed through /bin/sh: quote paths with shell_quoted().
inline CliRun run_kvparity(const std::string& args) { return run_command(std::string(KVPARITY_BIN) + " " + args); }
// The short forms the CLI tests use (`using test::kvparity; using test::q;`): one definition, so
// that test files compiled together (the unity build) do not define them twice.
inline CliRun kvparity(const std::string& args) { return run_kvparity(args); }
inline std::string q(const std::string& s) { return shell_quoted(s); }

}  // namespace kvp::test
