// Crash safety of `kvparity compare`: the real binary is SIGKILLed at random moments; after each
// kill its files read back without error (and `kvparity report` renders them), and resuming with
// the same --out finishes with exactly the records of an uninterrupted run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "lab/results_log.h"
#include "test_util.h"

namespace kvp {
namespace {

std::vector<std::string> compare_args(const std::string& model, const std::string& tok, const std::string& out) {
  return {KVPARITY_BIN, "compare", "--model", model, "--tokenizer", tok, "--prompts", "builtin:stories",
          "--dtype", "fp16", "--sampler", "greedy,top-p", "--max-new-tokens", "32", "--out", out};
}

pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (freopen(log.c_str(), "a", stdout) == nullptr || freopen(log.c_str(), "a", stderr) == nullptr) _exit(126);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

int wait_status(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

TEST(KillResume, CompareKilledAtRandomMomentsResumesToTheUninterruptedResult) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  test::TempDir tmp;
  const std::string full = tmp.file("full"), killed = tmp.file("killed"), log = tmp.file("log");

  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(wait_status(spawn(compare_args(model, tok, full), log)), 0);
  const double full_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto expected = ResultsLog::read_all(full + "/results.jsonl");
  ASSERT_EQ(expected.size(), 16u * 2u);

  // Each attempt waits until the run has written a random number of further records, then kills
  // it a random few milliseconds later: mid-record, mid-fsync or between records.
  std::mt19937_64 rng(20261122);
  const std::string results = killed + "/results.jsonl";
  auto lines_on_disk = [&] {
    std::ifstream in(results);
    return size_t(std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n'));
  };
  int kills = 0;
  size_t done = 0;  // complete records on disk
  for (int attempt = 0; attempt < 3 && done + 2 < expected.size(); ++attempt) {
    const size_t target = done + 1 + rng() % std::max<size_t>(1, (expected.size() - done) / 3);
    const pid_t pid = spawn(compare_args(model, tok, killed), log);
    int st = -1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(20 * full_s + 60);
    while (lines_on_disk() < target && std::chrono::steady_clock::now() < deadline) {
      if (waitpid(pid, &st, WNOHANG) == pid) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (st != -1) continue;  // it finished before the signal
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20000));
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    const int status = wait_status(pid);
    if (status == 0) continue;
    ASSERT_EQ(status, 128 + SIGKILL);
    ++kills;
    // Whatever the kill left behind reads back, and the report renders from it.
    const auto partial = ResultsLog::read_all(results);
    ASSERT_LE(partial.size(), expected.size());
    ASSERT_GE(partial.size(), done);
    done = partial.size();
    for (size_t i = 0; i < partial.size(); ++i) EXPECT_EQ(partial[i], expected[i]) << "record " << i;
    const std::string cmd = std::string(KVPARITY_BIN) + " report " + killed + " >>" + log + " 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << "report after kill " << kills;
  }
  EXPECT_GE(kills, 2) << "the runs kept finishing before the signal; nothing was tested";

  ASSERT_EQ(wait_status(spawn(compare_args(model, tok, killed), log)), 0);
  const auto resumed = ResultsLog::read_all(killed + "/results.jsonl");
  ASSERT_EQ(resumed.size(), expected.size());
  for (size_t i = 0; i < resumed.size(); ++i) EXPECT_EQ(resumed[i], expected[i]) << "record " << i;
}

}  // namespace
}  // namespace kvp
