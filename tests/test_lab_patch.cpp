// `kvparity patch` on a real model, and the full report (compare + profile + patch) rendered by
// headless Chromium: the charts must be in the rendered DOM with the data points of summary.json.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "core/atomic_file.h"
#include "lab/compare.h"
#include "lab/layer_profile.h"
#include "lab/patching.h"
#include "lab/report.h"
#include "test_util.h"

namespace kvp {
namespace {

PatchOptions village_bf16(const std::string& model, const std::string& tok) {
  PatchOptions o;
  o.model = model;
  o.tokenizer = tok;
  o.prompt = "In a small village by the sea,";
  o.dtype = DType::BF16;
  o.kernels = KernelPolicy::Standard;
  o.max_new_tokens = 48;
  o.continuation = 8;
  return o;
}

TEST(LabPatch, TableHasOneRowPerLayerAndKindAndReferencePatchesChangeNothing) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  PatchOptions o = village_bf16(model, tok);
  o.kernels = KernelPolicy::Reference;  // both paths bitwise equal: patching copies identical values
  o.max_new_tokens = 12;
  o.step = 6;
  const PatchResult r = run_patch(o);
  EXPECT_EQ(r.first_divergence, -1);
  EXPECT_EQ(r.on_token, r.off_token);
  EXPECT_EQ(r.unpatched_max_abs_logit_diff, 0.0);
  ASSERT_EQ(r.rows.size(), 2u * (5 + 1));
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const auto& row = r.rows[i];
    EXPECT_EQ(row.kind, i < 6 ? "residual" : "kv");
    EXPECT_EQ(row.layer, i % 6 == 5 ? -1 : int(i % 6));
    EXPECT_TRUE(row.next_follows_off);
    EXPECT_EQ(row.max_abs_logit_diff_to_off, 0.0) << row.kind << " " << row.layer;
    EXPECT_EQ(row.continuation_agree, 8) << row.kind << " " << row.layer;
  }
  const auto j = patch_json(r, o);
  EXPECT_EQ(j["rows"][5]["layer"], "all");
  EXPECT_EQ(j["kv_positions"], nlohmann::json::array({0, r.position}));
}

TEST(LabPatch, PatchingTheLastResidualMakesCacheOnPickCacheOffsToken) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  const PatchResult r = run_patch(village_bf16(model, tok));
  ASSERT_GE(r.first_divergence, 1) << "bf16 standard paths are expected to part on this prompt within 48 tokens";
  EXPECT_EQ(r.step, r.first_divergence);
  EXPECT_NE(r.on_token, r.off_token);
  EXPECT_GT(r.unpatched_max_abs_logit_diff, 0.0);
  // The last layer's residual is all the final norm and the head see: with cache OFF's values the
  // decode row must choose cache OFF's token, and the logits may differ only by the head's shape.
  const int L = 5;
  for (int i : {L - 1, L}) {
    const PatchRow& row = r.rows[size_t(i)];
    EXPECT_EQ(row.kind, "residual");
    EXPECT_TRUE(row.next_follows_off) << "layer " << row.layer;
    EXPECT_LT(row.max_abs_logit_diff_to_off, r.unpatched_max_abs_logit_diff);
  }
  // Patching only a slice of the cache leaves the rows outside it alone.
  PatchOptions sliced = village_bf16(model, tok);
  sliced.kv_begin = 0;
  sliced.kv_end = 4;
  const PatchResult s = run_patch(sliced);
  EXPECT_EQ(s.kv_begin, 0);
  EXPECT_EQ(s.kv_end, 4);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The <svg>…</svg> element whose aria-label starts with `label`, from a serialized DOM.
std::string svg_with_label(const std::string& dom, const std::string& label) {
  const size_t at = dom.find("aria-label=\"" + label);
  if (at == std::string::npos) return "";
  const size_t begin = dom.rfind("<svg", at), end = dom.find("</svg>", at);
  return end == std::string::npos ? "" : dom.substr(begin, end + 6 - begin);
}

struct Point {
  std::string series;
  double x = 0, y = 0;
};

