#pragma once
// Where a study's time goes, side by side: the wall time of a side's calls and the part of it its
// engine spent in forward passes (Engine::pass_totals), with the rows those passes computed. On a
// GPU the passes are the device's work; the rest is the host's loop (sampling, stopping rules,
// kept logits). `eval gsm8k` writes one line per group to timing.jsonl and prints the totals, so
// a user can size a whole study from its first groups.
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "lab/side_runner.h"

namespace kvp {

inline constexpr const char* kGsm8kTimingFile = "timing.jsonl";

struct SideTime {
  double seconds = 0.0;  // wall time of the side's calls
  PassTotals passes;     // the forward passes they ran
  SideTime& operator+=(const SideTime& o);
  // {"seconds", "pass_seconds", "passes", "rows", "rows_per_second" (null before any pass time)}
  nlohmann::json to_json() const;
};

// Runs f() on `side` and returns how long it took and which passes it ran.
template <class F>
SideTime timed(const SideRunner& side, F&& f) {
  const PassTotals p0 = side.pass_totals();
  const auto t0 = std::chrono::steady_clock::now();
  f();
  SideTime t;
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const PassTotals p1 = side.pass_totals();
  t.passes = {p1.seconds - p0.seconds, p1.passes - p0.passes, p1.rows - p0.rows};
  return t;
}

// timing.jsonl opened for appending lines, a torn last line (a run killed while writing it) cut
// off first so that lines appended after it stay readable.
std::ofstream open_timing_log(const std::string& path);

// One line: "cache=off side 203.1 s: 198.2 s in 256 passes of 3.28M rows (16.5k rows/s)".
std::string describe_side_time(const std::string& side, const SideTime& t);

}  // namespace kvp
