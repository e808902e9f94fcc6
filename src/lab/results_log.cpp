#include "lab/results_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace kvp {
namespace {

// Parses the complete lines of `text`; returns the byte length of the valid prefix.
size_t parse_lines(const std::string& text, const std::string& path, std::vector<nlohmann::json>* out) {
  size_t pos = 0, valid = 0;
  int lineno = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;  // torn last line (no newline): dropped
    ++lineno;
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty()) {
      valid = pos;
      continue;
    }
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      if (pos >= text.size()) break;  // a torn final record followed only by its newline
      fail("{}:{}: corrupt record in the middle of the results file", path, lineno);
    }
    out->push_back(std::move(j));
    valid = pos;
  }
  return valid;
}

}  // namespace

std::vector<nlohmann::json> ResultsLog::read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<nlohmann::json> out;
  parse_lines(ss.str(), path, &out);
  return out;
}

ResultsLog::ResultsLog(std::string path, std::string (*key_of)(const nlohmann::json&))
    : path_(std::move(path)), key_of_(key_of) {
  std::string text;
  {
    std::ifstream in(path_, std::ios::binary);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      text = ss.str();
    }
  }
  const size_t valid = parse_lines(text, path_, &records_);
  for (const auto& r : records_) keys_.insert(key_of_(r));
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("{}: cannot open for writing: {}", path_, std::strerror(errno));
  // Cut a torn tail so the next record starts on a line of its own.
  if (::ftruncate(fd_, off_t(valid)) != 0 || ::lseek(fd_, 0, SEEK_END) < 0)
    fail("{}: cannot truncate the torn last record: {}", path_, std::strerror(errno));
}

ResultsLog::~ResultsLog() {
  if (fd_ >= 0) ::close(fd_);
}

void ResultsLog::append(const nlohmann::json& record) {
  const std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t w = ::write(fd_, line.data() + done, line.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("{}: write failed: {}", path_, std::strerror(errno));
    }
    done += size_t(w);
  }
  if (::fsync(fd_) != 0) fail("{}: fsync failed: {}", path_, std::strerror(errno));
  records_.push_back(record);
  keys_.insert(key_of_(record));
}

}  // namespace kvp
