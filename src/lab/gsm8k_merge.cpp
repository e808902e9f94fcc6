#include "lab/gsm8k_merge.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "lab/gsm8k_eval.h"
#include "lab/numerics_identity.h"
#include "lab/results_log.h"
#include "lab/side_timing.h"

namespace kvp {
namespace fs = std::filesystem;

namespace {

nlohmann::json read_manifest(const std::string& dir) {
  const std::string path = dir + "/" + kGsm8kManifestFile;
  std::ifstream in(path);
  if (!in) fail("{}: no {} (not an `eval gsm8k` output directory)", dir, kGsm8kManifestFile);
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("settings") || j.value("kind", "") != "kvparity-gsm8k")
    fail("{}: not a kvparity gsm8k manifest", path);
  j["settings"] = gsm8k_settings_with_defaults(j["settings"]);
  return j;
}

}  // namespace

MergeSummary merge_gsm8k(const std::vector<std::string>& dirs, const std::string& out_dir) {
  if (dirs.empty()) fail_usage("merge: give the shard directories to join");
  std::vector<nlohmann::json> manifests;
  for (const auto& d : dirs) {
    manifests.push_back(read_manifest(d));
    if (auto diff = json_first_difference(manifests.front()["settings"], manifests.back()["settings"], "settings");
        !diff.empty())
      fail("merge: {} and {} were run with different settings ({}{}); only shards of one study can be merged",
           dirs.front(), d, diff, numerics_difference_hint(diff));
  }
  if (fs::exists(out_dir + "/" + kGsm8kResultsFile))
    fail("merge: {} already holds {}; merge into an empty directory", out_dir, kGsm8kResultsFile);

  MergeSummary s;
  std::map<std::pair<int, std::string>, nlohmann::json> merged;  // (problem, key): sorted by problem
  std::map<std::string, std::string> origin;
  for (const auto& d : dirs) {
    for (auto& r : ResultsLog::read_all(d + "/" + kGsm8kResultsFile)) {
      if (!r.contains("key") || !r["key"].is_string() || !r.contains("problem") || !r["problem"].is_number_integer())
        fail("{}/{}: a record without \"key\"/\"problem\"", d, kGsm8kResultsFile);
      const std::string key = r["key"].get<std::string>();
      auto [it, inserted] = merged.emplace(std::make_pair(r["problem"].get<int>(), key), r);
      if (inserted) {
        origin[key] = d;
      } else if (it->second != r) {
        fail("merge: {} and {} disagree on record {} ({}); the same item must give the same result", origin[key], d,
             key, json_first_difference(it->second, r));
      } else {
        ++s.duplicates;
      }
    }
  }
  nlohmann::json from = nlohmann::json::array();
  nlohmann::json built_by = nlohmann::json::array();  // every shard's builds, once each, in order
  std::vector<nlohmann::json> shards;
  for (size_t i = 0; i < dirs.size(); ++i) {
    for (const auto& b : manifests[i].value("built_by", nlohmann::json::array()))
      if (std::find(built_by.begin(), built_by.end(), b) == built_by.end()) built_by.push_back(b);
    shards.push_back(manifests[i]["shard"]);
    from.push_back({{"dir", dirs[i]}, {"shard", shards.back()}, {"run", manifests[i].value("run", nlohmann::json())}});
  }
  s.missing_shards = missing_shards(shards);

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) fail("{}: cannot create output directory: {}", out_dir, ec.message());
  std::string text;
  for (const auto& [k, r] : merged) text += r.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  nlohmann::json manifest = {
      {"kind", "kvparity-gsm8k"}, {"settings", manifests.front()["settings"]}, {"shard", {{"index", 0}, {"count", 1}}},
      {"merged_from", from},      {"missing_shards", s.missing_shards},        {"built_by", built_by}};
  // Results first: a manifest without results would be resumable into a half-merged directory.
  write_file_atomic(out_dir + "/" + kGsm8kResultsFile, text);
  write_joined_timing(dirs, out_dir);
  write_file_atomic(out_dir + "/" + kGsm8kManifestFile, manifest.dump(2) + "\n");
  s.records = merged.size();
  return s;
}

}  // namespace kvp
