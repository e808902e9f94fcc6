#pragma once
// Aggregates results.jsonl records into summary.json (schema in docs/results-schema.md).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvp {

constexpr int kSummarySchemaVersion = 1;

// Records of `kvparity compare` -> {"schema_version", "conditions": [...], "fp32_control": [...]}.
nlohmann::json summarize_compare(const std::vector<nlohmann::json>& records);

}  // namespace kvp
