#pragma once
// `kvparity merge` of `compare --shard i/n` folders: one folder as if the study had run unsharded.
// The shards must hold the same model (by fingerprint: the path may differ from machine to
// machine) and the same compare settings but for the shard, the numerics identity included (a
// shard run on another SIMD target or GPU computed other bits: refused, naming the difference).
// Records come out in the unsharded run's order (condition, then prompt index); a record found in
// two inputs must be identical. The merged manifest pins the settings without the shard, so a
// merge with shards missing is completed by running the unsharded `compare` into it.
#include <string>
#include <vector>

#include "lab/shard.h"

namespace kvp {

// True when `dir` holds a compare run (its manifest.json records one).
bool is_compare_dir(const std::string& dir);

MergeSummary merge_compare(const std::vector<std::string>& dirs, const std::string& out_dir);

}  // namespace kvp
