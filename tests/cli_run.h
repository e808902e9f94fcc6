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

// `args` is passed through /bin/sh: quote paths with shell_quoted().
inline CliRun run_kvparity(const std::string& args) {
  TempDir tmp;
  const std::string cmd = std::string(KVPARITY_BIN) + " " + args + " 2>" + tmp.file("err");
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
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

inline std::string shell_quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace kvp::test
