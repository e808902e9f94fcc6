#include "lab/merge_shards.h"

#include <filesystem>

#include "core/error.h"
#include "lab/compare.h"
#include "lab/compare_merge.h"
#include "lab/gsm8k_eval.h"
#include "lab/gsm8k_merge.h"
#include "lab/results_manifest.h"

namespace kvp {
namespace fs = std::filesystem;

namespace {

enum class Kind { Compare, Gsm8k };

Kind study_kind(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) fail("merge: {}: does not exist", dir);
  if (!fs::is_directory(dir, ec)) fail("merge: {}: not a directory (merge takes the shards' --out directories)", dir);
  if (fs::exists(path_in(dir, kGsm8kManifestFile), ec)) return Kind::Gsm8k;
  if (is_compare_dir(dir)) return Kind::Compare;
  fail("merge: {}: neither a compare nor an `eval gsm8k` output directory (no {} recording a compare run, no {})", dir,
       kResultsManifestFile, kGsm8kManifestFile);
}

}  // namespace

MergeSummary merge_shards(const std::vector<std::string>& dirs, const std::string& out_dir) {
  if (dirs.empty()) fail_usage("merge: give the shard directories to join");
  const Kind kind = study_kind(dirs.front());
  for (size_t i = 1; i < dirs.size(); ++i)
    if (study_kind(dirs[i]) != kind)
      fail("merge: {} is {} folder but {} is not; merge joins shards of one study", dirs.front(),
           kind == Kind::Compare ? "a compare" : "an `eval gsm8k`", dirs[i]);
  MergeSummary s = kind == Kind::Compare ? merge_compare(dirs, out_dir) : merge_gsm8k(dirs, out_dir);
  s.kind = kind == Kind::Compare ? "compare" : "gsm8k";
  s.results_file = kind == Kind::Compare ? kCompareResultsFile : kGsm8kResultsFile;
  return s;
}

}  // namespace kvp
