#pragma once
// Where a study's time goes, side by side: the wall time of a side's calls and the part of it its
// engine spent in forward passes (Engine::pass_totals), with the rows those passes computed. On a
// GPU the passes are the device's work; the rest is the host's loop (sampling, stopping rules,
// kept logits). `compare` and `eval gsm8k` append one line per group of prompts to their folder's
// timing.jsonl and print the totals, so a user can size a whole study from its first groups.
#include <chrono>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "lab/results_log.h"
#include "lab/side_runner.h"

namespace kvp {

inline constexpr const char* kTimingFile = "timing.jsonl";

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

// A merge's timing.jsonl: the lines of every input folder's, in input order (complete lines only:
// a torn last one is left out). Writes nothing when no input has one.
void write_joined_timing(const std::vector<std::string>& dirs, const std::string& out_dir);

// One line: "baseline (cache=off) 203.1 s: 198.2 s in 256 passes of 3.28M rows (16.5k rows/s)".
std::string describe_side_time(const std::string& side, const SideTime& t);

// A run's timing.jsonl and totals.
class StudyTiming {
 public:
  // Opens dir/timing.jsonl for appending, as a ResultsLog: a torn last line (a run killed while
  // writing it) is cut off, so the lines appended after it stay readable.
  explicit StudyTiming(const std::string& dir);
  // Appends a group's line: `what` (the group: model, condition, first item, ...) with
  // "candidate", "baseline" and "teacher_forced" (null when `forced` is) added.
  void group(nlohmann::json what, const SideTime& cand, const SideTime& base, const SideTime* forced);
  // The totals, when a group ran: a header and a line a side.
  void print_totals(std::ostream& out, const std::string& cand, const std::string& base) const;
  const std::string& path() const { return log_.path(); }

 private:
  ResultsLog log_;
  SideTime cand_, base_, forced_;
  size_t groups_ = 0;
  bool any_forced_ = false;
};

}  // namespace kvp
