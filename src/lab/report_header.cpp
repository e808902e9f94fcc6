#include "lab/report_header.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "lab/svg_chart.h"

namespace kvp {
namespace {

using json = nlohmann::json;

struct ModelInfo {
  std::string name, path, fingerprint, config, tokenizer;
};

struct SettingsBlock {
  std::string title;
  std::vector<std::pair<std::string, std::string>> items;  // key, value
};

struct Header {
  std::vector<ModelInfo> models;
  std::vector<SettingsBlock> blocks;
  bool empty() const { return models.empty() && blocks.empty(); }
};

// A value on one line: a string as written unless it holds control characters (a newline would
// break the one-line-per-setting layout; JSON escapes them), anything else as compact JSON.
std::string value_text(const json& v) {
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (std::none_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; })) return s;
  }
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string field(const json& obj, const char* key) {
  if (!obj.is_object()) return "";
  const auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? "" : value_text(*it);
}

std::string tokenizer_text(const json& t) {
  if (t.is_object()) {
    const std::string path = field(t, "path"), fp = field(t, "fingerprint");
    return fp.empty() ? path : path.empty() ? fp : path + " (" + fp + ")";
  }
  return t.is_null() ? "" : value_text(t);
}

ModelInfo model_info(const json& m) {
  ModelInfo i;
  i.name = field(m, "name");
  i.path = field(m, "path");
  i.fingerprint = field(m, "fingerprint");
  if (m.is_object() && m.contains("config")) i.config = config_summary(m["config"]);
  if (m.is_object() && m.contains("tokenizer")) i.tokenizer = tokenizer_text(m["tokenizer"]);
  return i;
}

SettingsBlock settings_block(const std::string& title, const json& settings, const char* skip = nullptr) {
  SettingsBlock b{title, {}};
  if (!settings.is_object()) {
    if (!settings.is_null()) b.items.push_back({"value", value_text(settings)});
    return b;
  }
  for (const auto& [k, v] : settings.items())
    if (skip == nullptr || k != skip) b.items.push_back({k, value_text(v)});
  return b;
}

// Backticks enough that no run of them inside the block can close it early (CommonMark fences).
std::string fence_for(const std::string& body) {
  size_t longest = 0, run = 0;
  for (char c : body) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return std::string(std::max<size_t>(3, longest + 1), '`');
}

// Markdown: one fenced block, whose text Markdown renders literally, so no value needs escaping.
std::string render_md(const Header& h) {
  if (h.empty()) return "";
  std::string body;
  for (const auto& m : h.models) {
    if (!body.empty()) body += "\n";
    const std::pair<const char*, const std::string*> rows[] = {
        {"model", &m.name}, {"path", &m.path}, {"fingerprint", &m.fingerprint}, {"config", &m.config},
        {"tokenizer", &m.tokenizer}};
    for (const auto& [k, v] : rows)
      if (!v->empty()) body += fmt::format("{:<12} {}\n", k, *v);
  }
  for (const auto& b : h.blocks) {
    if (!body.empty()) body += "\n";
    body += b.title + "\n";
    for (const auto& [k, v] : b.items) body += fmt::format("  {}: {}\n", k, v);
  }
  const std::string fence = fence_for(body);
  return "## Run\n\n" + fence + "text\n" + body + fence + "\n\n";
}

std::string render_html(const Header& h) {
  if (h.empty()) return "";
  std::string html = "<section class=\"manifest\">\n<h2>Run</h2>\n";
  if (!h.models.empty()) {
    html += "<table class=\"models\"><tr><th>model</th><th>fingerprint</th><th>config</th><th>tokenizer</th></tr>\n";
    for (const auto& m : h.models)
      html += fmt::format("<tr><td><strong>{}</strong>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>\n",
                          html_escape(m.name), m.path.empty() ? "" : "<br><code>" + html_escape(m.path) + "</code>",
                          html_escape(m.fingerprint), html_escape(m.config), html_escape(m.tokenizer));
    html += "</table>\n";
  }
  for (const auto& b : h.blocks) {
    html += fmt::format("<h3>{}</h3>\n<ul class=\"settings\">\n", html_escape(b.title));
    for (const auto& [k, v] : b.items)
      html += fmt::format("<li><code>{}</code>: {}</li>\n", html_escape(k), html_escape(v));
    html += "</ul>\n";
  }
  return html + "</section>\n";
}

// "built by": the builds that wrote the records (with_build in results_manifest.h), where known.
void add_built_by(SettingsBlock& b, const json& built_by) {
  if (!built_by.is_array() || built_by.empty()) return;
  std::string text;
  for (const auto& x : built_by) text += (text.empty() ? "" : "; ") + value_text(x);
  b.items.push_back({"built by", text});
}

