#include "lab/results_manifest.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/build_info.h"
#include "core/error.h"
#include "lab/numerics_identity.h"
#include "runtime/tokenizer_for_model.h"

namespace kvp {
namespace fs = std::filesystem;

uint64_t fnv1a64(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

std::string file_hash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open", path);
  std::string buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return fmt::format("size={}:fnv1a64={:016x}", buf.size(), fnv1a64(buf.data(), buf.size()));
}

std::string model_fingerprint(const std::string& path) {
  std::vector<fs::path> files;
  if (fs::is_directory(path)) {
    for (const auto& e : fs::directory_iterator(path))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(path);
  }
  uint64_t h = 1469598103934665603ull, total = 0;
  constexpr size_t kMiB = 1 << 20;
  std::string buf;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) fail("{}: cannot open", f.string());
    const uint64_t size = fs::file_size(f);
    total += size;
    const std::string name = f.filename().string();
    h = fnv1a64(name.data(), name.size(), h);
    h = fnv1a64(&size, sizeof size, h);
    buf.resize(size_t(std::min<uint64_t>(size, kMiB)));
    in.read(buf.data(), std::streamsize(buf.size()));
    h = fnv1a64(buf.data(), buf.size(), h);
    if (size > kMiB) {
      in.seekg(std::streamoff(size - std::min<uint64_t>(size - kMiB, kMiB)));
      buf.resize(size_t(std::min<uint64_t>(size - kMiB, kMiB)));
      in.read(buf.data(), std::streamsize(buf.size()));
      h = fnv1a64(buf.data(), buf.size(), h);
    }
  }
  return fmt::format("size={}:fnv1a64-head-tail={:016x}", total, h);
}

std::string model_name(const std::string& path) {
  fs::path p(path);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
  return fs::is_directory(p) ? p.filename().string() : p.stem().string();
}

nlohmann::json config_json(const ModelConfig& c) {
  nlohmann::json j = {{"arch", std::string(arch_name(c.arch))}, {"dim", c.dim}, {"hidden_dim", c.hidden_dim},
                      {"n_layers", c.n_layers}, {"n_heads", c.n_heads}, {"n_kv_heads", c.n_kv_heads},
                      {"vocab_size", c.vocab_size}, {"max_seq_len", c.max_seq_len}};
  if (c.is_moe())
    j["experts"] = {{"family", family_name(c)}, {"experts", c.moe.n_experts}, {"per_token", c.moe.n_used},
                    {"expert_hidden_dim", c.moe.expert_hidden_dim}};
  return j;
}

nlohmann::json tokenizer_identity(const Checkpoint& ckpt, const std::string& explicit_tokenizer) {
  std::string file = explicit_tokenizer;
  if (file.empty()) {
    if (ckpt.vocab) return "embedded";
    file = tokenizer_file_beside(ckpt.path, ckpt.format, ckpt.tokenizer_path);
  }
  if (file.empty()) return nullptr;  // the run itself will stop with "no tokenizer found"
  return {{"path", file}, {"fingerprint", model_fingerprint(file)}};
}

nlohmann::json model_identity(const Checkpoint& ckpt, const std::string& model_path,
                              const std::string& explicit_tokenizer) {
  return {{"name", model_name(model_path)},
          {"path", model_path},
          {"fingerprint", model_fingerprint(model_path)},
          {"config", config_json(ckpt.config)},
          {"tokenizer", tokenizer_identity(ckpt, explicit_tokenizer)}};
}

std::string json_first_difference(const nlohmann::json& a, const nlohmann::json& b, const std::string& path) {
  if (a.is_object() && b.is_object()) {
    for (const auto& [k, v] : a.items()) {
      if (!b.contains(k)) return fmt::format("{}/{}: {} vs (absent)", path, k, v.dump());
      if (auto d = json_first_difference(v, b[k], path + "/" + k); !d.empty()) return d;
    }
    for (const auto& [k, v] : b.items())
      if (!a.contains(k)) return fmt::format("{}/{}: (absent) vs {}", path, k, v.dump());
    return "";
  }
  if (a.is_array() && b.is_array()) {
    // Item by item, so two long lists that differ in one item, or by one item at the end, are
    // not printed whole.
    const size_t n = std::min(a.size(), b.size());
    for (size_t i = 0; i < n; ++i)
      if (auto d = json_first_difference(a[i], b[i], fmt::format("{}/{}", path, i)); !d.empty()) return d;
    if (a.size() > n) return fmt::format("{}/{}: {} vs (absent)", path, n, a[n].dump());
    if (b.size() > n) return fmt::format("{}/{}: (absent) vs {}", path, n, b[n].dump());
    return "";
  }
  return a == b ? "" : fmt::format("{}: {} vs {}", path.empty() ? "/" : path, a.dump(), b.dump());
}

std::string path_in(const std::string& dir, const std::string& file) {
  if (dir.empty()) return file;
  return (fs::path(dir) / file).lexically_normal().string();
}

nlohmann::json comparable_model(nlohmann::json m) {
  m.erase("path");
  if (m.contains("tokenizer") && m["tokenizer"].is_object()) m["tokenizer"].erase("path");
  return m;
}

namespace {

bool has_content(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && fs::file_size(path, ec) > 0;
}

// The result files of `entry` (a manifest's commands/<name>) that hold something. A command whose
// run failed before its first record has none, and its settings may then be replaced.
std::vector<std::string> files_with_results(const std::string& dir, const nlohmann::json& entry) {
  std::vector<std::string> out;
  if (!entry.contains("files") || !entry["files"].is_array()) return out;
  for (const auto& f : entry["files"])
    if (f.is_string() && has_content(path_in(dir, f.get<std::string>()))) out.push_back(f.get<std::string>());
  return out;
}

}  // namespace

