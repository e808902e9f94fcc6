#pragma once
// Provenance at the top of every report: which model (name, fingerprint, config) and which settings
// produced the numbers. Compare/profile/patch folders carry it in DIR/manifest.json, GSM8K folders
// in gsm8k_manifest.json; folders written before manifests existed render without a header.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lab/results_manifest.h"

namespace kvp {

// Style shared by the report pages. Charts scale with the page (their viewBox) up to a width at
// which their text is still a normal reading size.
inline constexpr const char* kReportCss =
    "body{font-family:system-ui,sans-serif;margin:2em auto;padding:0 2em;max-width:1400px}"
    "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
    "th{background:#f4f4f4}td:first-child{text-align:left}"
    "svg.chart{display:block;width:100%;height:auto;max-width:1400px;margin:1em 0}"
    ".manifest td,.manifest th{text-align:left}.manifest ul.settings{list-style:none;padding-left:.5em;"
    "font-size:13px}code{font-size:12px}";

// DIR/manifest.json is read with read_results_manifest (results_manifest.h): null when the folder
// has none; one that is there but unreadable is an error, since a report that silently dropped it
// would look like an old folder.

// "llama, 5 layers, dim 64, 8 heads / 4 KV heads, vocab 512, context 512" from a config object;
// fields it lacks are left out.
std::string config_summary(const nlohmann::json& config);

// "key: value" per setting; strings as written, everything else (nested objects and arrays
// included) as compact JSON on the one line.
std::vector<std::string> setting_lines(const nlohmann::json& settings);

// The results manifest ({"kind": "kvparity-results", "model", "commands"}) as a Markdown section
// or an HTML <section>; "" for null.
std::string render_manifest_md(const nlohmann::json& manifest);
std::string render_manifest_html(const nlohmann::json& manifest);

// The GSM8K manifest's settings (its "models" rendered as models, the rest as settings) and shard.
// built_by: the manifest's list of the builds that wrote the records (null where it has none).
std::string render_gsm8k_manifest_md(const nlohmann::json& settings, const nlohmann::json& shard,
                                     const nlohmann::json& built_by = nullptr);
std::string render_gsm8k_manifest_html(const nlohmann::json& settings, const nlohmann::json& shard,
                                       const nlohmann::json& built_by = nullptr);

}  // namespace kvp
