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

std::ofstream open_timing_log(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > 0) {
    std::ifstream in(path, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.back() != '\n') {
      const size_t keep = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
      std::filesystem::resize_file(path, keep, ec);
      if (ec) fail("{}: cannot cut its torn last line: {}", path, ec.message());
    }
  }
  std::ofstream out(path, std::ios::app | std::ios::binary);
  if (!out) fail("{}: cannot open for appending", path);
  return out;
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

}  // namespace kvp
