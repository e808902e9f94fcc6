#include "lab/gsm8k_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/atomic_file.h"
#include "core/error.h"
#include "lab/gsm8k_eval.h"
#include "lab/mcnemar.h"
#include "lab/report_header.h"
#include "lab/results_log.h"
#include "lab/routing_difference.h"
#include "lab/stats.h"
#include "lab/svg_chart.h"

namespace kvp {
namespace {

struct Group {
  std::string model, condition, dtype, kv_dtype, kernels;
  std::string baseline, candidate;  // both sides' full SPECs (from the records)
  int n = 0, skipped = 0, diverged = 0;
  int on_strict = 0, off_strict = 0, on_flex = 0, off_flex = 0;
  int b_strict = 0, c_strict = 0, b_flex = 0, c_flex = 0;
  // Over the records that carry flips (teacher_forced not null); `flips_n` of the n.
  int flips_n = 0;
  int64_t steps = 0, flips = 0;
  std::vector<double> first_div;
  RoutingTally routing;  // a mixture of experts' (the records' teacher_forced.routing)
};

bool get_bool(const nlohmann::json& r, const char* side, const char* field) {
  const auto& s = r.at(side);
  return s.at(field).get<bool>();
}

nlohmann::json rate(int num, int den) { return den > 0 ? nlohmann::json(double(num) / den) : nlohmann::json(nullptr); }

nlohmann::json paired(int on, int off, int b, int c, int n) {
  const McNemar m = mcnemar_exact(b, c);
  return {{"accuracy_on", rate(on, n)},
          {"accuracy_off", rate(off, n)},
          {"delta", n > 0 ? nlohmann::json(double(on - off) / n) : nlohmann::json(nullptr)},
          {"on_only", b},
          {"off_only", c},
          {"mcnemar_p", m.p},
          {"mcnemar_log10_p", m.log10_p}};
}

std::string pct(const nlohmann::json& v) { return v.is_null() ? "–" : fmt::format("{:.1f}%", 100.0 * v.get<double>()); }
std::string signed_pct(const nlohmann::json& v) {
  return v.is_null() ? "–" : fmt::format("{:+.1f} pp", 100.0 * v.get<double>());
}
std::string pval(const nlohmann::json& p) {
  const double v = p["mcnemar_p"].get<double>();
  if (v >= 1e-3) return fmt::format("{:.3g}", v);
  return fmt::format("1e{:.1f}", p["mcnemar_log10_p"].get<double>());
}
std::string median(const nlohmann::json& d) {
  return d["median"].is_null() ? "–" : fmt::format("{:g}", d["median"].get<double>());
}
// Seeds above 2^53 are stored as decimal strings (core/json_u64.h); either way the digits alone.
std::string seed_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string n_with_skipped(const nlohmann::json& r) {
  std::string n = std::to_string(r["n"].get<int>());
  if (r.value("skipped", 0) > 0) n += fmt::format(" (+{} skipped)", r["skipped"].get<int>());
  return n;
}

bool any_skipped(const nlohmann::json& s) {
  for (const auto& r : s["rows"])
    if (r.value("skipped", 0) > 0) return true;
  return false;
}

// The token flip column: "–" when no record of the row measured flips, and how many did when only
// some did. Summaries from before flips_measured measured every record.
std::string flip_cell(const nlohmann::json& r) {
  const int n = r["n"].get<int>(), measured = r.value("flips_measured", n);
  std::string cell = pct(r["token_flip_rate"]);
  if (measured > 0 && measured < n) cell += fmt::format(" ({} of {})", measured, n);
  return cell;
}

bool any_flips_unmeasured(const nlohmann::json& s) {
  for (const auto& r : s["rows"])
    if (r.value("flips_measured", r["n"].get<int>()) < r["n"].get<int>()) return true;
  return false;
}

// The fixed-order kernels (invariant, portable) promise bitwise equality across cache paths,
// threads, batch and prefill chunks — portable across SIMD targets too — not across dtypes, KV
// types or policies: a row checks the promise only when that is all its sides differ in.
// Schema-1 records name no sides: cache OFF vs ON.
bool invariance_applies(const Group& g) {
  if (g.baseline.empty()) return g.kernels == "invariant" || g.kernels == "portable";
  const RunSettings b = RunSpec::parse(g.baseline, "baseline").resolve({});
  const RunSettings c = RunSpec::parse(g.candidate, "candidate").resolve({});
  const bool fixed_order = b.kernels == KernelPolicy::Invariant || b.kernels == KernelPolicy::Portable;
  return fixed_order && b.kernels == c.kernels && b.dtype == c.dtype && b.kv_dtype == c.kv_dtype &&
         b.device == c.device && (b.kernels == KernelPolicy::Portable || b.simd == c.simd);
}

// Column labels of the two sides: ON/OFF for the default pair, else candidate/baseline.
struct SideLabels {
  std::string cand, base, title;
};
SideLabels side_labels(const nlohmann::json& st) {
  const std::string b = st.value("baseline", std::string(kDefaultBaselineSpec));
  const std::string c = st.value("candidate", std::string(kDefaultCandidateSpec));
  if (b == kDefaultBaselineSpec && c == kDefaultCandidateSpec) return {"ON", "OFF", "cache ON vs cache OFF"};
  return {"cand", "base", fmt::format("candidate ({}) vs baseline ({})", c.empty() ? "the options" : c,
                                      b.empty() ? "the options" : b)};
}

constexpr const char* kSkippedNote =
    "Skipped items (prompt longer than the model's context, `--skip-long`) are excluded from n and every rate.";
constexpr const char* kNoFlipsNote =
    "Token flips –: not measured (`--no-flips` skips the teacher-forced pass); \"k of n\": the rate of the k "
    "records that measured them.";

}  // namespace

nlohmann::json summarize_gsm8k(const nlohmann::json& manifest, const std::vector<nlohmann::json>& records) {
  // Rows in the order the study lists models, conditions, dtypes and policies.
  std::map<std::string, int> order;
  auto names = [](const nlohmann::json& arr, const char* field) {
    std::vector<std::string> v;
    for (const auto& e : arr) v.push_back(field ? e.at(field).get<std::string>() : e.get<std::string>());
    return v;
  };
  const auto& st = manifest.at("settings");
  const auto models = names(st.at("models"), "name"), conds = names(st.at("conditions"), "name"),
             dtypes = names(st.at("dtypes"), nullptr), kernels = names(st.at("kernels"), nullptr);
  // No kv_dtypes (null, or a schema-1 study): each dtype's own.
  const auto kv_list = st.value("kv_dtypes", nlohmann::json()).is_array() ? names(st.at("kv_dtypes"), nullptr)
                                                                           : std::vector<std::string>{};
  std::vector<Group> groups;
  for (const auto& m : models)
    for (const auto& c : conds)
      for (const auto& d : dtypes)
        for (const auto& kv : kv_list.empty() ? std::vector<std::string>{d} : kv_list)
          for (const auto& k : kernels) {
            order[m + "\n" + c + "\n" + d + "\n" + kv + "\n" + k] = int(groups.size());
            Group g;
            g.model = m;
            g.condition = c;
            g.dtype = d;
            g.kv_dtype = kv;
            g.kernels = k;
            groups.push_back(std::move(g));
          }
  for (const auto& r : records) {
    const std::string id = r.value("key", std::string("?"));
    try {
      const std::string dtype = r.at("dtype").get<std::string>();
      const auto it = order.find(r.at("model").get<std::string>() + "\n" + r.at("condition").get<std::string>() +
                                 "\n" + dtype + "\n" + r.value("kv_dtype", dtype) + "\n" +
                                 r.at("kernels").get<std::string>());
      if (it == order.end()) fail("record {}: model/condition/dtype/kv_dtype/kernels not in the manifest", id);
      Group& g = groups[size_t(it->second)];
      if (g.baseline.empty() && r.contains("baseline")) {
        g.baseline = r.at("baseline").get<std::string>();
        g.candidate = r.at("candidate").get<std::string>();
      }
      if (r.at("status").get<std::string>() != "ok") {
        ++g.skipped;
        continue;
      }
      ++g.n;
      const bool os = get_bool(r, "on", "correct_strict"), fs_ = get_bool(r, "off", "correct_strict");
      const bool of = get_bool(r, "on", "correct_flexible"), ff = get_bool(r, "off", "correct_flexible");
      g.on_strict += os;
      g.off_strict += fs_;
      g.b_strict += os && !fs_;
      g.c_strict += !os && fs_;
      g.on_flex += of;
      g.off_flex += ff;
      g.b_flex += of && !ff;
      g.c_flex += !of && ff;
      if (r.at("diverged").get<bool>()) {
        ++g.diverged;
        g.first_div.push_back(r.at("first_divergence").get<double>());
      }
      // teacher_forced null: flips not measured (--no-flips). Such a record counts towards neither
      // steps nor flips, so a group that mixes both kinds (records joined by hand; resume and merge
      // refuse to) gets the rate of the records that measured it, and flips_measured says how many;
      // none measured: null. Reading a missing flip as 0 would report agreement nobody checked.
      if (const auto& tf = r.at("teacher_forced"); !tf.is_null()) {
        ++g.flips_n;
        g.steps += tf.at("steps").get<int64_t>();
        g.flips += tf.at("flips").get<int64_t>();
        if (tf.contains("routing")) g.routing.add(tf.at("routing"), r.at("first_divergence"));
      }
    } catch (const nlohmann::json::exception& e) {
      fail("gsm8k record {}: missing or mistyped field ({})", id, e.what());
    }
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& g : groups) {
    if (g.n == 0 && g.skipped == 0) continue;
    nlohmann::json row = {
        {"model", g.model},
        {"condition", g.condition},
        {"dtype", g.dtype},
        {"kv_dtype", g.kv_dtype},
        {"kernels", g.kernels},
        {"baseline", g.baseline.empty() ? nlohmann::json(nullptr) : nlohmann::json(g.baseline)},
        {"candidate", g.candidate.empty() ? nlohmann::json(nullptr) : nlohmann::json(g.candidate)},
        {"n", g.n},
        {"skipped", g.skipped},
        {"strict", paired(g.on_strict, g.off_strict, g.b_strict, g.c_strict, g.n)},
        {"flexible", paired(g.on_flex, g.off_flex, g.b_flex, g.c_flex, g.n)},
        {"sequence_divergence_rate", rate(g.diverged, g.n)},
        {"token_flip_rate", g.steps > 0 ? nlohmann::json(double(g.flips) / double(g.steps)) : nlohmann::json(nullptr)},
        {"flips_measured", g.flips_n},
        {"steps", g.steps},
        {"first_divergence_index", summarize(g.first_div).to_json()}};
    // The invariant policy's promise (docs/metrics.md): both sides agree bit for bit. Without flips
    // divergence alone decides it: an undiverged record has no flips by construction (the forced
    // baseline reuses its own logits along its own trajectory).
    if (invariance_applies(g)) row["invariant_holds"] = g.diverged == 0 && g.flips == 0;
    if (g.routing.records() > 0) {
      row["routing"] = g.routing.to_json();
      if (invariance_applies(g)) row["invariant_holds"] = row["invariant_holds"].get<bool>() && g.routing.layer_flips() == 0;
    }
    rows.push_back(row);
  }
  return {{"schema_version", kGsm8kSchemaVersion},
          {"settings", st},
          {"shard", manifest.value("shard", nlohmann::json())},
          {"built_by", manifest.value("built_by", nlohmann::json())},
          {"records", records.size()},
          {"rows", rows}};
}

// A mixture of experts' rows: where the two sides routed the row a step's token comes from to
// different experts, along the candidate's trajectory (nothing for a dense model).
std::string routing_md(const nlohmann::json& s) {
  std::string md;
  for (const auto& r : s["rows"]) {
    if (!r.contains("routing")) continue;
    if (md.empty())
      md = "\n## Routing\n\nA mixture of experts: at each teacher-forced step, whether the two sides sent the row the "
           "step's token comes from to another set of experts, per sparse layer (docs/metrics.md, \"Routing\"). "
           "Divergences: problems whose first routing difference came at or before their first divergence.\n\n"
           "| model | condition | dtype | KV | kernels | layer-steps routed differently | problems | divergences "
           "after a routing difference |\n|---|---|---|---|---|---|---|---|\n";
    const auto& g = r["routing"];
    const auto& d = g["divergences_after_routing_flip"];
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} of {} |\n", r["model"].get<std::string>(),
                      r["condition"].get<std::string>(), r["dtype"].get<std::string>(),
                      r.value("kv_dtype", r["dtype"].get<std::string>()), r["kernels"].get<std::string>(),
                      pct(g["layer_flip_rate"]), pct(g["prompt_rate"]), d["count"].get<int>(), d["of"].get<int>());
  }
  return md;
}

