#pragma once
// "Did you mean": the known name a mistyped one was meant to be, for the command line's
// subcommands and the Python package's option and hook names.
#include <string>
#include <vector>

namespace kvp {

// The name in `names` nearest to `word` by edit distance, or "" when none is close.
std::string nearest_name(const std::string& word, const std::vector<std::string>& names);

}  // namespace kvp
