#pragma once
// `kvparity merge` (and kvparity.merge in Python): joins the --out directories of the shards of
// one study, `compare --shard` runs (compare_merge.h) or `eval gsm8k --shard` runs
// (gsm8k_merge.h), telling the two apart by their manifests. Every input must be of one kind.
#include <string>
#include <vector>

#include "lab/shard.h"

namespace kvp {

MergeSummary merge_shards(const std::vector<std::string>& dirs, const std::string& out_dir);

}  // namespace kvp
