// The report writers without a model: chart axes and zero handling, the manifest header, the GSM8K
// table's skipped counts and invariant marks, and the errors of `kvparity report DIR`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "lab/gsm8k_report.h"
#include "lab/report.h"
#include "lab/report_header.h"
#include "lab/svg_chart.h"
#include "test_util.h"

namespace kvp {
namespace {

using json = nlohmann::json;

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

std::vector<std::string> matches(const std::string& s, const std::string& re, int group = 1) {
  std::vector<std::string> out;
  const std::regex r(re);
  for (std::sregex_iterator it(s.begin(), s.end(), r), end; it != end; ++it) out.push_back((*it)[group].str());
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ReportCharts, NiceTicksUseOneTwoFiveStepsAndIntegersForIndices) {
  EXPECT_EQ(nice_ticks(0, 23, 8, true), (std::vector<double>{0, 5, 10, 15, 20}));
  EXPECT_EQ(nice_ticks(0, 127, 8, true), (std::vector<double>{0, 20, 40, 60, 80, 100, 120}));
  EXPECT_EQ(nice_ticks(0, 4, 8, true), (std::vector<double>{0, 1, 2, 3, 4}));  // never half a layer
  EXPECT_EQ(nice_ticks(0, 1000, 5, true), (std::vector<double>{0, 200, 400, 600, 800, 1000}));
  const auto frac = nice_ticks(0, 1, 5, false);
  ASSERT_EQ(frac.size(), 6u);
  for (size_t i = 0; i < frac.size(); ++i) EXPECT_NEAR(frac[i], 0.2 * double(i), 1e-12);
  EXPECT_EQ(nice_ticks(7, 7, 5, true), (std::vector<double>{7}));
  EXPECT_TRUE(nice_ticks(5, 1, 5, true).empty());
  // An axis starts where its data starts, not at the first round number after it.
  EXPECT_EQ(axis_ticks(1, 64, 8, true), (std::vector<double>{1, 10, 20, 30, 40, 50, 60}));
  EXPECT_EQ(axis_ticks(3, 40, 8, true), (std::vector<double>{3, 10, 15, 20, 25, 30, 35, 40}));  // 5 is too close
  EXPECT_EQ(axis_ticks(0, 23, 8, true), (std::vector<double>{0, 5, 10, 15, 20}));
}

Series series(const std::string& name, std::vector<double> y) {
  Series s{name, {}, std::move(y)};
  for (size_t i = 0; i < s.y.size(); ++i) s.x.push_back(double(i));
  return s;
}

TEST(ReportCharts, LineChartXAxisHasNiceTicksFromTheFirstStep) {
  // The first non-zero value is at step 3; the axis must still start at step 0.
  std::vector<double> y(24, 1e-3);
  y[0] = y[1] = y[2] = 0;
  const std::string svg = svg_line_chart("t", "step", "v", {series("a", y)}, true);
  EXPECT_EQ(matches(svg, R"re(class="xtick"[^>]*>([^<]*)<)re"), (std::vector<std::string>{"0", "5", "10", "15", "20"}));
  // Linear axes get nice ticks too, with decimals only as far as the step needs.
  const std::string lin = svg_line_chart("t", "step", "v", {series("a", {0.05, 0.3, 0.1})}, false);
  EXPECT_EQ(matches(lin, R"re(class="ytick"[^>]*>([^<]*)<)re"),
            (std::vector<std::string>{"0.0", "0.1", "0.2", "0.3"}));
}

TEST(ReportCharts, LogChartDrawsExactZerosOnTheFloorMarkedExact) {
  const std::string svg =
      svg_line_chart("t", "step", "v", {series("standard", {1e-3, 0, 2e-2}), series("invariant", {0, 0, 0})}, true);
  ASSERT_EQ(count(svg, "class=\"zero-floor\""), 1u);
  EXPECT_NE(svg.find(">0 (exact)</text>"), std::string::npos);
  EXPECT_NE(svg.find("invariant (all 0)"), std::string::npos) << "legend note for an all-zero series";
  EXPECT_NE(svg.find("class=\"legend-note\""), std::string::npos);
  const auto floor_y = matches(svg, R"re(class="zero-floor"[^>]* y1="([^"]*)")re");
  ASSERT_EQ(floor_y.size(), 1u);
  // Every zero is a point on the floor, and the all-zero series has a drawn line through them.
  const auto zero_cy = matches(svg, R"re(<circle class="point zero" cx="[^"]*" cy="([^"]*)")re");
  ASSERT_EQ(zero_cy.size(), 4u);
  for (const auto& cy : zero_cy) EXPECT_EQ(cy, floor_y[0]);
  EXPECT_EQ(count(svg, "data-series=\"invariant\" data-x="), 3u);
  const auto d = matches(svg, R"re(<path class="series" data-series="invariant" d="([^"]*)")re");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(count(d[0], "M") + count(d[0], "L"), 3u);
  EXPECT_EQ(count(d[0], floor_y[0]), 3u);
  // Positive values keep their decades; the floor is below the lowest one.
  EXPECT_NE(svg.find(">1e-3</text>"), std::string::npos);
  const auto positive_cy = matches(svg, R"re(<circle class="point" cx="[^"]*" cy="([^"]*)")re");
  ASSERT_EQ(positive_cy.size(), 2u);
  for (const auto& cy : positive_cy) EXPECT_GT(std::stod(floor_y[0]), std::stod(cy));
  // Without zeros there is no floor.
  EXPECT_EQ(svg_line_chart("t", "x", "v", {series("a", {1e-3, 2e-2})}, true).find("zero-floor"), std::string::npos);
}

TEST(ReportCharts, LogChartWithOnlyZerosStillDrawsThem) {
  const std::string svg = svg_line_chart("t", "step", "v", {series("invariant", {0, 0, 0, 0})}, true);
  EXPECT_EQ(svg.find("no data"), std::string::npos);
  EXPECT_EQ(count(svg, "class=\"point zero\""), 4u);
  EXPECT_NE(svg.find("all values 0 (exact)"), std::string::npos);
  EXPECT_NE(svg.find(">0 (exact)</text>"), std::string::npos);
}

TEST(ReportCharts, ChartsScaleToThePageWidth) {
  for (const std::string& svg : {svg_line_chart("t", "x", "v", {series("a", {1, 2})}, false),
                                 svg_bar_chart("t", {"a"}, {series("s", {1})})}) {
    const std::string tag = svg.substr(0, svg.find('>'));
    EXPECT_NE(tag.find("viewBox=\"0 0 "), std::string::npos) << tag;
    EXPECT_NE(tag.find(" width=\"100%\""), std::string::npos) << tag;
    EXPECT_NE(tag.find("max-width:"), std::string::npos) << tag;
    EXPECT_EQ(tag.find(" height=\""), std::string::npos) << "no fixed pixel height: " << tag;
  }
}

TEST(ReportCharts, AllZeroBarChartDrawsItsBarsAndSaysSo) {
  const std::string svg =
      svg_bar_chart("Accuracy", {"greedy", "top-p:0.9"}, {series("fp16 ON", {0, 0}), series("fp16 OFF", {0, 0})});
  EXPECT_EQ(svg.find("no data"), std::string::npos);
  EXPECT_NE(svg.find(">all 0</text>"), std::string::npos);
  const auto heights = matches(svg, R"re(<rect class="bar zero"[^>]* height="([^"]*)")re");
  ASSERT_EQ(heights.size(), 4u);
  for (const auto& h : heights) EXPECT_GT(std::stod(h), 1.0);
  const auto ticks = matches(svg, R"re(class="ytick"[^>]*>([^<]*)<)re");
  EXPECT_EQ(ticks, (std::vector<std::string>{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}));
  // One non-zero bar: no "all 0", and the zero bars are still stubs.
  const std::string some = svg_bar_chart("A", {"g"}, {series("on", {0.5}), series("off", {0})});
  EXPECT_EQ(some.find("all 0"), std::string::npos);
  EXPECT_EQ(count(some, "class=\"bar zero\""), 1u);
  EXPECT_EQ(count(some, "class=\"bar\""), 1u);
  // Counts get integer ticks.
  EXPECT_EQ(matches(svg_bar_chart("H", {"0-3"}, {series("c", {3})}, true), R"re(class="ytick"[^>]*>([^<]*)<)re"),
            (std::vector<std::string>{"0", "1", "2", "3"}));
}

json test_manifest() {
  return {{"kind", "kvparity-results"},
          {"schema_version", 1},
          {"model",
           {{"name", "<b>evil</b> & co.bin"},
            {"path", "/models/x.bin"},
            {"fingerprint", "size=1:fnv1a64-head-tail=00ff"},
            {"config",
             {{"arch", "llama"}, {"n_layers", 5}, {"dim", 64}, {"n_heads", 8}, {"n_kv_heads", 4}, {"vocab_size", 512},
              {"max_seq_len", 512}, {"hidden_dim", 172}}},
            {"tokenizer", {{"path", "/models/tok512.bin"}, {"fingerprint", "size=2:ab"}}}}},
          {"commands",
           {{"patch", {{"settings", {{"step", 3}}}}},
            {"compare",
             {{"settings",
               {{"dtypes", {"fp16", "bf16"}},
                {"seed", "18446744073709551615"},
                {"sampler", {{"kind", "top-p"}, {"p", 0.9}}},
                {"prompts", "```\n<script>alert(1)</script>"}}}}}}}};
}

TEST(ReportHeader, ManifestRendersAsMarkdownAndEscapedHtml) {
  const json m = test_manifest();
  EXPECT_EQ(config_summary(m["model"]["config"]), "llama, 5 layers, dim 64, 8 heads / 4 KV heads, vocab 512, context 512");
  const std::string md = render_manifest_md(m);
  EXPECT_EQ(md.rfind("## Run\n\n````text\n", 0), 0u) << "a fence longer than the ``` in a value: " << md;
  EXPECT_NE(md.find("model        <b>evil</b> & co.bin\n"), std::string::npos) << md;
  EXPECT_NE(md.find("fingerprint  size=1:fnv1a64-head-tail=00ff\n"), std::string::npos);
  EXPECT_NE(md.find("config       llama, 5 layers, dim 64, 8 heads / 4 KV heads, vocab 512, context 512\n"),
            std::string::npos);
  EXPECT_NE(md.find("tokenizer    /models/tok512.bin (size=2:ab)\n"), std::string::npos);
  EXPECT_NE(md.find("  dtypes: [\"fp16\",\"bf16\"]\n"), std::string::npos);
  EXPECT_NE(md.find("  sampler: {\"kind\":\"top-p\",\"p\":0.9}\n"), std::string::npos);
  EXPECT_NE(md.find("  seed: 18446744073709551615\n"), std::string::npos);
  // A value with a newline stays on its line (JSON-escaped), so it cannot start a line of its own.
  EXPECT_NE(md.find("  prompts: \"```\\n<script>alert(1)</script>\"\n"), std::string::npos) << md;
  EXPECT_LT(md.find("compare settings"), md.find("patch settings")) << "commands in the order they run";

  const std::string html = render_manifest_html(m);
  EXPECT_EQ(html.find("<b>evil"), std::string::npos);
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;evil&lt;/b&gt; &amp; co.bin"), std::string::npos);
  EXPECT_NE(html.find("<code>dtypes</code>: [&quot;fp16&quot;,&quot;bf16&quot;]"), std::string::npos);
  EXPECT_NE(html.find("llama, 5 layers, dim 64, 8 heads / 4 KV heads, vocab 512, context 512"), std::string::npos);
  EXPECT_NE(html.find("<h3>compare settings</h3>"), std::string::npos);
  EXPECT_EQ(render_manifest_md(nullptr), "");
  EXPECT_EQ(render_manifest_html(nullptr), "");
}

// A compare record as `compare` writes it, with `steps` teacher-forced steps of constant metrics.
json compare_record(const std::string& prompt, const std::string& kernels, double diff, int steps) {
  json tf = {{"on_token", json::array()}, {"off_token", json::array()}, {"max_abs_logit_diff", json::array()},
             {"mean_abs_logit_diff", json::array()}, {"kl", json::array()}, {"top1_margin", json::array()},
             {"flips", 0}};
  for (int i = 0; i < steps; ++i) {
    tf["on_token"].push_back(1);
    tf["off_token"].push_back(1);
    for (const char* m : {"max_abs_logit_diff", "mean_abs_logit_diff", "kl"}) tf[m].push_back(diff * (i + 1));
    tf["top1_margin"].push_back(1.0);
  }
  return {{"schema_version", 1}, {"prompt_id", prompt}, {"prompt", prompt},
          {"condition", "fp16/kv=fp16/" + kernels + "/greedy"}, {"dtype", "fp16"}, {"kv_dtype", "fp16"},
          {"kernels", kernels}, {"sampler", "greedy"}, {"control", false}, {"seed", 1}, {"max_new_tokens", steps},
          {"first_divergence", nullptr}, {"teacher_forced", tf}};
}

void write_results(const std::string& dir) {
  std::string lines;
  for (const char* p : {"p0", "p1"})
    for (const char* k : {"standard", "invariant"})
      lines += compare_record(p, k, std::string(k) == "invariant" ? 0.0 : 1e-3, 8).dump() + "\n";
  write_file_atomic(dir + "/results.jsonl", lines);
}

TEST(ReportHeader, WriteReportsPutsTheManifestAtTheTopOfEveryReport) {
  test::TempDir tmp;
  write_results(tmp.path());
  write_file_atomic(tmp.file("manifest.json"), test_manifest().dump(2));
  const json summary = write_reports(tmp.path());
  EXPECT_EQ(summary["manifest"], test_manifest());
  EXPECT_EQ(json::parse(read_text(tmp.file("summary.json")))["manifest"], test_manifest());
  const std::string md = read_text(tmp.file("summary.md")), html = read_text(tmp.file("report.html"));
  EXPECT_LT(md.find("## Run"), md.find("| condition |"));
  EXPECT_NE(md.find("docs/metrics.md"), std::string::npos);
  EXPECT_EQ(md.find("DESIGN.md"), std::string::npos);
  EXPECT_LT(html.find("<section class=\"manifest\">"), html.find("<h2>Summary</h2>"));
  EXPECT_NE(html.find("Definitions: docs/metrics.md"), std::string::npos);
  EXPECT_EQ(html.find("<b>evil"), std::string::npos);
  // The invariant condition's all-zero curves are drawn on the floor.
  EXPECT_EQ(count(html, "class=\"point zero\" "), 2u * 8u);
  EXPECT_NE(html.find("fp16/kv=fp16/invariant/greedy (all 0)"), std::string::npos);

  // An old folder (no manifest) renders without the header; a broken manifest is an error.
  std::filesystem::remove(tmp.file("manifest.json"));
  const json old = write_reports(tmp.path());
  EXPECT_FALSE(old.contains("manifest"));
  EXPECT_EQ(read_text(tmp.file("summary.md")).find("## Run"), std::string::npos);
  EXPECT_EQ(read_text(tmp.file("report.html")).find("class=\"manifest\""), std::string::npos);
  write_file_atomic(tmp.file("manifest.json"), "{\"kind\": \"something-else\"}");
  EXPECT_THROW(write_reports(tmp.path()), Error);
  write_file_atomic(tmp.file("manifest.json"), "{\"kind\": ");
  EXPECT_THROW(write_reports(tmp.path()), Error);
}

std::string report_error(const std::string& dir) {
  try {
    write_reports(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ReportDir, MissingFileAndEmptyDirectoriesAreNamedForWhatTheyAre) {
  test::TempDir tmp;
  EXPECT_EQ(report_error(tmp.file("nonexistent")), tmp.file("nonexistent") + ": does not exist");
  write_file_atomic(tmp.file("a-file"), "x");
  EXPECT_NE(report_error(tmp.file("a-file")).find(tmp.file("a-file") + ": not a directory"), std::string::npos);
  const std::string empty = report_error(tmp.path());
  EXPECT_EQ(empty.rfind(tmp.path() + ": no results here", 0), 0u) << empty;
  for (const char* f : {"results.jsonl", "profile.json", "patch.json", "gsm8k.jsonl"})
    EXPECT_NE(empty.find(f), std::string::npos) << f << " in: " << empty;
}

json gsm8k_manifest() {
  return {{"kind", "kvparity-gsm8k"},
          {"settings",
           {{"models",
             {{{"name", "stories260K"},
               {"fingerprint", "size=1:fnv1a64-head-tail=0123"},
               {"tokenizer", "auto"},
               {"config",
                {{"arch", "llama"}, {"n_layers", 5}, {"dim", 64}, {"n_heads", 8}, {"n_kv_heads", 4},
                 {"vocab_size", 512}, {"max_seq_len", 512}}}}}},
            {"conditions", {{{"name", "greedy"}, {"sampler", "greedy"}}}},
            {"dtypes", {"fp16"}},
            {"kernels", {"standard", "invariant"}},
            {"shots", 0},
            {"max_new_tokens", 16},
            {"seed", 1},
            {"data", {{"file", "test.jsonl"}, {"hash", "size=9:fnv1a64=77"}}}}},
          {"shard", {{"index", 0}, {"count", 1}}}};
}

json gsm8k_record(int problem, const std::string& kernels, const std::string& status, bool diverged, int flips) {
  json r = {{"key", std::to_string(problem) + "/stories260K/fp16/" + kernels + "/greedy"},
            {"model", "stories260K"}, {"condition", "greedy"}, {"dtype", "fp16"}, {"kernels", kernels},
            {"status", status}};
  if (status != "ok") return r;
  const json side = {{"correct_strict", false}, {"correct_flexible", false}};
  r["on"] = side;
  r["off"] = side;
  r["diverged"] = diverged;
  r["first_divergence"] = diverged ? json(2) : json(nullptr);
  r["teacher_forced"] = {{"steps", 16}, {"flips", flips}};
  return r;
}

TEST(ReportGsm8k, HtmlShowsSkippedCountsInvariantMarksAndTheManifest) {
  const json m = gsm8k_manifest();
  const std::vector<json> records = {
      gsm8k_record(0, "standard", "ok", true, 1),    gsm8k_record(1, "standard", "skipped", false, 0),
      gsm8k_record(0, "invariant", "ok", false, 0),  gsm8k_record(1, "invariant", "skipped", false, 0),
      gsm8k_record(2, "invariant", "ok", false, 0)};
  const json g = summarize_gsm8k(m, records);
  const std::string html = render_gsm8k_html(g), md = render_gsm8k_md(g);
  EXPECT_EQ(count(html, "(+1 skipped)"), 2u);
  EXPECT_NE(html.find("class=\"skipped-note\""), std::string::npos);
  EXPECT_EQ(count(html, "<span class=\"invariant-holds\">✓</span>"), 1u);
  EXPECT_EQ(html.find("VIOLATED"), std::string::npos);
  // The markdown summary has shown both all along; the two pages must agree.
  EXPECT_EQ(count(md, "(+1 skipped)"), 2u);
  EXPECT_EQ(count(md, " ✓ |"), 1u);
  // Models and settings of the manifest head both pages.
  for (const std::string* page : {&html, &md}) {
    EXPECT_NE(page->find("stories260K"), std::string::npos);
    EXPECT_NE(page->find("size=1:fnv1a64-head-tail=0123"), std::string::npos);
    EXPECT_NE(page->find("llama, 5 layers, dim 64, 8 heads / 4 KV heads, vocab 512, context 512"), std::string::npos);
    EXPECT_NE(page->find("docs/metrics.md"), std::string::npos);
    EXPECT_EQ(page->find("DESIGN.md"), std::string::npos);
  }
  EXPECT_LT(html.find("class=\"manifest\""), html.find("<table class=\"gsm8k\">"));
  EXPECT_NE(html.find("<code>max_new_tokens</code>: 16"), std::string::npos);
  EXPECT_NE(html.find("<code>shard</code>: 0/1"), std::string::npos);
  EXPECT_NE(md.find("\n  shard: 0/1\n"), std::string::npos) << md;
  // Every answer is wrong: the accuracy charts draw their zero bars and say so.
  EXPECT_GE(count(html, ">all 0</text>"), 4u);
  EXPECT_GT(count(html, "class=\"bar zero\""), 0u);

  // A flip under the invariant policy breaks its promise, and the HTML says so too.
  const json bad = summarize_gsm8k(m, {gsm8k_record(0, "invariant", "ok", false, 1)});
  EXPECT_NE(render_gsm8k_html(bad).find("<span class=\"violated\">VIOLATED</span>"), std::string::npos);
}

// Records of a --no-flips run carry teacher_forced: null. A row counts flips over the records that
// have them and says how many did; with none the rate is null and shown as "–", never as 0.
TEST(ReportGsm8k, FlipsNotMeasuredAreNullNotZero) {
  const json m = gsm8k_manifest();
  auto unmeasured = [](int problem, const std::string& kernels, bool diverged) {
    json r = gsm8k_record(problem, kernels, "ok", diverged, 0);
    r["teacher_forced"] = nullptr;
    return r;
  };
  // standard: none measured; invariant: one of two measured (3 flips in 16 steps).
  const json g = summarize_gsm8k(m, {unmeasured(0, "standard", true), unmeasured(1, "standard", false),
                                     gsm8k_record(0, "invariant", "ok", true, 3), unmeasured(1, "invariant", true)});
  ASSERT_EQ(g["rows"].size(), 2u);
  const json &none = g["rows"][0], &some = g["rows"][1];
  EXPECT_EQ(none["kernels"], "standard");
  EXPECT_TRUE(none["token_flip_rate"].is_null());
  EXPECT_EQ(none["flips_measured"], 0);
  EXPECT_EQ(none["steps"], 0);
  EXPECT_DOUBLE_EQ(none["sequence_divergence_rate"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(some["token_flip_rate"].get<double>(), 3.0 / 16);
  EXPECT_EQ(some["flips_measured"], 1);
  EXPECT_EQ(some["n"], 2);
  EXPECT_FALSE(some["invariant_holds"].get<bool>());
  const std::string md = render_gsm8k_md(g), html = render_gsm8k_html(g);
  for (const std::string* page : {&md, &html}) {
    EXPECT_NE(page->find("18.8% (1 of 2)"), std::string::npos) << *page;
    EXPECT_NE(page->find("not measured"), std::string::npos) << *page;
  }
  EXPECT_NE(md.find("| 50.0% | – | 2 |"), std::string::npos) << md;  // divergence, flips, first divergence
  EXPECT_NE(html.find("<td>50.0%</td><td>–</td>"), std::string::npos) << html;

  // Undiverged invariant records without flips keep the promise: divergence alone decides it.
  const json ok = summarize_gsm8k(m, {unmeasured(0, "invariant", false)});
  EXPECT_TRUE(ok["rows"][0]["invariant_holds"].get<bool>());
  EXPECT_NE(render_gsm8k_md(ok).find("| 0.0% ✓ | – | – |"), std::string::npos) << render_gsm8k_md(ok);
  // A record without the field at all is malformed, as before.
  json broken = gsm8k_record(0, "standard", "ok", false, 0);
  broken.erase("teacher_forced");
  EXPECT_THROW(summarize_gsm8k(m, {broken}), Error);
}

}  // namespace
}  // namespace kvp
