#pragma once
// Writes summary.json, summary.md and report.html for a results directory (from results.jsonl).
#include <nlohmann/json.hpp>
#include <string>

namespace kvp {

// Returns the summary it wrote. Throws if the directory holds no results.
nlohmann::json write_reports(const std::string& dir);

std::string render_summary_md(const nlohmann::json& summary);
std::string render_report_html(const nlohmann::json& summary);

}  // namespace kvp
