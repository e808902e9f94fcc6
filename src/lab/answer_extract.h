#pragma once
// GSM8K answer extraction as lm-evaluation-harness scores its `gsm8k` task (docs/metrics.md):
//   strict   : the number after "#### " (the format the few-shot exemplars teach);
//   flexible : the last number anywhere in the text, reported separately.
// Numbers are compared in a canonical form so "$1,000.", "1000" and "1000.00" are one answer.
#include <optional>
#include <string>
#include <string_view>

namespace kvp {

// Canonical form of a number as written: drops "$", thousands commas, a trailing ".", a leading
// "+", leading zeros and trailing fractional zeros; "-0" becomes "0". Returns nullopt for text
// that is not a number after that clean-up.
std::optional<std::string> normalize_number(std::string_view s);

// The number following the first "####" (lm-eval's strict-match), normalised.
std::optional<std::string> extract_strict(std::string_view text);

// The last number in the text (lm-eval's flexible-extract), normalised.
std::optional<std::string> extract_flexible(std::string_view text);

}  // namespace kvp
