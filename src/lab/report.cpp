#include "lab/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/atomic_file.h"
#include "core/error.h"
#include "lab/gsm8k_eval.h"
#include "lab/compare.h"
#include "lab/gsm8k_report.h"
#include "lab/layer_profile.h"
#include "lab/patching.h"
#include "lab/report_header.h"
#include "lab/results_log.h"
#include "lab/summary.h"
#include "lab/svg_chart.h"

namespace kvp {
namespace {

std::string num(const nlohmann::json& v) {
  if (v.is_null()) return "–";
  const double d = v.get<double>();
  if (d == 0.0) return "0";
  if (std::fabs(d) >= 1e-2 && std::fabs(d) < 1e4) return fmt::format("{:.4g}", d);
  return fmt::format("{:.3e}", d);
}

std::string patch_layer_label(const nlohmann::json& layer) {
  return layer.is_string() ? layer.get<std::string>() : layer.dump();
}

// What a profile or patch result calls its two sides: the cache study's names, or baseline and
// candidate (results written before SPECs existed are the cache study).
struct SideNames {
  bool default_sides;
  std::string on, off;  // candidate, baseline
};
SideNames side_names(const nlohmann::json& r) {
  const bool d = r.value("default_sides", true);
  return d ? SideNames{true, "cache ON", "cache OFF"} : SideNames{false, "candidate", "baseline"};
}
// A profile's column or series name: its dtype in the cache study, else its condition.
std::string profile_label(const nlohmann::json& lp, const nlohmann::json& p) {
  return side_names(lp).default_sides ? p["dtype"].get<std::string>() : p["condition"].get<std::string>();
}

std::string pct(const nlohmann::json& v) { return v.is_null() ? "–" : fmt::format("{:.1f}%", 100.0 * v.get<double>()); }

// What the study compares, from the settings its conditions' sides differ in.
std::string comparison_title(const nlohmann::json& s) {
  std::vector<std::string> keys;
  bool default_pair = true;
  for (const auto& c : s["conditions"]) {
    for (const auto& k : c.value("differs_in", nlohmann::json::array()))
      if (std::find(keys.begin(), keys.end(), k.get<std::string>()) == keys.end()) keys.push_back(k.get<std::string>());
    default_pair = default_pair && c.value("baseline", std::string()).rfind("cache=off", 0) == 0;
  }
  if (default_pair && keys == std::vector<std::string>{"cache"}) return "cache ON vs cache OFF";
  if (keys.empty()) return "baseline vs candidate (identical settings)";
  std::string what;
  for (const auto& k : keys) what += (what.empty() ? "" : ", ") + k;
  return "baseline vs candidate, differing in " + what;
}

std::string dist(const nlohmann::json& d) {
  return fmt::format("{} / {} / {} / {}", num(d["min"]), num(d["median"]), num(d["p90"]), num(d["max"]));
}

// summary.json allows null per-step medians (no prompt reached the step): a gap, not a zero.
double value_or_nan(const nlohmann::json& v) {
  return v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN();
}

Series indexed_series(const std::string& name, const nlohmann::json& values) {
  Series s{name, {}, {}};
  for (size_t i = 0; i < values.size(); ++i) {
    s.x.push_back(double(i));
    s.y.push_back(value_or_nan(values[i]));
  }
  return s;
}

// A mixture of experts: the layers whose routing differed most often, "L3 (12), L0 (5)".
std::string most_flipping_layers(const nlohmann::json& layer_flips) {
  std::vector<std::pair<long long, int>> v;
  for (size_t l = 0; l < layer_flips.size(); ++l)
    if (layer_flips[l].is_number() && layer_flips[l].get<long long>() > 0)
      v.emplace_back(layer_flips[l].get<long long>(), int(l));
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out;
  for (size_t i = 0; i < std::min<size_t>(3, v.size()); ++i)
    out += fmt::format("{}L{} ({})", out.empty() ? "" : ", ", v[i].second, v[i].first);
  return out.empty() ? "–" : out;
}

struct RoutingRow {
  std::string condition, experts, layer_rate, step_rate, prompt_rate, after_flip, first, layers;
};

// The routing table's rows: conditions of a mixture of experts only (none for a dense model).
std::vector<RoutingRow> routing_rows(const nlohmann::json& s) {
  std::vector<RoutingRow> rows;
  for (const auto& c : s["conditions"]) {
    if (!c.contains("routing")) continue;
    const auto& r = c["routing"];
    const auto& d = r["divergences_after_routing_flip"];
    rows.push_back({c["condition"].get<std::string>(),
                    fmt::format("{} of {}, {} sparse layers", r["experts_per_token"].get<int>(),
                                r["n_experts"].get<int>(), r["sparse_layers"].get<int>()),
                    pct(r["layer_flip_rate"]), pct(r["step_flip_rate"]), pct(r["prompt_rate"]),
                    fmt::format("{} of {}", d["count"].get<int>(), d["of"].get<int>()),
                    num(r["first_routing_difference_index"]["median"]), most_flipping_layers(r["layer_flips"])});
  }
  return rows;
}

constexpr const char* kRoutingNote =
    "Routing (a mixture of experts): at each teacher-forced step, whether the two sides sent the row the step's token "
    "comes from to different experts (another set of k, not another order), per sparse layer. Layer-steps: of all "
    "steps x sparse layers; steps and prompts: with any layer differing; divergences: prompts whose first routing "
    "difference came at or before their first divergence, of those that diverged.";

}  // namespace

std::string render_summary_md(const nlohmann::json& s) {
  std::string md = "# kvparity compare: " + comparison_title(s) + "\n\n";
  if (s.contains("manifest")) md += render_manifest_md(s["manifest"]);
  md += "Both sides of every condition (the baseline is teacher-forced along the candidate's tokens):\n\n"
        "| condition | baseline | candidate |\n|---|---|---|\n";
  for (const auto& c : s["conditions"])
    md += fmt::format("| {} | `{}` | `{}` |\n", c["condition"].get<std::string>(),
                      c.value("baseline", std::string()), c.value("candidate", std::string()));
  md += "\nMetrics as defined in docs/metrics.md. Distributions are min / median / p90 / max over all teacher-forced "
        "steps (first divergence: over the prompts that diverged). Logit difference: prompts with any logit bit "
        "different over the teacher-forced steps.\n\n";
  md += "| condition | prompts | steps | sequence divergence | token flips | logit difference | first divergence | "
        "max \\|Δlogit\\| | mean \\|Δlogit\\| | KL(p_cand‖p_base) |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& c : s["conditions"])
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", c["condition"].get<std::string>(),
                      c["n_prompts"].get<int>(), c["n_steps"].get<int>(), pct(c["sequence_divergence_rate"]),
                      pct(c["token_flip_rate"]), pct(c.value("logit_difference_rate", nlohmann::json())),
                      dist(c["first_divergence_index"]), dist(c["max_abs_logit_diff"]), dist(c["mean_abs_logit_diff"]),
                      dist(c["kl"]));
  if (const auto rows = routing_rows(s); !rows.empty()) {
    md += std::string("\n## Routing\n\n") + kRoutingNote + "\n\n";
    md += "| condition | experts | layer-steps routed differently | steps | prompts | divergences after a routing "
          "difference | median first routing difference | layers differing most |\n|---|---|---|---|---|---|---|---|\n";
    for (const auto& r : rows)
      md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", r.condition, r.experts, r.layer_rate, r.step_rate,
                        r.prompt_rate, r.after_flip, r.first, r.layers);
  }
  if (!s["fp32_control"].empty()) {
    md += "\n## FP32 control\n\nRatio of each metric to the same run in fp32 (log10 = orders of magnitude).\n\n";
    md += "| condition | control | median max \\|Δlogit\\| ratio (log10) | max max \\|Δlogit\\| ratio (log10) | median KL ratio "
          "(log10) | divergence rate (ctrl) | flip rate (ctrl) |\n|---|---|---|---|---|---|---|\n";
    for (const auto& k : s["fp32_control"]) {
      const auto& m = k["metrics"];
      auto r = [&](const char* name) {
        const auto& e = m[name];
        if (e["ratio"].is_null()) return std::string("– (control 0)");
        if (e["log10"].is_null()) return num(e["ratio"]);
        return fmt::format("{} ({:+.1f})", num(e["ratio"]), e["log10"].get<double>());
      };
      md += fmt::format("| {} | {} | {} | {} | {} | {} ({}) | {} ({}) |\n", k["condition"].get<std::string>(),
                        k["control"].get<std::string>(), r("max_abs_logit_diff_median"), r("max_abs_logit_diff_max"),
                        r("kl_median"), pct(m["sequence_divergence_rate"]["value"]),
                        pct(m["sequence_divergence_rate"]["control"]), pct(m["token_flip_rate"]["value"]),
                        pct(m["token_flip_rate"]["control"]));
    }
  }
  if (s.contains("layer_profile")) {
    const auto& lp = s["layer_profile"];
    const SideNames sn = side_names(lp);
    md += fmt::format("\n## Layer profile (step {}, prompt \"{}\")\n\n", lp["step"].get<int>(), lp["prompt"].get<std::string>());
    if (!sn.default_sides)
      md += fmt::format("Baseline `{}`, candidate `{}`; columns name baseline->candidate where the sides differ.\n\n",
                        lp["baseline"].get<std::string>(), lp["candidate"].get<std::string>());
    md += fmt::format("max \\|{} − {}\\| of the residual stream after each layer at the new position, and of K over "
                      "all cached positions.\n\n| layer |",
                      sn.on, sn.off);
    for (const auto& p : lp["profiles"]) md += fmt::format(" {} resid |", profile_label(lp, p));
    for (const auto& p : lp["profiles"]) md += fmt::format(" {} K |", profile_label(lp, p));
    md += "\n|---|";
    for (size_t i = 0; i < 2 * lp["profiles"].size(); ++i) md += "---|";
    md += "\n";
    const size_t L = lp["profiles"].empty() ? 0 : lp["profiles"][0]["layers"].size();
    for (size_t l = 0; l < L; ++l) {
      md += fmt::format("| {} |", l);
      for (const auto& p : lp["profiles"]) md += fmt::format(" {} |", num(p["layers"][l]["resid_post"]["max"]));
      for (const auto& p : lp["profiles"]) {
        double k = 0;
        for (const auto& h : p["layers"][l]["k"]) k = std::max(k, h["max"].get<double>());
        md += fmt::format(" {} |", num(k));
      }
      md += "\n";
    }
  }
  if (s.contains("patching")) {
    const auto& p = s["patching"];
    const SideNames sn = side_names(p);
    md += fmt::format("\n## Patching (step {}, {} {}): {} picks {}, {} picks {}\n\n", p["step"].get<int>(),
                      p["dtype"].get<std::string>(), p["kernels"].get<std::string>(), sn.on, p["on_token"].get<int>(),
                      sn.off, p["off_token"].get<int>());
    if (!sn.default_sides)
      md += fmt::format("Baseline `{}`, candidate `{}`.\n\n", p["baseline"].get<std::string>(),
                        p["candidate"].get<std::string>());
    md += fmt::format("Unpatched max |Δlogit| at the step: {}. Each cell: whose token the patched {} step picks, "
                      "how many of {}'s next {} tokens the patched run reproduces, and max |Δlogit| to {}.\n\n"
                      "| layer | residual: next | residual: continuation | residual: max abs logit diff | KV: next | "
                      "KV: continuation | KV: max abs logit diff |\n|---|---|---|---|---|---|---|\n",
                      num(p["unpatched_max_abs_logit_diff"]), sn.on, sn.off, p["continuation_length"].get<int>(), sn.off);
    const char* follows_off = sn.default_sides ? "OFF" : "baseline";
    const char* follows_on = sn.default_sides ? "ON" : "candidate";
    const auto& rows = p["rows"];
    const size_t half = rows.size() / 2;
    const int cont = p["continuation_length"].get<int>();
    for (size_t i = 0; i < half; ++i) {
      const auto& a = rows[i];
      const auto& b = rows[half + i];
      md += fmt::format("| {} | {} | {}/{} | {} | {} | {}/{} | {} |\n", patch_layer_label(a["layer"]),
                        a["next_follows_off"].get<bool>() ? follows_off : follows_on, a["continuation_agree"].get<int>(), cont,
                        num(a["max_abs_logit_diff_to_off"]), b["next_follows_off"].get<bool>() ? follows_off : follows_on,
                        b["continuation_agree"].get<int>(), cont, num(b["max_abs_logit_diff_to_off"]));
    }
  }
  return md;
}

