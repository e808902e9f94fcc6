#pragma once
// How long a model takes to become ready to run, against the floor for a file that size: mapping
// it and touching every page once (page cache warm). Loading maps the file and keeps the weights
// it can use as stored in the mapping, so the first pass faults them in; "ready" counts that too.
#include <string>
#include <vector>

#include "core/dtype.h"

namespace kvp {

struct LoadTiming {
  std::string dtype;
  double file_bytes = 0;
  double map_touch_s = 0;  // mmap the file, read one byte of every 4 KiB page, no parsing
  double load_s = 0;       // open + parse + build the weights in the compute dtype (copies included)
  double ready_s = 0;      // load_s + touching every page of the weights the passes read
  double ratio() const { return map_touch_s > 0 ? ready_s / map_touch_s : 0; }
};

// Best of `repeats` for each dtype; the file is read once first so that the page cache is warm.
std::vector<LoadTiming> measure_load(const std::string& path, const std::vector<DType>& dtypes, int repeats);

std::string load_table(const std::vector<LoadTiming>& rows);
std::string load_json(const std::vector<LoadTiming>& rows);

}  // namespace kvp
