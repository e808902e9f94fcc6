#include "lab/side_timing.h"

#include <fmt/format.h>

#include <filesystem>
#include <iterator>

#include "core/error.h"

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

StudyTiming::StudyTiming(const std::string& dir) : path_((std::filesystem::path(dir) / kTimingFile).string()) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path_, ec);
  if (!ec && size > 0) {
    std::ifstream in(path_, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!text.empty() && text.back() != '\n') {
      const size_t nl = text.rfind('\n');
      std::filesystem::resize_file(path_, nl == std::string::npos ? 0 : nl + 1, ec);
      if (ec) fail("{}: cannot cut its torn last line: {}", path_, ec.message());
    }
  }
  out_.open(path_, std::ios::app | std::ios::binary);
  if (!out_) fail("{}: cannot open for appending", path_);
}

void StudyTiming::group(nlohmann::json what, const SideTime& cand, const SideTime& base, const SideTime* forced) {
  what["candidate"] = cand.to_json();
  what["baseline"] = base.to_json();
  what["teacher_forced"] = forced != nullptr ? forced->to_json() : nlohmann::json(nullptr);
  out_ << what.dump() << '\n' << std::flush;
  if (!out_) fail("{}: cannot write", path_);
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
  out << fmt::format("time of this run's {} groups (per group: {}):\n", groups_, path_);
  out << "  " << describe_side_time("candidate (" + cand + ")", cand_) << "\n";
  out << "  " << describe_side_time("baseline (" + base + ")", base_) << "\n";
  if (any_forced_) out << "  " << describe_side_time("teacher-forced baseline", forced_) << "\n";
}

}  // namespace kvp