std::string render_report_html(const nlohmann::json& s) {
  std::vector<Series> logit, kl, hist;
  std::vector<std::string> bins;
  for (const auto& c : s["conditions"]) {
    const std::string name = c["condition"].get<std::string>();
    logit.push_back(indexed_series(name, c["per_step"]["max_abs_logit_diff_median"]));
    kl.push_back(indexed_series(name, c["per_step"]["kl_median"]));
    const auto& h = c["first_divergence_histogram"];
    if (bins.empty())
      for (size_t i = 0; i + 1 < h["edges"].size(); ++i)
        bins.push_back(fmt::format("{}-{}", h["edges"][i].get<int>(), h["edges"][i + 1].get<int>() - 1));
    Series hs{name, {}, {}};
    for (const auto& v : h["counts"]) hs.y.push_back(v.get<double>());
    hist.push_back(hs);
  }
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>kvparity report</title>\n"
      "<style>" + std::string(kReportCss) + "</style></head><body>\n<h1>kvparity: " + html_escape(comparison_title(s)) +
      "</h1>\n";
  if (s.contains("manifest")) html += render_manifest_html(s["manifest"]);
  html += "<h2>Sides</h2>\n<p>The baseline is teacher-forced along the candidate's tokens.</p>\n<table class=\"sides\">"
          "<tr><th>condition</th><th>baseline</th><th>candidate</th></tr>\n";
  for (const auto& c : s["conditions"])
    html += fmt::format("<tr><td>{}</td><td><code>{}</code></td><td><code>{}</code></td></tr>\n",
                        html_escape(c["condition"].get<std::string>()), html_escape(c.value("baseline", std::string())),
                        html_escape(c.value("candidate", std::string())));
  html += "</table>\n";
  html += "<h2>Summary</h2>\n<table><tr><th>condition</th><th>prompts</th><th>sequence divergence</th><th>token flips"
          "</th><th>logit difference</th><th>median first divergence</th><th>median max |Δlogit|</th><th>max max "
          "|Δlogit|</th><th>median KL</th></tr>\n";
  for (const auto& c : s["conditions"])
    html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                        "<td>{}</td></tr>\n",
                        html_escape(c["condition"].get<std::string>()), c["n_prompts"].get<int>(),
                        pct(c["sequence_divergence_rate"]), pct(c["token_flip_rate"]),
                        pct(c.value("logit_difference_rate", nlohmann::json())),
                        num(c["first_divergence_index"]["median"]), num(c["max_abs_logit_diff"]["median"]),
                        num(c["max_abs_logit_diff"]["max"]), num(c["kl"]["median"]));
  html += "</table>\n";
  if (const auto rows = routing_rows(s); !rows.empty()) {
    html += std::string("<h2>Routing</h2>\n<p>") + html_escape(kRoutingNote) +
            "</p>\n<table><tr><th>condition</th><th>experts</th><th>layer-steps routed differently</th><th>steps</th>"
            "<th>prompts</th><th>divergences after a routing difference</th><th>median first routing difference</th>"
            "<th>layers differing most</th></tr>\n";
    for (const auto& r : rows)
      html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                          "</tr>\n",
                          html_escape(r.condition), html_escape(r.experts), r.layer_rate, r.step_rate, r.prompt_rate,
                          r.after_flip, r.first, html_escape(r.layers));
    html += "</table>\n";
  }
  html += "<h2>Divergence over generation</h2>\n";
  html += svg_line_chart("Per-step max |Δlogit| (median over prompts)", "generated token index", "max |Δlogit|",
                         logit, true);
  html += svg_line_chart("Per-step KL(p_cand ‖ p_base) (median over prompts)", "generated token index", "KL", kl, true);
  if (s.contains("layer_profile")) {
    std::vector<Series> resid, kser;
    const auto& lp = s["layer_profile"];
    const SideNames sn = side_names(lp);
    for (const auto& p : lp["profiles"]) {
      Series r{profile_label(lp, p), {}, {}}, k{profile_label(lp, p), {}, {}};
      for (const auto& L : p["layers"]) {
        r.x.push_back(L["layer"].get<double>());
        r.y.push_back(L["resid_post"]["max"].get<double>());
        double km = 0;
        for (const auto& h : L["k"]) km = std::max(km, h["max"].get<double>());
        k.x.push_back(L["layer"].get<double>());
        k.y.push_back(km);
      }
      resid.push_back(r);
      kser.push_back(k);
    }
    html += "<h2>Where divergence is born: layer profile</h2>\n";
    if (sn.default_sides) {
      html += svg_line_chart("max |ON − OFF| of the residual stream after each layer", "layer", "max |Δ|", resid, true);
      html += svg_line_chart("max |cached − recomputed| K entries per layer", "layer", "max |ΔK|", kser, true);
    } else {
      html += fmt::format("<p>Baseline <code>{}</code>, candidate <code>{}</code>.</p>\n",
                          html_escape(lp["baseline"].get<std::string>()), html_escape(lp["candidate"].get<std::string>()));
      html += svg_line_chart("max |candidate − baseline| of the residual stream after each layer", "layer", "max |Δ|",
                             resid, true);
      html += svg_line_chart("max |candidate − baseline| K entries per layer", "layer", "max |ΔK|", kser, true);
    }
  }
  if (s.contains("patching")) {
    const auto& p = s["patching"];
    const SideNames sn = side_names(p);
    const std::string sides =
        sn.default_sides ? std::string()
                         : fmt::format(" Baseline <code>{}</code>, candidate <code>{}</code>.",
                                       html_escape(p["baseline"].get<std::string>()),
                                       html_escape(p["candidate"].get<std::string>()));
    html += fmt::format("<h2>Patching {} into {}</h2>\n<p>Step {} ({} {}): {} picks token {}, {} picks {}.{} Each "
                        "cell: whose token the patched {} step picks, and how many of {}'s next {} tokens the patched "
                        "run reproduces, and max |Δlogit| to {} (unpatched: {}).</p>\n<table class=\"patching\"><tr>"
                        "<th>layer</th><th>residual stream</th><th>KV cache</th></tr>\n",
                        sn.off, sn.on, p["step"].get<int>(), html_escape(p["dtype"].get<std::string>()),
                        html_escape(p["kernels"].get<std::string>()), sn.on, p["on_token"].get<int>(), sn.off,
                        p["off_token"].get<int>(), sides, sn.on, sn.off, p["continuation_length"].get<int>(), sn.off,
                        num(p["unpatched_max_abs_logit_diff"]));
    const char* follows_off = sn.default_sides ? "OFF" : "baseline";
    const char* follows_on = sn.default_sides ? "ON" : "candidate";
    const auto& rows = p["rows"];
    const size_t half = rows.size() / 2;
    for (size_t i = 0; i < half; ++i) {
      auto cell = [&](const nlohmann::json& x) {
        return fmt::format("{} · {}/{} · {}", x["next_follows_off"].get<bool>() ? follows_off : follows_on,
                           x["continuation_agree"].get<int>(), p["continuation_length"].get<int>(),
                           num(x["max_abs_logit_diff_to_off"]));
      };
      html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n", html_escape(patch_layer_label(rows[i]["layer"])),
                          cell(rows[i]), cell(rows[half + i]));
    }
    html += "</table>\n";
  }
  html += "<h2>Where generations part</h2>\n";
  html += svg_bar_chart("First divergence index (prompts per bin)", bins, hist, true);
  html += "<p>Definitions: docs/metrics.md in the kvparity repository. Teacher-forced metrics run the baseline "
          "along the candidate's trajectory; on the log-scale charts the dashed bottom line holds the values that "
          "are exactly 0.</p>\n</body></html>\n";
  return html;
}