std::vector<Point> points_of(const std::string& svg) {
  std::vector<Point> out;
  static const std::regex circle(R"re(<circle class="point"[^>]*data-series="([^"]*)" data-x="([^"]*)" data-y="([^"]*)")re");
  for (std::sregex_iterator it(svg.begin(), svg.end(), circle), end; it != end; ++it)
    out.push_back({(*it)[1].str(), std::stod((*it)[2].str()), std::stod((*it)[3].str())});
  return out;
}

TEST(LabReport, HeadlessChromiumRendersEveryChartWithTheSummaryData) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  if (std::system("command -v chromium >/dev/null 2>&1") != 0)
    GTEST_FAIL() << "chromium is not installed (scripts/setup.sh installs the Debian package 'chromium')";
  test::TempDir tmp;
  CompareOptions c;
  c.model = model;
  c.prompts = load_prompts("builtin:stories");
  c.prompts.resize(4);
  Condition half;
  half.dtype = half.kv_dtype = DType::F16;
  c.conditions = {half};
  add_fp32_controls(c.conditions);
  c.max_new_tokens = 24;
  c.out_dir = tmp.path();
  run_compare(c);
  ProfileOptions p;
  p.model = model;
  p.step = 20;
  p.dtypes = {DType::F32, DType::F16, DType::BF16};
  write_file_atomic(tmp.file("profile.json"), profile_json(run_profile(p), p).dump(2));
  const PatchOptions po = village_bf16(model, tok);
  write_file_atomic(tmp.file("patch.json"), patch_json(run_patch(po), po).dump(2));
  const nlohmann::json summary = write_reports(tmp.path());

  const std::string cmd = "timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage "
                          "--disable-quic --no-first-run --disable-background-networking --disable-component-update "
                          "--disable-sync --user-data-dir=" + tmp.file("chromium-profile") +
                          " --dump-dom file://" + tmp.file("report.html") + " >" + tmp.file("dom.html") + " 2>" +
                          tmp.file("chromium.err");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_text(tmp.file("chromium.err"));
  const std::string dom = read_text(tmp.file("dom.html"));
  ASSERT_NE(dom.find("</html>"), std::string::npos) << "Chromium produced no document";

  // Per-step curves: one series per condition, one point per step with a positive median.
  const std::string logit = svg_with_label(dom, "Per-step max |Δlogit|");
  ASSERT_FALSE(logit.empty());
  std::map<std::string, int> per_series;
  for (const Point& pt : points_of(logit)) ++per_series[pt.series];
  ASSERT_EQ(per_series.size(), 2u);
  for (const auto& cond : summary["conditions"]) {
    int positive = 0;
    for (const auto& v : cond["per_step"]["max_abs_logit_diff_median"]) positive += v.is_number() && v.get<double>() > 0;
    EXPECT_EQ(per_series[cond["condition"].get<std::string>()], positive) << cond["condition"];
  }
  ASSERT_FALSE(svg_with_label(dom, "Per-step KL").empty());

  // The layer profile: every plotted point is the summary's value for that dtype and layer.
  const std::string resid = svg_with_label(dom, "max |ON − OFF| of the residual stream");
  ASSERT_FALSE(resid.empty());
  const auto pts = points_of(resid);
  int expected = 0;
  for (const auto& prof : summary["layer_profile"]["profiles"])
    for (const auto& layer : prof["layers"]) expected += layer["resid_post"]["max"].get<double>() > 0;
  EXPECT_EQ(int(pts.size()), expected);
  EXPECT_GT(expected, 5);
  for (const Point& pt : pts) {
    const nlohmann::json* prof = nullptr;
    for (const auto& pr : summary["layer_profile"]["profiles"])
      if (pr["dtype"] == pt.series) prof = &pr;
    ASSERT_NE(prof, nullptr) << pt.series;
    EXPECT_EQ(pt.y, (*prof)["layers"][size_t(pt.x)]["resid_post"]["max"].get<double>()) << pt.series << " " << pt.x;
  }
  ASSERT_FALSE(svg_with_label(dom, "max |cached − recomputed| K").empty());

  // The divergence histogram has one bar per bin per condition, and the patching table one row per layer + all.
  const std::string hist = svg_with_label(dom, "First divergence index");
  size_t bars = 0;
  for (size_t at = hist.find("class=\"bar\""); at != std::string::npos; at = hist.find("class=\"bar\"", at + 1)) ++bars;
  EXPECT_GT(bars, 0u);
  const size_t table = dom.find("<table class=\"patching\">");
  ASSERT_NE(table, std::string::npos);
  const std::string patching = dom.substr(table, dom.find("</table>", table) - table);
  size_t rows = 0;
  for (size_t at = patching.find("<tr>"); at != std::string::npos; at = patching.find("<tr>", at + 1)) ++rows;
  EXPECT_EQ(rows, 1u + 5u + 1u);
}

}  // namespace
}  // namespace kvp
