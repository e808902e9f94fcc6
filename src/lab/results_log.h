#pragma once
// Append-only JSONL results, one record per line, flushed and fsync'ed per record, so a killed run
// loses at most the record in flight. Reopening reads every complete record back (a torn last line
// left by a kill is cut off) so a restarted run can skip what is done.
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace kvp {

class ResultsLog {
 public:
  // `key_of` names a record uniquely (e.g. prompt id + condition).
  ResultsLog(std::string path, std::string (*key_of)(const nlohmann::json&));
  ~ResultsLog();
  ResultsLog(const ResultsLog&) = delete;
  ResultsLog& operator=(const ResultsLog&) = delete;

  const std::vector<nlohmann::json>& records() const { return records_; }
  bool has(const std::string& key) const { return keys_.count(key) != 0; }
  void append(const nlohmann::json& record);
  const std::string& path() const { return path_; }

  // Reads complete records without opening for append (for reports). Missing file: empty.
  static std::vector<nlohmann::json> read_all(const std::string& path);

 private:
  std::string path_;
  std::string (*key_of_)(const nlohmann::json&);
  int fd_ = -1;
  std::vector<nlohmann::json> records_;
  std::set<std::string> keys_;
};

}  // namespace kvp