nlohmann::json write_reports(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (st.type() == fs::file_type::not_found) fail("{}: does not exist", dir);
  if (ec) fail("{}: cannot read: {}", dir, ec.message());
  if (!fs::is_directory(st)) fail("{}: not a directory (kvparity report takes a results directory)", dir);
  if (fs::exists(path_in(dir, kGsm8kResultsFile))) return write_gsm8k_reports(dir);  // an eval study
  const std::string results = path_in(dir, kCompareResultsFile), profile = path_in(dir, kProfileResultsFile);
  const std::string patch = path_in(dir, kPatchResultsFile);
  const bool have_results = fs::exists(results), have_profile = fs::exists(profile), have_patch = fs::exists(patch);
  if (!have_results && !have_profile && !have_patch)
    fail("{}: no results here: looked for results.jsonl (compare), profile.json (profile), patch.json (patch) and "
         "{} (eval gsm8k); write them with kvparity compare/profile/patch/eval gsm8k --out {}",
         dir, kGsm8kResultsFile, dir);
  const nlohmann::json manifest = read_results_manifest(dir);
  const auto records = have_results ? ResultsLog::read_all(results) : std::vector<nlohmann::json>{};
  if (have_results && records.empty()) fail("{}: no complete records", results);
  nlohmann::json summary = summarize_compare(records);
  if (have_profile) {
    std::ifstream in(profile);
    nlohmann::json p = nlohmann::json::parse(in, nullptr, false);
    if (p.is_discarded() || !p.contains("profiles")) fail("{}: not a kvparity profile", profile);
    summary["layer_profile"] = p;
  }
  if (have_patch) {
    std::ifstream in(patch);
    nlohmann::json p = nlohmann::json::parse(in, nullptr, false);
    if (p.is_discarded() || !p.contains("rows")) fail("{}: not a kvparity patch result", patch);
    summary["patching"] = p;
  }
  if (!manifest.is_null()) summary["manifest"] = manifest;
  write_file_atomic(dir + "/summary.json", summary.dump(2) + "\n");
  write_file_atomic(dir + "/summary.md", render_summary_md(summary));
  write_file_atomic(dir + "/report.html", render_report_html(summary));
  return summary;
}

}  // namespace kvp
