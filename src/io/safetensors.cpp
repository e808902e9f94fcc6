#include "io/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/hf_config.h"
#include "io/hf_fused_experts.h"
#include "io/hf_gpt_oss_experts.h"
#include "io/hf_fused_projections.h"
#include "io/hf_text_model.h"
#include "io/io_util.h"

namespace kvp {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

bool st_dtype(const std::string& s, DType* out) {
  if (s == "F32") { *out = DType::F32; return true; }
  if (s == "F16") { *out = DType::F16; return true; }
  if (s == "BF16") { *out = DType::BF16; return true; }
  return false;
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

bool looks_like_safetensors(const uint8_t* data, size_t size) {
  if (size < 9 || data[8] != '{') return false;
  // The length is not required to fit the file here, so that a truncated safetensors file gets
  // the safetensors error. A llama2.c header cannot pass: its bytes 4..7 are hidden_dim > 0.
  uint64_t n = read_u64_le(data);
  return n >= 2 && n < (uint64_t(1) << 32);
}

std::vector<TensorView> parse_safetensors(const uint8_t* data, size_t size, const std::string& name,
                                          std::map<std::string, std::string>* metadata,
                                          std::map<std::string, ByteTensor>* bytes) {
  if (size < 8) fail("{}: truncated safetensors file ({} bytes, need at least 8)", name, size);
  const uint64_t n = read_u64_le(data);
  if (n > size - 8)
    fail("{}: safetensors header length {} is larger than the rest of the file ({} bytes)", name, n, size - 8);
  if (n > kMaxSafetensorsHeader)
    fail("{}: safetensors header length {} exceeds the {}-byte limit", name, n, kMaxSafetensorsHeader);
  json h;
  try {
    h = json::parse(data + 8, data + 8 + n);
  } catch (const json::exception& e) {
    fail("{}: invalid safetensors JSON header: {}", name, e.what());
  }
  if (!h.is_object()) fail("{}: safetensors header is not a JSON object", name);
  const uint64_t base = 8 + n;
  const uint64_t data_size = size - base;

  std::vector<TensorView> out;
  out.reserve(h.size());
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& tname = it.key();
    const json& e = it.value();
    if (tname == "__metadata__") {
      if (metadata != nullptr && e.is_object())
        for (auto m = e.begin(); m != e.end(); ++m)
          if (m.value().is_string()) (*metadata)[m.key()] = m.value().get<std::string>();
      continue;
    }
    if (!e.is_object()) fail("{}: tensor '{}': header entry is not an object", name, tname);
    if (!e.contains("dtype") || !e["dtype"].is_string()) fail("{}: tensor '{}': missing dtype", name, tname);
    const std::string ds = e["dtype"].get<std::string>();
    TensorView t;
    t.name = tname;
    const bool u8 = ds == "U8" && bytes != nullptr;
    if (!u8 && !st_dtype(ds, &t.dtype))
      fail("{}: tensor '{}' has dtype {}, which is not supported (F32, F16, BF16 only)", name, tname, ds);
    if (!e.contains("shape") || !e["shape"].is_array()) fail("{}: tensor '{}': missing shape", name, tname);
    const json& sh = e["shape"];
    if (sh.size() > 8) fail("{}: tensor '{}': {} dimensions is too many", name, tname, sh.size());
    // numel is bounded by the data size at every step, so the product cannot overflow.
    uint64_t numel = 1;
    for (const json& d : sh) {
      if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0))
        fail("{}: tensor '{}': shape {} holds something other than a non-negative integer", name, tname, sh.dump());
      uint64_t v = d.get<uint64_t>();
      if (v > (uint64_t(1) << 62) || (numel != 0 && v != 0 && v > data_size / numel))
        fail("{}: tensor '{}': shape {} is larger than the data section ({} bytes)", name, tname, sh.dump(), data_size);
      numel *= v;
      t.shape.push_back(int64_t(v));
    }
    const json& off = e.contains("data_offsets") ? e["data_offsets"] : json();
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail("{}: tensor '{}': data_offsets must be [begin, end] with non-negative integers", name, tname);
    const uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    if (b > en || en > data_size)
      fail("{}: tensor '{}': data_offsets [{}, {}] lie outside the data section ({} bytes)", name, tname, b, en,
           data_size);
    const size_t elem = u8 ? 1 : dtype_size(t.dtype);
    const uint64_t want = numel * elem;
    if (en - b != want)
      fail("{}: tensor '{}': data_offsets [{}, {}] hold {} bytes but shape {} x {} needs {}", name, tname, b, en,
           en - b, sh.dump(), ds, want);
    if ((base + b) % elem != 0)
      fail("{}: tensor '{}': data at file offset {} is not aligned to its {}-byte elements", name, tname, base + b,
           elem);
    if (u8) {
      (*bytes)[tname] = ByteTensor{t.shape, data + base + b};
      continue;
    }
    t.data = data + base + b;
    out.push_back(std::move(t));
  }
  return out;
}

