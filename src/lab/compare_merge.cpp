#include "lab/compare_merge.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "lab/compare.h"
#include "lab/numerics_identity.h"
#include "lab/results_log.h"
#include "lab/results_manifest.h"
#include "lab/side_timing.h"

namespace kvp {
namespace fs = std::filesystem;

bool is_compare_dir(const std::string& dir) {
  if (!fs::exists(path_in(dir, kResultsManifestFile))) return false;
  const nlohmann::json m = read_results_manifest(dir);
  return m["commands"].contains("compare");
}

namespace {

struct Shard {
  std::string dir;
  nlohmann::json model, settings, shard, built_by;
};

Shard read_shard(const std::string& dir) {
  if (!fs::is_directory(dir)) fail("merge: {}: not a directory", dir);
  const nlohmann::json m = read_results_manifest(dir);
  if (m.is_null() || !m["commands"].contains("compare"))
    fail(
        "merge: {}: no compare run recorded in its {} (merge joins `compare --shard` and `eval gsm8k --shard` "
        "folders)",
        dir, kResultsManifestFile);
  const nlohmann::json& entry = m["commands"]["compare"];
  Shard s{dir, m["model"], entry.value("settings", nlohmann::json::object()), nullptr,
          entry.value("built_by", nlohmann::json::array())};
  auto well_formed = [&] {
    if (!s.settings.is_object() || !s.settings.contains("conditions") || !s.settings["conditions"].is_array())
      return false;
    for (const auto& c : s.settings["conditions"])
      if (!c.is_object() || !c.contains("condition") || !c["condition"].is_string()) return false;
    return shard_from_json(s.settings.value("shard", ShardSpec{}.json())).has_value();
  };
  if (!well_formed())
    fail("merge: {}: its compare settings are not a kvparity compare run's", path_in(dir, kResultsManifestFile));
  s.shard = s.settings.value("shard", ShardSpec{}.json());
  s.settings.erase("shard");
  return s;
}

// Where a record goes in the unsharded run's order: its condition's place in the settings, then
// its prompt's index (records written before prompt_index existed keep their input order).
std::pair<size_t, size_t> order_of(const nlohmann::json& r, const std::map<std::string, size_t>& condition_rank,
                                   const std::string& where) {
  const auto c = condition_rank.find(r.value("condition", std::string()));
  if (c == condition_rank.end())
    fail("merge: {}: a record of condition '{}', which its manifest does not list", where,
         r.value("condition", std::string()));
  const auto& i = r.contains("prompt_index") ? r["prompt_index"] : nlohmann::json();
  return {c->second, i.is_number_unsigned() ? i.get<size_t>() : SIZE_MAX};
}

}  // namespace

MergeSummary merge_compare(const std::vector<std::string>& dirs, const std::string& out_dir) {
  if (dirs.empty()) fail_usage("merge: give the shard directories to join");
  std::vector<Shard> shards;
  for (const auto& d : dirs) {
    shards.push_back(read_shard(d));
    const Shard &a = shards.front(), &b = shards.back();
    if (auto diff = json_first_difference(comparable_model(a.model), comparable_model(b.model), "model"); !diff.empty())
      fail("merge: {} and {} hold results of different models ({}); only shards of one study can be merged", a.dir,
           b.dir, diff);
    if (auto diff = json_first_difference(a.settings, b.settings, "settings"); !diff.empty())
      fail("merge: {} and {} were run with different settings ({}{}); only shards of one study can be merged", a.dir,
           b.dir, diff, numerics_difference_hint(diff));
  }
  if (fs::exists(path_in(out_dir, kCompareResultsFile)) || fs::exists(path_in(out_dir, kResultsManifestFile)))
    fail("merge: {} already holds results; merge into an empty directory", out_dir);

  std::map<std::string, size_t> condition_rank;
  for (const auto& c : shards.front().settings["conditions"])
    condition_rank.emplace(c["condition"].get<std::string>(), condition_rank.size());
  struct Placed {
    std::pair<size_t, size_t> order;
    size_t arrival;
    nlohmann::json record;
  };
  std::map<std::string, Placed> merged;  // by prompt id and condition
  std::map<std::string, std::string> origin;
  MergeSummary s;
  for (const Shard& sh : shards) {
    const std::string file = path_in(sh.dir, kCompareResultsFile);
    for (auto& r : ResultsLog::read_all(file)) {
      if (!r.is_object() || !r.contains("prompt_id") || !r["prompt_id"].is_string() || !r.contains("condition") ||
          !r["condition"].is_string())
        fail("merge: {}: a record without a string \"prompt_id\" and \"condition\": {:.120}", file, r.dump());
      const std::string key = r["prompt_id"].get<std::string>() + "\n" + r["condition"].get<std::string>();
      const auto order = order_of(r, condition_rank, file);
      auto [it, inserted] = merged.emplace(key, Placed{order, merged.size(), r});
      if (inserted) {
        origin[key] = sh.dir;
      } else if (it->second.record != r) {
        fail("merge: {} and {} disagree on prompt '{}' of condition {} ({}); the same item must give the same result",
             origin[key], sh.dir, r["prompt_id"].get<std::string>(), r.value("condition", std::string()),
             json_first_difference(it->second.record, r));
      } else {
        ++s.duplicates;
      }
    }
  }
  std::vector<const Placed*> sorted;
  for (const auto& [k, p] : merged) sorted.push_back(&p);
  std::sort(sorted.begin(), sorted.end(), [](const Placed* a, const Placed* b) {
    return std::tie(a->order, a->arrival) < std::tie(b->order, b->arrival);
  });

  nlohmann::json from = nlohmann::json::array(), built_by = nlohmann::json::array();
  std::vector<nlohmann::json> shard_specs;
  for (const Shard& sh : shards) {
    for (const auto& b : sh.built_by)
      if (std::find(built_by.begin(), built_by.end(), b) == built_by.end()) built_by.push_back(b);
    shard_specs.push_back(sh.shard);
    from.push_back({{"dir", sh.dir}, {"shard", sh.shard}});
  }
  s.missing_shards = missing_shards(shard_specs);

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) fail("{}: cannot create output directory: {}", out_dir, ec.message());
  std::string text;
  for (const Placed* p : sorted)
    text += p->record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  const nlohmann::json manifest = {{"kind", "kvparity-results"},
                                   {"schema_version", kResultsManifestSchemaVersion},
                                   {"model", shards.front().model},
                                   {"commands",
                                    {{"compare",
                                      {{"settings", shards.front().settings},
                                       {"files", {kCompareResultsFile}},
                                       {"built_by", built_by},
                                       {"merged_from", from},
                                       {"missing_shards", s.missing_shards}}}}}};
  // Results first: a manifest without results would be resumable into a half-merged directory.
  write_file_atomic(path_in(out_dir, kCompareResultsFile), text);
  write_joined_timing(dirs, out_dir);
  write_file_atomic(path_in(out_dir, kResultsManifestFile), manifest.dump(2) + "\n");
  s.records = merged.size();
  return s;
}

}  // namespace kvp
