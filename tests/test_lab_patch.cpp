// `kvparity patch` on a real model, and the full report (compare + profile + patch) rendered by
// headless Chromium: the charts must be in the rendered DOM with the data points of summary.json,
// exact zeros included (drawn on the log axes' floor).
#include <fmt/format.h>
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
#include "model/checkpoint_export.h"
#include "model/synthetic.h"
#include "tokenizer/tokenizer.h"
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
  bool zero = false;  // drawn on the exact-zero floor
  std::string cy;
};

std::vector<Point> points_of(const std::string& svg) {
  std::vector<Point> out;
  static const std::regex circle(
      R"re(<circle class="point( zero)?" cx="[^"]*" cy="([^"]*)"[^>]*data-series="([^"]*)" data-x="([^"]*)" data-y="([^"]*)")re");
  for (std::sregex_iterator it(svg.begin(), svg.end(), circle), end; it != end; ++it)
    out.push_back({(*it)[3].str(), std::stod((*it)[4].str()), std::stod((*it)[5].str()), (*it)[1].matched,
                   (*it)[2].str()});
  return out;
}

// The y of the dashed exact-zero floor line of a chart ("" when it has none).
std::string zero_floor_y(const std::string& svg) {
  static const std::regex floor(R"re(<line class="zero-floor"[^>]* y1="([^"]*)")re");
  std::smatch m;
  return std::regex_search(svg, m, floor) ? m[1].str() : "";
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
  RunDefaults half;
  half.dtype = DType::F16;
  RunDefaults invariant = half;  // bitwise-equal paths: every per-step metric is exactly 0
  invariant.kernels = KernelPolicy::Invariant;
  add_condition(c, half, SamplerConfig{});
  add_condition(c, invariant, SamplerConfig{});
  add_fp32_controls(c);
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

  const std::string cmd = fmt::format(
      "timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --disable-quic "
      "--no-first-run --disable-background-networking --disable-component-update --disable-sync "
      "--user-data-dir={} --dump-dom file://{} >{} 2>{}",
      tmp.file("chromium-profile"), tmp.file("report.html"), tmp.file("dom.html"), tmp.file("chromium.err"));
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_text(tmp.file("chromium.err"));
  const std::string dom = read_text(tmp.file("dom.html"));
  ASSERT_NE(dom.find("</html>"), std::string::npos) << "Chromium produced no document";

  // Per-step curves: one series per condition, one point per step, the exact zeros on the floor.
  const std::string logit = svg_with_label(dom, "Per-step max |Δlogit|");
  ASSERT_FALSE(logit.empty());
  const std::string floor = zero_floor_y(logit);
  ASSERT_FALSE(floor.empty()) << "the invariant conditions' zeros need the floor line";
  std::map<std::string, int> per_series, zeros;
  for (const Point& pt : points_of(logit)) {
    ++per_series[pt.series];
    if (pt.zero) {
      ++zeros[pt.series];
      EXPECT_EQ(pt.y, 0.0) << pt.series << " " << pt.x;
      EXPECT_EQ(pt.cy, floor) << pt.series << " " << pt.x;
    }
  }
  ASSERT_EQ(per_series.size(), 4u);
  for (const auto& cond : summary["conditions"]) {
    const std::string name = cond["condition"].get<std::string>();
    const auto& medians = cond["per_step"]["max_abs_logit_diff_median"];
    int zero = 0;
    for (const auto& v : medians) zero += v.get<double>() == 0;
    EXPECT_EQ(per_series[name], int(medians.size())) << name;
    EXPECT_EQ(zeros[name], zero) << name;
    if (cond["kernels"] == "invariant") {
      // The invariant series is 0 everywhere, and still drawn: a line along the floor and a legend note.
      EXPECT_EQ(zero, c.max_new_tokens) << name;
      static const std::regex path(R"re(<path class="series" data-series="([^"]*)" d="([^"]*)")re");
      std::string d;
      for (std::sregex_iterator it(logit.begin(), logit.end(), path), end; it != end; ++it)
        if ((*it)[1].str() == name) d = (*it)[2].str();
      size_t vertices = 0;
      for (char ch : d) vertices += ch == 'M' || ch == 'L';
      EXPECT_EQ(vertices, size_t(c.max_new_tokens)) << name << ": " << d;
      EXPECT_NE(logit.find(name + " (all 0)"), std::string::npos) << name;
    }
  }
  EXPECT_NE(logit.find(">0 (exact)</text>"), std::string::npos);
  const std::string kl = svg_with_label(dom, "Per-step KL");
  ASSERT_FALSE(kl.empty());
  EXPECT_FALSE(zero_floor_y(kl).empty());
  // The x axis starts at generated token 0 and has ticks between the ends.
  static const std::regex xtick(R"re(class="xtick"[^>]*>([^<]*)<)re");
  std::vector<std::string> xticks;
  for (std::sregex_iterator it(logit.begin(), logit.end(), xtick), end; it != end; ++it) xticks.push_back((*it)[1].str());
  ASSERT_GE(xticks.size(), 3u);
  EXPECT_EQ(xticks[0], "0");

  // The layer profile: every plotted point is the summary's value for that dtype and layer.
  const std::string resid = svg_with_label(dom, "max |ON − OFF| of the residual stream");
  ASSERT_FALSE(resid.empty());
  const auto pts = points_of(resid);
  int expected = 0, positive = 0;
  for (const auto& prof : summary["layer_profile"]["profiles"])
    for (const auto& layer : prof["layers"]) {
      ++expected;
      positive += layer["resid_post"]["max"].get<double>() > 0;
    }
  EXPECT_EQ(int(pts.size()), expected);
  EXPECT_GT(positive, 5);
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

namespace kvp {
namespace {

// compare, profile and patch end to end on both real models and on synthesised models of two
// families, every dtype, both kernel policies; the reference policy must show no divergence at all
// (each of its reductions runs in index order whatever the shape).
struct LabModel {
  std::string name, model, tokenizer;
};

std::vector<LabModel> lab_models(const test::TempDir& tmp) {
  std::vector<LabModel> out;
  for (const char* m : {"stories260K", "aidreams260K"}) {
    const std::string dir = std::string("models/") + m + "/";
    const std::string model = test::shared_file(dir + m + ".bin"), tok = test::shared_file(dir + "tok512.bin");
    if (model.empty() || tok.empty()) return {};  // the failure names the missing file
    out.push_back({m, model, tok});
  }
  for (const char* arch : {"llama", "gemma2"}) {
    const ModelConfig cfg = synthetic_config(arch, "tiny");
    const VocabSpec vocab = make_synthetic_vocab(cfg.vocab_size);
    ExportOptions eo;
    eo.vocab = &vocab;
    const std::string path = tmp.file(std::string(arch) + ".gguf");
    export_checkpoint(synthesize_checkpoint(cfg, DType::F32), "gguf", path, eo);
    out.push_back({std::string("synth-") + arch, path, ""});
  }
  return out;
}

TEST(LabEndToEnd, CompareProfileAndPatchRunOnRealAndSynthesisedModels) {
  test::TempDir tmp;
  const auto models = lab_models(tmp);
  ASSERT_EQ(models.size(), 4u);
  for (const LabModel& m : models) {
    for (KernelPolicy pol : {KernelPolicy::Reference, KernelPolicy::Standard}) {
      SCOPED_TRACE(m.name + " " + policy_name(pol));
      const std::string out = tmp.file(m.name + "-" + policy_name(pol));
      CompareOptions c;
      c.model = m.model;
      c.tokenizer = m.tokenizer;
      c.prompts = load_prompts("builtin:stories");
      c.prompts.resize(2);
      for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
        RunDefaults cond;
        cond.dtype = dt;
        cond.kernels = pol;
        add_condition(c, cond, SamplerConfig{});
      }
      c.max_new_tokens = 12;
      c.out_dir = out;
      ASSERT_EQ(run_compare(c), 6);

      ProfileOptions p;
      p.model = m.model;
      p.tokenizer = m.tokenizer;
      p.kernels = pol;
      p.step = 3;
      const auto prof = run_profile(p);
      ASSERT_EQ(prof.size(), 3u);
      write_file_atomic(out + "/profile.json", profile_json(prof, p).dump(2));

      PatchOptions po;
      po.model = m.model;
      po.tokenizer = m.tokenizer;
      po.dtype = DType::F16;
      po.kernels = pol;
      po.max_new_tokens = 8;
      po.step = 2;
      po.continuation = 3;
      const PatchResult patch = run_patch(po);
      write_file_atomic(out + "/patch.json", patch_json(patch, po).dump(2));
      const nlohmann::json summary = write_reports(out);
      ASSERT_EQ(summary["conditions"].size(), 3u);
      EXPECT_TRUE(summary.contains("layer_profile"));
      EXPECT_TRUE(summary.contains("patching"));

      for (const auto& cond : summary["conditions"]) {
        EXPECT_EQ(cond["n_steps"], 24);
        EXPECT_LE(cond["token_flip_rate"].get<double>(), cond["sequence_divergence_rate"].get<double>() + 1e-12);
        if (pol == KernelPolicy::Reference) {
          EXPECT_EQ(cond["token_flip_rate"].get<double>(), 0.0) << cond["condition"];
          EXPECT_EQ(cond["max_abs_logit_diff"]["max"].get<double>(), 0.0) << cond["condition"];
        }
      }
      if (pol == KernelPolicy::Reference) {
        for (const auto& pr : prof) EXPECT_EQ(pr.logits.max, 0.0) << pr.dtype;
        // KV patching with every recomputed entry reproduces cache OFF's next-token logits bitwise.
        const PatchRow& kv_all = patch.rows.back();
        EXPECT_EQ(kv_all.kind, "kv");
        EXPECT_EQ(kv_all.layer, -1);
        EXPECT_EQ(kv_all.max_abs_logit_diff_to_off, 0.0);
        EXPECT_TRUE(kv_all.next_follows_off);
      }
    }
  }
}

}  // namespace
}  // namespace kvp
