#include "lab/side_timing.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/atomic_file.h"

namespace kvp {

SideTime& SideTime::operator+=(const SideTime& o) {
  seconds += o.seconds;
  passes.seconds += o.passes.seconds;
  passes.passes += o.passes.passes;
  passes.rows += o.passes.rows;
  return *this;
}

nlohmann::json SideTime::to_json() const {
  return {{"seconds", seconds},
          {"pass_seconds", passes.seconds},
          {"passes", passes.passes},
          {"rows", passes.rows},
          {"rows_per_second",
           passes.seconds > 0 ? nlohmann::json(double(passes.rows) / passes.seconds) : nlohmann::json(nullptr)}};
}

namespace {
std::string count(double v) {
  if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  if (v >= 1e4) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.0f}", v);
}
}  // namespace

std::string describe_side_time(const std::string& side, const SideTime& t) {
  std::string s = fmt::format("{} {:.1f} s: {:.1f} s in {} passes of {} rows", side, t.seconds, t.passes.seconds,
                              t.passes.passes, count(double(t.passes.rows)));
  if (t.passes.seconds > 0) s += fmt::format(" ({} rows/s)", count(double(t.passes.rows) / t.passes.seconds));
  return s;
}

// Timing lines are never looked up, so they need no key.
StudyTiming::StudyTiming(const std::string& dir)
    : log_((std::filesystem::path(dir) / kTimingFile).string(), [](const nlohmann::json&) { return std::string(); }) {}

void StudyTiming::group(nlohmann::json what, const SideTime& cand, const SideTime& base, const SideTime* forced) {
  what["candidate"] = cand.to_json();
  what["baseline"] = base.to_json();
  what["teacher_forced"] = forced != nullptr ? forced->to_json() : nlohmann::json(nullptr);
  log_.append(what);
  cand_ += cand;
  base_ += base;
  if (forced != nullptr) {
    forced_ += *forced;
    any_forced_ = true;
  }
  ++groups_;
}

void StudyTiming::print_totals(std::ostream& out, const std::string& cand, const std::string& base) const {
  if (groups_ == 0) return;
  out << fmt::format("time of this run's {} groups (per group: {}):\n", groups_, path());
  out << "  " << describe_side_time("candidate (" + cand + ")", cand_) << "\n";
  out << "  " << describe_side_time("baseline (" + base + ")", base_) << "\n";
  // The teacher-forced pass runs only along sequences that diverged.
  if (any_forced_ && forced_.passes.passes == 0)
    out << "  teacher-forced baseline: no pass (no sequence diverged)\n";
  else if (any_forced_)
    out << "  " << describe_side_time("teacher-forced baseline", forced_) << "\n";
}

void write_joined_timing(const std::vector<std::string>& dirs, const std::string& out_dir) {
  std::string text;
  for (const auto& d : dirs)
    for (const auto& line : ResultsLog::read_all((std::filesystem::path(d) / kTimingFile).string()))
      text += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (!text.empty()) write_file_atomic((std::filesystem::path(out_dir) / kTimingFile).string(), text);
}

}  // namespace kvp
