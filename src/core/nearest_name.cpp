#include "core/nearest_name.h"

#include <algorithm>
#include <limits>

namespace kvp {

std::string nearest_name(const std::string& word, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& n : names) {
    // Levenshtein distance, one row at a time.
    std::vector<size_t> row(n.size() + 1);
    for (size_t j = 0; j <= n.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= word.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= n.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (word[i - 1] == n[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    if (row[n.size()] < best_d) {
      best_d = row[n.size()];
      best = n;
    }
  }
  // A suggestion further than a third of the word away would be a guess, not a typo fix.
  return best_d <= std::max<size_t>(2, word.size() / 3) ? best : "";
}

}  // namespace kvp
