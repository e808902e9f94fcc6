#include "progress_line.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>

namespace kvp::cli {
namespace {

std::string amount(size_t n, size_t total, const std::string& unit) {
  if (unit != "bytes") return fmt::format("{} of {}{}", n, total, unit.empty() ? "" : " " + unit);
  const double scale = total >= 1000000000 ? 1e9 : 1e6;
  return fmt::format("{:.1f} of {:.1f} {}", double(n) / scale, double(total) / scale, scale == 1e9 ? "GB" : "MB");
}

}  // namespace

ProgressLine::ProgressLine(std::string tag) : tag_(std::move(tag)), on_(isatty(STDERR_FILENO) != 0) {}

ProgressLine::~ProgressLine() { clear(); }

void ProgressLine::clear() {
  if (on_ && width_ > 0) std::cerr << '\r' << std::string(width_, ' ') << '\r' << std::flush;
  width_ = 0;
}

void ProgressLine::show(const std::string& what, size_t done, size_t total, const char* unit) {
  if (!on_) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  const std::string line = fmt::format("[{}] {}: {}", tag_, what, amount(done, total, unit));
  std::cerr << '\r' << line;
  if (line.size() < width_) std::cerr << std::string(width_ - line.size(), ' ');
  std::cerr << std::flush;
  width_ = std::max(width_, line.size());
}

}  // namespace kvp::cli
