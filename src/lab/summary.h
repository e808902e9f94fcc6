#pragma once
// Aggregates results.jsonl records into summary.json (schema in docs/results-schema.md).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvp {

// 2: conditions name both sides (baseline, candidate, differs_in) and logit_difference_rate
// replaces batch_vs_solo.
constexpr int kSummarySchemaVersion = 2;

// Records of `kvparity compare` -> {"schema_version", "conditions": [...], "fp32_control": [...]}.
nlohmann::json summarize_compare(const std::vector<nlohmann::json>& records);

}  // namespace kvp