nlohmann::json read_results_manifest(const std::string& dir) {
  const std::string path = path_in(dir, kResultsManifestFile);
  if (!fs::exists(path)) return nullptr;
  std::ifstream in(path);
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("kind", std::string()) != "kvparity-results" ||
      !j.contains("model") || !j.contains("commands") || !j["commands"].is_object())
    fail("{}: not a kvparity results manifest; use another --out", path);
  if (j.value("schema_version", 0) != kResultsManifestSchemaVersion)
    fail("{}: manifest schema_version {} (this kvparity writes {}); use another --out", path,
         j.value("schema_version", nlohmann::json()).dump(), kResultsManifestSchemaVersion);
  return j;
}

void check_results_manifest(const std::string& dir, const std::string& command, const nlohmann::json& model,
                            const nlohmann::json& settings, const std::vector<std::string>& result_files) {
  if (fs::exists(dir) && !fs::is_directory(dir)) fail("{}: not a directory", dir);
  const nlohmann::json m = read_results_manifest(dir);
  const std::string manifest_path = path_in(dir, kResultsManifestFile);
  if (m.is_null()) {
    for (const auto& f : result_files)
      if (has_content(path_in(dir, f)))
        fail("{}: results without a {} (written by an older kvparity, or by hand); they cannot be checked against "
             "this run's settings: use another --out",
             path_in(dir, f), kResultsManifestFile);
    return;
  }
  const auto& cmds = m["commands"];
  if (auto d = json_first_difference(comparable_model(m["model"]), comparable_model(model), "model"); !d.empty()) {
    for (const auto& [name, entry] : cmds.items())
      if (const auto held = files_with_results(dir, entry); !held.empty())
        fail("{}: this directory holds results of another model: '{}' in {}, this run '{}' (first difference {}); "
             "use another --out",
             manifest_path, m["model"].value("name", std::string("?")), path_in(dir, held.front()),
             model.value("name", std::string("?")), d);
    return;  // nothing recorded yet under the old model: the new run starts the folder afresh
  }
  if (cmds.contains(command)) {
    const auto& entry = cmds[command];
    const auto recorded = with_numerics_of(entry.value("settings", nlohmann::json()), settings, manifest_path);
    if (auto d = json_first_difference(recorded, settings, command + "/settings");
        !d.empty() && !files_with_results(dir, entry).empty())
      fail(
          "{}: this directory holds a {} run with different settings ({}{}); resume with the same settings or use "
          "another --out",
          manifest_path, command, d, numerics_difference_hint(d));
  } else {
    for (const auto& f : result_files)
      if (has_content(path_in(dir, f)))
        fail("{}: {} results that {} does not account for; use another --out", path_in(dir, f), command,
             manifest_path);
  }
}

nlohmann::json with_build(const nlohmann::json& built_by) {
  nlohmann::json list = built_by.is_array() ? built_by : nlohmann::json::array();
  if (std::find(list.begin(), list.end(), build_description()) == list.end()) list.push_back(build_description());
  return list;
}

void record_results_manifest(const std::string& dir, const std::string& command, const nlohmann::json& model,
                             const nlohmann::json& settings, const std::vector<std::string>& result_files) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("{}: cannot create output directory: {}", dir, ec.message());
  nlohmann::json m = read_results_manifest(dir);
  if (!m.is_null() && comparable_model(m["model"]) != comparable_model(model)) m = nullptr;
  if (m.is_null())
    m = {{"kind", "kvparity-results"}, {"schema_version", kResultsManifestSchemaVersion}, {"model", model},
         {"commands", nlohmann::json::object()}};
  // The builds of records this entry's settings already hold, and what else it records (a merge's
  // inputs); an entry of other settings (whose files held nothing, or the check had refused)
  // starts afresh.
  const nlohmann::json* old = m["commands"].contains(command) ? &m["commands"][command] : nullptr;
  const bool continued = old != nullptr && old->is_object() && old->value("settings", nlohmann::json()) == settings;
  nlohmann::json entry = continued ? *old : nlohmann::json::object();
  entry["settings"] = settings;
  entry["files"] = result_files;
  entry["built_by"] = with_build(continued ? old->value("built_by", nlohmann::json()) : nlohmann::json());
  if (old != nullptr && *old == entry) return;
  m["commands"][command] = entry;
  write_file_atomic(path_in(dir, kResultsManifestFile), m.dump(2) + "\n");
}

void check_single_result(const std::string& dir, const SingleResult& r) {
  const Checkpoint ckpt = open_checkpoint(r.model_path);
  check_results_manifest(dir, r.command, model_identity(ckpt, r.model_path, r.tokenizer), r.settings, {r.file});
}

void save_single_result(const std::string& dir, const SingleResult& r, const nlohmann::json& result) {
  const Checkpoint ckpt = open_checkpoint(r.model_path);
  const nlohmann::json model = model_identity(ckpt, r.model_path, r.tokenizer);
  // Checked again: the folder may have changed while the command worked.
  check_results_manifest(dir, r.command, model, r.settings, {r.file});
  record_results_manifest(dir, r.command, model, r.settings, {r.file});
  write_file_atomic(path_in(dir, r.file), result.dump(2) + "\n");
}

}  // namespace kvp