std::string render_gsm8k_md(const nlohmann::json& s) {
  const auto& st = s["settings"];
  const SideLabels L = side_labels(st);
  std::string md = "# kvparity GSM8K study: accuracy with " + L.title + "\n\n";
  md += render_gsm8k_manifest_md(st, s.value("shard", nlohmann::json()), s.value("built_by", nlohmann::json()));
  md += fmt::format("{} records; {}-shot prompts (lm-eval gsm8k format, first-k train exemplars), max {} new tokens, "
                    "seed {}. Accuracy is exact match of the final number: strict = after \"#### \", flexible = last "
                    "number in the output. Δ = {} − {}; p = exact McNemar test on the paired outcomes. Divergence "
                    "and flips as defined in docs/metrics.md (flips: the baseline teacher-forced along the "
                    "candidate's trajectory); ✓: the invariant kernels' promise (no divergence, no flips) holds.\n\n",
                    s["records"].get<size_t>(), st["shots"].get<int>(), st["max_new_tokens"].get<int>(),
                    seed_text(st["seed"]), L.cand, L.base);
  md += fmt::format("| model | condition | dtype | KV | kernels | n | acc {0} (strict) | acc {1} (strict) | Δ strict | "
                    "p strict | acc {0} (flex) | acc {1} (flex) | Δ flex | p flex | sequence divergence | token flips | "
                    "median first divergence |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
                    L.cand, L.base);
  for (const auto& r : s["rows"]) {
    const auto &a = r["strict"], &f = r["flexible"];
    const std::string n = n_with_skipped(r);
    std::string div = pct(r["sequence_divergence_rate"]);
    if (r.contains("invariant_holds")) div += r["invariant_holds"].get<bool>() ? " ✓" : " **VIOLATED**";
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                      r["model"].get<std::string>(), r["condition"].get<std::string>(), r["dtype"].get<std::string>(),
                      r.value("kv_dtype", r["dtype"].get<std::string>()), r["kernels"].get<std::string>(), n,
                      pct(a["accuracy_on"]), pct(a["accuracy_off"]), signed_pct(a["delta"]), pval(a),
                      pct(f["accuracy_on"]), pct(f["accuracy_off"]), signed_pct(f["delta"]), pval(f), div, flip_cell(r),
                      median(r["first_divergence_index"]));
  }
  if (any_skipped(s)) md += fmt::format("\n{}\n", kSkippedNote);
  if (any_flips_unmeasured(s)) md += fmt::format("\n{}\n", kNoFlipsNote);
  md += routing_md(s);
  return md;
}