// "i/n" for a shard as manifests record it ({"index", "count"}); "" for anything else.
std::string shard_text(const json& shard) {
  if (!shard.is_object() || !shard.contains("index") || !shard.contains("count")) return "";
  return fmt::format("{}/{}", value_text(shard["index"]), value_text(shard["count"]));
}

// A merged folder's inputs and the shards none of them was (compare_merge.h).
void add_merge(SettingsBlock& b, const json& entry) {
  if (entry.contains("merged_from") && entry["merged_from"].is_array()) {
    std::string text;
    for (const auto& f : entry["merged_from"]) {
      if (!f.is_object()) continue;
      const std::string sh = shard_text(f.value("shard", json()));
      text += (text.empty() ? "" : ", ") + value_text(f.value("dir", json())) + (sh.empty() ? "" : " (" + sh + ")");
    }
    b.items.push_back({"merged from", text});
  }
  if (entry.contains("missing_shards") && entry["missing_shards"].is_array() && !entry["missing_shards"].empty()) {
    std::string text;
    for (const auto& x : entry["missing_shards"]) text += (text.empty() ? "" : ", ") + value_text(x);
    b.items.push_back({"shards missing from the merge", text});
  }
}

Header results_header(const json& manifest) {
  Header h;
  if (!manifest.is_object()) return h;
  if (manifest.contains("model") && !manifest["model"].is_null()) h.models.push_back(model_info(manifest["model"]));
  const json& cmds = manifest.value("commands", json::object());
  if (!cmds.is_object()) return h;
  // The order the commands run in a study; anything newer after them.
  std::vector<std::string> order = {"compare", "profile", "patch"};
  for (const auto& [k, v] : cmds.items())
    if (std::find(order.begin(), order.end(), k) == order.end()) order.push_back(k);
  for (const auto& k : order) {
    if (!cmds.contains(k)) continue;
    const json& c = cmds[k];
    h.blocks.push_back(settings_block(k + " settings", c.is_object() && c.contains("settings") ? c["settings"] : c));
    for (auto& [key, text] : h.blocks.back().items)
      if (key == "shard" && c.is_object() && c.contains("settings") && c["settings"].is_object())
        if (const std::string sh = shard_text(c["settings"]["shard"]); !sh.empty()) text = sh;
    if (c.is_object()) add_built_by(h.blocks.back(), c.value("built_by", json()));
    if (c.is_object()) add_merge(h.blocks.back(), c);
  }
  return h;
}

Header gsm8k_header(const json& settings, const json& shard, const json& built_by) {
  Header h;
  if (settings.is_object() && settings.contains("models") && settings["models"].is_array())
    for (const auto& m : settings["models"]) h.models.push_back(model_info(m));
  SettingsBlock b = settings_block("eval gsm8k settings", settings, "models");
  if (const std::string sh = shard_text(shard); !sh.empty()) b.items.push_back({"shard", sh});
  add_built_by(b, built_by);
  if (!b.items.empty()) h.blocks.push_back(std::move(b));
  return h;
}

}  // namespace

std::string config_summary(const json& c) {
  if (!c.is_object()) return c.is_null() ? "" : value_text(c);
  std::vector<std::string> parts;
  auto num = [&](const char* key) { return field(c, key); };
  const json* moe = c.contains("experts") && c["experts"].is_object() ? &c["experts"] : nullptr;
  if (const auto a = moe != nullptr ? field(*moe, "family") : num("arch"); !a.empty()) parts.push_back(a);
  if (const auto l = num("n_layers"); !l.empty()) parts.push_back(l + " layers");
  if (moe != nullptr)
    parts.push_back(field(*moe, "per_token") + " of " + field(*moe, "experts") + " experts a token");
  if (const auto d = num("dim"); !d.empty()) parts.push_back("dim " + d);
  const std::string heads = num("n_heads"), kv = num("n_kv_heads");
  if (!heads.empty()) parts.push_back(heads + " heads" + (kv.empty() ? "" : " / " + kv + " KV heads"));
  if (const auto v = num("vocab_size"); !v.empty()) parts.push_back("vocab " + v);
  if (const auto s = num("max_seq_len"); !s.empty()) parts.push_back("context " + s);
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::vector<std::string> setting_lines(const json& settings) {
  std::vector<std::string> out;
  for (const auto& [k, v] : settings_block("", settings).items) out.push_back(k + ": " + v);
  return out;
}

std::string render_manifest_md(const json& manifest) { return render_md(results_header(manifest)); }
std::string render_manifest_html(const json& manifest) { return render_html(results_header(manifest)); }

std::string render_gsm8k_manifest_md(const json& settings, const json& shard, const json& built_by) {
  return render_md(gsm8k_header(settings, shard, built_by));
}
std::string render_gsm8k_manifest_html(const json& settings, const json& shard, const json& built_by) {
  return render_html(gsm8k_header(settings, shard, built_by));
}

}  // namespace kvp
