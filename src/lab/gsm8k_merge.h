#pragma once
// `kvparity merge`: joins the result directories of `eval gsm8k` shards into one. Shards must agree
// on every setting of their manifests (data, exemplars, models' fingerprints, conditions, ...);
// a mismatch is an error naming both directories and the first differing setting. Records are
// independent of how the work was split, so the union is the unsharded result; duplicates must be
// identical.
#include <string>
#include <vector>

#include "lab/shard.h"

namespace kvp {

MergeSummary merge_gsm8k(const std::vector<std::string>& dirs, const std::string& out_dir);

}  // namespace kvp
