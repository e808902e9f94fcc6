// Crash safety of `kvparity compare`: the real binary is SIGKILLed at random moments; after each
// kill its files read back without error (and `kvparity report` renders them), and resuming with
// the same --out finishes with exactly the records of an uninterrupted run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
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

  std::mt19937_64 rng(20261122);
  std::uniform_real_distribution<double> when(0.05, 0.9);
  int kills = 0;
  size_t done = 0;  // records on disk: a resumed run only has the rest to do
  for (int attempt = 0; attempt < 4; ++attempt) {
    const pid_t pid = spawn(compare_args(model, tok, killed), log);
    const double remaining = double(expected.size() - done) / double(expected.size());
    std::this_thread::sleep_for(std::chrono::duration<double>(when(rng) * full_s * remaining));
    if (kill(pid, SIGKILL) != 0) {
      wait_status(pid);
      continue;
    }
    const int st = wait_status(pid);
    if (st == 0) continue;  // it finished before the signal
    ASSERT_EQ(st, 128 + SIGKILL);
    ++kills;
    // Whatever the kill left behind reads back, and the report renders from it.
    if (std::filesystem::exists(killed + "/results.jsonl")) {
      const auto partial = ResultsLog::read_all(killed + "/results.jsonl");
      ASSERT_LE(partial.size(), expected.size());
      done = partial.size();
      for (size_t i = 0; i < partial.size(); ++i) EXPECT_EQ(partial[i], expected[i]) << "record " << i;
      if (!partial.empty()) {
        const std::string cmd = std::string(KVPARITY_BIN) + " report " + killed + " >>" + log + " 2>&1";
        EXPECT_EQ(std::system(cmd.c_str()), 0) << "report after kill " << kills;
      }
    }
  }
  EXPECT_GE(kills, 2) << "the runs kept finishing before the signal; nothing was tested";

  ASSERT_EQ(wait_status(spawn(compare_args(model, tok, killed), log)), 0);
  const auto resumed = ResultsLog::read_all(killed + "/results.jsonl");
  ASSERT_EQ(resumed.size(), expected.size());
  for (size_t i = 0; i < resumed.size(); ++i) EXPECT_EQ(resumed[i], expected[i]) << "record " << i;
}

}  // namespace
}  // namespace kvp
