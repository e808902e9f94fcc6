#pragma once
// Splitting a study across machines (DESIGN.md §9): `--shard i/n` runs a slice of the items, and
// `kvparity merge` joins the slices' folders. Items are independent and seeded by their ids, so
// the union of the slices is the unsharded study record for record.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kvp {

// "i/n" with 0 <= i < n: this run takes the items whose index is i mod n. Slurm array task ids
// and Kubernetes completion indexes are 0-based, so they can be passed as i directly.
struct ShardSpec {
  int index = 0, count = 1;
  bool takes(size_t item) const { return int(item % size_t(count)) == index; }
  bool whole() const { return count == 1; }
  std::string text() const { return std::to_string(index) + "/" + std::to_string(count); }
  nlohmann::json json() const { return {{"index", index}, {"count", count}}; }
};
// A usage error naming `option` ("--shard" on the command line, "shard" from Python) otherwise.
ShardSpec parse_shard(const std::string& spec, const std::string& option = "--shard");
// A shard as a manifest records it (ShardSpec::json()); nothing when it is not an object with an
// integer "index" and "count" (a hand-edited manifest).
std::optional<ShardSpec> shard_from_json(const nlohmann::json& j);

// What a merge did.
struct MergeSummary {
  std::string kind;          // "compare" or "gsm8k"
  std::string results_file;  // the merged records' file in the output directory
  size_t records = 0;
  size_t duplicates = 0;                    // identical records seen in more than one input
  std::vector<std::string> missing_shards;  // e.g. "2/4", when the inputs share a shard count
};

// The shards ("i/n") that none of `have` (each {"index","count"}, as manifests record them) is,
// when they all share one count; nothing when the counts differ.
std::vector<std::string> missing_shards(const std::vector<nlohmann::json>& have);

}  // namespace kvp
