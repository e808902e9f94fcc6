#pragma once
// The GSM8K study's tables and charts (issue 7): per model x condition x dtype x kernel policy,
// accuracy with cache ON and OFF (strict and flexible extraction), the paired difference with an
// exact McNemar p-value, sequence divergence rate, token flip rate and first divergence index.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvp {

// Records (and the manifest's settings, for row order) -> {"schema_version", "rows": [...], ...}.
nlohmann::json summarize_gsm8k(const nlohmann::json& manifest, const std::vector<nlohmann::json>& records);

std::string render_gsm8k_md(const nlohmann::json& gsm8k);
std::string render_gsm8k_html(const nlohmann::json& gsm8k);

// Writes summary.json ({"gsm8k": ...}), summary.md and report.html into dir; returns the summary.
nlohmann::json write_gsm8k_reports(const std::string& dir);

}  // namespace kvp
