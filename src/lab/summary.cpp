#include "lab/summary.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "lab/routing_difference.h"
#include "lab/stats.h"

namespace kvp {
namespace {

std::vector<double> doubles(const nlohmann::json& arr) {
  std::vector<double> v;
  for (const auto& x : arr) v.push_back(x.get<double>());
  return v;
}

struct Acc {
  nlohmann::json first;  // a record, for the condition's fields
  int n_prompts = 0, n_diverged = 0, n_steps = 0, flips = 0, max_new_tokens = 0;
  std::vector<int> first_div;
  std::map<std::string, std::vector<double>> steps;               // metric -> all steps
  std::map<std::string, std::vector<std::vector<double>>> by_pos;  // metric -> [step index] -> values
  int logits_known = 0, logits_differ = 0;  // prompts with any teacher-forced logit bit different
  RoutingTally routing;  // a mixture of experts' (records' teacher_forced.routing)
};

// "k=v,k=v" -> its items.
std::map<std::string, std::string> spec_items(const std::string& spec) {
  std::map<std::string, std::string> m;
  size_t start = 0;
  while (start < spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(start, comma - start);
    const size_t eq = item.find('=');
    if (eq != std::string::npos) m[item.substr(0, eq)] = item.substr(eq + 1);
    start = comma + 1;
  }
  return m;
}

// The settings the two sides differ in, in SPEC order.
nlohmann::json differing_keys(const std::string& baseline, const std::string& candidate) {
  const auto b = spec_items(baseline), c = spec_items(candidate);
  nlohmann::json out = nlohmann::json::array();
  for (const char* k : {"cache", "dtype", "kv-dtype", "kernels", "threads", "batch-size", "prefill-chunk"}) {
    const auto ib = b.find(k), ic = c.find(k);
    if ((ib == b.end()) != (ic == c.end()) || (ib != b.end() && ib->second != ic->second)) out.push_back(k);
  }
  return out;
}

const char* const kMetrics[] = {"max_abs_logit_diff", "mean_abs_logit_diff", "kl", "top1_margin"};

}  // namespace

nlohmann::json summarize_compare(const std::vector<nlohmann::json>& records) {
  std::map<std::string, Acc> acc;
  std::vector<std::string> order;
  for (const auto& r : records) {
    const std::string key = r.value("condition", std::string());
    if (!acc.count(key)) order.push_back(key);
    Acc& a = acc[key];
    if (a.n_prompts == 0) a.first = r;
    ++a.n_prompts;
    a.max_new_tokens = std::max(a.max_new_tokens, r.value("max_new_tokens", 0));
    if (!r["first_divergence"].is_null()) {
      ++a.n_diverged;
      a.first_div.push_back(r["first_divergence"].get<int>());
    }
    const auto& tf = r["teacher_forced"];
    if (const auto it = tf.find("logits_bitwise_equal"); it != tf.end()) {  // schema 2 on
      ++a.logits_known;
      a.logits_differ += !it->get<bool>();
    }
    a.flips += tf.value("flips", 0);
    if (const auto it = tf.find("routing"); it != tf.end()) a.routing.add(*it, r["first_divergence"]);
    a.n_steps += int(tf["on_token"].size());
    for (const char* m : kMetrics) {
      const auto v = doubles(tf[m]);
      auto& all = a.steps[m];
      all.insert(all.end(), v.begin(), v.end());
      auto& pos = a.by_pos[m];
      if (pos.size() < v.size()) pos.resize(v.size());
      for (size_t i = 0; i < v.size(); ++i) pos[i].push_back(v[i]);
    }
  }
  nlohmann::json conditions = nlohmann::json::array();
  std::map<std::string, nlohmann::json> by_key;
  for (const auto& key : order) {
    Acc& a = acc[key];
    nlohmann::json c;
    c["condition"] = key;
    for (const char* f : {"dtype", "kv_dtype", "kernels", "sampler", "control"}) c[f] = a.first[f];
    // Records before schema 2 compared cache OFF with cache ON only and do not name the sides.
    c["baseline"] = a.first.value("baseline", std::string("cache=off"));
    c["candidate"] = a.first.value("candidate", std::string("cache=on"));
    c["differs_in"] = differing_keys(c["baseline"], c["candidate"]);
    c["n_prompts"] = a.n_prompts;
    c["n_steps"] = a.n_steps;
    c["sequence_divergence_rate"] = a.n_prompts ? double(a.n_diverged) / a.n_prompts : 0.0;
    c["token_flip_rate"] = a.n_steps ? double(a.flips) / a.n_steps : 0.0;
    c["logit_difference_rate"] =
        a.logits_known ? nlohmann::json(double(a.logits_differ) / a.logits_known) : nlohmann::json(nullptr);
    std::vector<double> fd(a.first_div.begin(), a.first_div.end());
    c["first_divergence_index"] = summarize(fd).to_json();
    c["first_divergence_histogram"] = histogram(a.first_div, std::max(1, a.max_new_tokens), 16).to_json();
    for (const char* m : kMetrics) c[m] = summarize(a.steps[m]).to_json();
    nlohmann::json per_step;
    for (const char* m : {"max_abs_logit_diff", "kl"}) {
      nlohmann::json med = nlohmann::json::array();
      for (auto& v : a.by_pos[m]) med.push_back(summarize(v).median);
      per_step[std::string(m) + "_median"] = med;
    }
    c["per_step"] = per_step;
    if (a.routing.records() > 0) c["routing"] = a.routing.to_json();
    by_key[key] = c;
    conditions.push_back(c);
  }
  // FP32 falsification: each condition next to its fp32 control, metric by metric.
  nlohmann::json controls = nlohmann::json::array();
  for (const auto& c : conditions) {
    if (c["control"].get<bool>()) continue;
    for (const auto& k : conditions) {
      if (!k["control"].get<bool>() || k["kernels"] != c["kernels"] || k["sampler"] != c["sampler"]) continue;
      nlohmann::json ratios;
      for (const char* m : {"max_abs_logit_diff", "mean_abs_logit_diff", "kl"}) {
        for (const char* stat : {"median", "max"}) {
          const auto& a = c[m][stat];
          const auto& b = k[m][stat];
          const std::string name = std::string(m) + "_" + stat;
          if (a.is_null() || b.is_null() || b.get<double>() <= 0.0) {
            ratios[name] = {{"ratio", nullptr}, {"log10", nullptr}, {"value", a}, {"control", b}};
          } else {
            const double r = a.get<double>() / b.get<double>();
            ratios[name] = {{"ratio", r},
                            {"log10", r > 0 ? nlohmann::json(std::log10(r)) : nlohmann::json(nullptr)},
                            {"value", a},
                            {"control", b}};
          }
        }
      }
      ratios["sequence_divergence_rate"] = {{"value", c["sequence_divergence_rate"]},
                                            {"control", k["sequence_divergence_rate"]}};
      ratios["token_flip_rate"] = {{"value", c["token_flip_rate"]}, {"control", k["token_flip_rate"]}};
      controls.push_back({{"condition", c["condition"]}, {"control", k["condition"]}, {"metrics", ratios}});
    }
  }
  return {{"schema_version", kSummarySchemaVersion}, {"kind", "compare"}, {"conditions", conditions},
          {"fp32_control", controls}};
}

}  // namespace kvp
