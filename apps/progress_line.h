#pragma once
// One line on stderr that long work rewrites in place ("[synth] writing: 3.2 of 13.5 GB"), shown
// only when stderr is a terminal (a log or a pipe gets none of it): at most ten updates a second
// and the last of each stage; cleared when the work ends, so what follows starts on a clean line.
#include <chrono>
#include <cstddef>
#include <string>

namespace kvp::cli {

class ProgressLine {
 public:
  explicit ProgressLine(std::string tag);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  // "what: done of total", or with `unit` "bytes", "what: 3.2 of 13.5 GB".
  void show(const std::string& what, size_t done, size_t total, const char* unit = "");
  // Blanks the line (the destructor does too), before a message of one's own.
  void clear();

 private:
  std::string tag_;
  bool on_;
  size_t width_ = 0;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace kvp::cli