std::string render_gsm8k_html(const nlohmann::json& s) {
  auto v = [](const nlohmann::json& x) { return x.is_null() ? 0.0 : x.get<double>(); };
  const SideLabels L = side_labels(s["settings"]);
  // Accuracy: one chart per model, kernel policy and extraction (bars: conditions; series: dtype x
  // path). Divergence: one chart per model (bars: dtypes; series: condition x policy). Few bars per
  // chart keep the labels readable.
  std::vector<std::string> acc_order, div_order, conds;
  std::map<std::string, std::vector<Series>> acc, div;
  std::vector<std::string> dtypes;
  for (const auto& d : s["settings"]["dtypes"]) dtypes.push_back(d.get<std::string>());
  for (const auto& c : s["settings"]["conditions"]) conds.push_back(c["name"].get<std::string>());
  auto index_of = [](const std::vector<std::string>& v, const std::string& x) {
    return size_t(std::find(v.begin(), v.end(), x) - v.begin());
  };
  for (const auto& r : s["rows"]) {
    const std::string model = r["model"].get<std::string>(), kernels = r["kernels"].get<std::string>(),
                      cond = r["condition"].get<std::string>(), dtype = r["dtype"].get<std::string>();
    const std::string kv = r.value("kv_dtype", dtype);
    const std::string grid = kv == dtype ? dtype : dtype + " kv=" + kv;
    const size_t ci = index_of(conds, cond);
    for (const char* ex : {"strict", "flexible"}) {
      const std::string ak = fmt::format("{}, {} kernels, {} extraction", model, kernels, ex);
      if (!acc.count(ak)) acc_order.push_back(ak);
      auto& series = acc[ak];
      for (const char* side : {"on", "off"}) {
        const std::string name = fmt::format("{} {}", grid, side[1] == 'n' ? L.cand : L.base);
        auto it = std::find_if(series.begin(), series.end(), [&](const Series& x) { return x.name == name; });
        if (it == series.end()) {
          series.push_back(Series{name, {}, std::vector<double>(conds.size(), 0.0)});
          it = series.end() - 1;
        }
        if (ci < conds.size()) it->y[ci] = v(r[ex][std::string("accuracy_") + side]);
      }
    }
    if (!div.count(model)) div_order.push_back(model);
    auto& series = div[model];
    const std::string name = cond + " " + kernels + (kv == dtype ? "" : " kv=" + kv);
    auto it = std::find_if(series.begin(), series.end(), [&](const Series& x) { return x.name == name; });
    if (it == series.end()) {
      series.push_back(Series{name, {}, std::vector<double>(dtypes.size(), 0.0)});
      it = series.end() - 1;
    }
    for (size_t i = 0; i < dtypes.size(); ++i)
      if (dtypes[i] == dtype) it->y[i] = v(r["sequence_divergence_rate"]);
  }

  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>kvparity GSM8K study</title>\n"
      "<style>" + std::string(kReportCss) + "table.gsm8k{font-size:12px}table.gsm8k td{padding:3px 6px}"
      "table.gsm8k td{white-space:nowrap}table.gsm8k td:nth-child(-n+5){text-align:left}.violated{color:#b00;font-weight:bold}</style></head><body>\n"
      "<h1>GSM8K: accuracy with " + html_escape(L.title) + "</h1>\n";
  html += render_gsm8k_manifest_html(s["settings"], s.value("shard", nlohmann::json()),
                                     s.value("built_by", nlohmann::json()));
  html += fmt::format("<p>{} records, {}-shot, max {} new tokens, seed {}. Strict = number after \"#### \"; flexible = "
                      "last number. p: exact McNemar on paired outcomes. ✓: the invariant kernels' promise (no "
                      "divergence, no flips) holds.</p>\n",
                      s["records"].get<size_t>(), s["settings"]["shots"].get<int>(),
                      s["settings"]["max_new_tokens"].get<int>(), html_escape(seed_text(s["settings"]["seed"])));
  html += fmt::format("<table class=\"gsm8k\"><tr><th>model</th><th>condition</th><th>dtype</th><th>KV</th>"
                      "<th>kernels</th><th>n</th><th>acc {0} strict</th><th>acc {1} strict</th><th>Δ</th><th>p</th>"
                      "<th>acc {0} flex</th><th>acc {1} flex</th><th>Δ</th><th>p</th><th>sequence divergence</th>"
                      "<th>token flips</th><th>median first divergence</th></tr>\n",
                      L.cand, L.base);
  for (const auto& r : s["rows"]) {
    const auto &a = r["strict"], &f = r["flexible"];
    std::string div = pct(r["sequence_divergence_rate"]);
    if (r.contains("invariant_holds"))
      div += r["invariant_holds"].get<bool>() ? " <span class=\"invariant-holds\">✓</span>"
                                              : " <span class=\"violated\">VIOLATED</span>";
    html += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "</tr>\n",
        html_escape(r["model"].get<std::string>()), html_escape(r["condition"].get<std::string>()),
        html_escape(r["dtype"].get<std::string>()), html_escape(r.value("kv_dtype", r["dtype"].get<std::string>())),
        html_escape(r["kernels"].get<std::string>()), n_with_skipped(r), pct(a["accuracy_on"]), pct(a["accuracy_off"]),
        signed_pct(a["delta"]), pval(a), pct(f["accuracy_on"]), pct(f["accuracy_off"]), signed_pct(f["delta"]), pval(f),
        div, flip_cell(r), median(r["first_divergence_index"]));
  }
  html += "</table>\n";
  if (any_skipped(s))
    html += "<p class=\"skipped-note\">Skipped items (prompt longer than the model's context, <code>--skip-long</code>) "
            "are excluded from n and every rate.</p>\n";
  if (any_flips_unmeasured(s))
    html +=
        "<p class=\"no-flips-note\">Token flips –: not measured (<code>--no-flips</code> skips the "
        "teacher-forced pass); “k of n”: the rate of the k records that measured them.</p>\n";
  html += "<h2>Accuracy: " + html_escape(L.title) + "</h2>\n";
  for (const auto& k : acc_order)
    html += svg_bar_chart("Accuracy (fraction): " + k, conds, acc[k]);
  html += "<h2>Sequence divergence rate per dtype</h2>\n";
  for (const auto& m : div_order)
    html += svg_bar_chart(fmt::format("Share of problems whose {} and {} generations differ: {}", L.cand, L.base, m),
                          dtypes, div[m]);
  html += "<p>Definitions: docs/metrics.md in the kvparity repository.</p>\n</body></html>\n";
  return html;
}

nlohmann::json write_gsm8k_reports(const std::string& dir) {
  const std::string mpath = dir + "/" + kGsm8kManifestFile, rpath = dir + "/" + kGsm8kResultsFile;
  std::ifstream in(mpath);
  if (!in) fail("{}: missing; {} needs the manifest that `eval gsm8k` writes beside it", mpath, rpath);
  const auto manifest = nlohmann::json::parse(in, nullptr, false);
  if (manifest.is_discarded() || !manifest.contains("settings")) fail("{}: not a kvparity gsm8k manifest", mpath);
  const auto records = ResultsLog::read_all(rpath);
  if (records.empty()) fail("{}: no complete records", rpath);
  nlohmann::json g;
  try {
    g = summarize_gsm8k(manifest, records);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: malformed manifest settings ({})", mpath, e.what());
  }
  const nlohmann::json summary = {{"gsm8k", g}};
  write_file_atomic(dir + "/summary.json", summary.dump(2) + "\n");
  write_file_atomic(dir + "/summary.md", render_gsm8k_md(g));
  write_file_atomic(dir + "/report.html", render_gsm8k_html(g));
  return summary;
}

}  // namespace kvp