namespace {

void add_tensors(Checkpoint& ck, std::vector<TensorView>&& ts) {
  for (auto& t : ts) {
    std::string n = t.name;
    ck.tensors[n] = std::move(t);
  }
}

// A vision-language checkpoint's text-model tensors under the canonical names the model reads;
// the vision tower and projector keep theirs (inspect lists them as not read).
void use_text_model_names(Checkpoint& ck) {
  if (ck.text_model_of.empty()) return;
  std::map<std::string, TensorView> renamed;
  std::map<std::string, std::string> from;
  for (auto& [name, t] : ck.tensors) {
    std::string canonical = text_model_tensor_name(name);
    if (auto [it, fresh] = from.emplace(canonical, name); !fresh)
      fail("{}: tensors '{}' and '{}' are both the text model's '{}'", ck.path, it->second, name, canonical);
    t.name = canonical;
    renamed.emplace(std::move(canonical), std::move(t));
  }
  ck.tensors = std::move(renamed);
}

// The tensors under the names the weights builder reads, whatever layout the file used: a
// wrapper's text model, v5's fused experts, GPT-OSS's experts, Phi-3's fused projections.
void use_canonical_tensors(Checkpoint& ck) {
  use_text_model_names(ck);
  split_fused_experts(ck);
  unpack_gpt_oss_experts(ck);
  split_fused_projections(ck);
  if (!ck.byte_tensors.empty())
    fail("{}: tensor '{}' has dtype U8, which is not supported (F32, F16, BF16 only; U8 only as GPT-OSS's MXFP4 "
         "experts)",
         ck.path, ck.byte_tensors.begin()->first);
}

std::string sibling_tokenizer(const fs::path& dir) {
  fs::path tj = dir / "tokenizer.json";
  std::error_code ec;
  return fs::is_regular_file(tj, ec) ? tj.string() : std::string();
}

}  // namespace

Checkpoint load_safetensors_file(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const std::string cfg_path = (dir / "config.json").string();
  Checkpoint ck;
  ck.path = path;
  ck.format = "safetensors";
  // The file the user named is checked before its config, so its own faults are reported first.
  auto mf = MappedFile::open(path);
  add_tensors(ck, parse_safetensors(mf->data(), mf->size(), path, nullptr, &ck.byte_tensors));
  ck.keepalive.push_back(mf);
  ck.files = {path};
  std::error_code ec;
  if (!fs::is_regular_file(cfg_path, ec))
    fail("{}: safetensors file has no config.json beside it ({} not found)", path, cfg_path);
  ck.config = read_hf_config(cfg_path, &ck.extras, &ck.text_model_of, &ck.read_from);
  use_canonical_tensors(ck);
  ck.qk_layout = RopeLayout::Halves;
  ck.tokenizer_path = sibling_tokenizer(dir);
  return ck;
}

Checkpoint load_hf_dir(const std::string& dir_str) {
  const fs::path dir(dir_str);
  const std::string cfg_path = (dir / "config.json").string();
  std::error_code ec;
  if (!fs::is_regular_file(cfg_path, ec)) fail("{}: not a Hugging Face model directory (no config.json)", dir_str);
  Checkpoint ck;
  ck.path = dir_str;
  ck.format = "hf";
  ck.qk_layout = RopeLayout::Halves;
  ck.config = read_hf_config(cfg_path, &ck.extras, &ck.text_model_of, &ck.read_from);
  ck.tokenizer_path = sibling_tokenizer(dir);

  const fs::path single = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::is_regular_file(single, ec)) {
    auto mf = MappedFile::open(single.string());
    add_tensors(ck, parse_safetensors(mf->data(), mf->size(), single.string(), nullptr, &ck.byte_tensors));
    ck.keepalive.push_back(mf);
    ck.files = {single.string()};
    use_canonical_tensors(ck);
    return ck;
  }
  if (!fs::is_regular_file(index, ec)) {
    const char* hint = fs::exists(dir / "pytorch_model.bin", ec) ? " (pytorch_model.bin is not supported)" : "";
    fail("{}: no model.safetensors or model.safetensors.index.json{}", dir_str, hint);
  }
  const std::string ipath = index.string();
  json j;
  try {
    j = json::parse(io::read_text_file(ipath));
  } catch (const json::exception& e) {
    fail("{}: invalid JSON: {}", ipath, e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    fail("{}: missing 'weight_map' object", ipath);
  const json& wm = j["weight_map"];
  // Each shard is mapped and parsed once, however many tensors it holds.
  std::map<std::string, std::map<std::string, TensorView>> shards;
  std::map<std::string, std::map<std::string, ByteTensor>> shard_bytes;
  for (auto it = wm.begin(); it != wm.end(); ++it) {
    if (!it.value().is_string()) fail("{}: weight_map entry '{}' is not a file name", ipath, it.key());
    const std::string shard = it.value().get<std::string>();
    // Shards must live in the model directory itself; a path would let an index read any file.
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
      fail("{}: weight_map entry '{}' names shard '{}', which is not a plain file name", ipath, it.key(), shard);
    if (!shards.count(shard)) {
      const std::string spath = (dir / shard).string();
      if (!fs::is_regular_file(spath, ec))
        fail("{}: shard '{}' (for tensor '{}') is missing", ipath, spath, it.key());
      auto mf = MappedFile::open(spath);
      auto& m = shards[shard];
      for (auto& t : parse_safetensors(mf->data(), mf->size(), spath, nullptr, &shard_bytes[shard])) {
        std::string n = t.name;
        m[n] = std::move(t);
      }
      ck.keepalive.push_back(mf);
      ck.files.push_back(spath);
    }
    auto& m = shards[shard];
    auto f = m.find(it.key());
    if (const auto& bm = shard_bytes[shard]; f == m.end() && bm.count(it.key())) {
      ck.byte_tensors[it.key()] = bm.at(it.key());
      continue;
    }
    if (f == m.end())
      fail("{}: tensor '{}' is listed for shard '{}' but is not in that shard", ipath, it.key(), (dir / shard).string());
    ck.tensors[it.key()] = f->second;
  }
  if (ck.tensors.empty()) fail("{}: weight_map is empty", ipath);
  std::sort(ck.files.begin(), ck.files.end());
  use_canonical_tensors(ck);
  return ck;
}

}  // namespace kvp
