#pragma once
// What makes the records of a results folder comparable, pinned in DIR/manifest.json so a second
// run into the same folder either continues the same study or is refused before it writes a byte.
// A folder holds one model; each lab command (compare, profile, patch) that wrote into it keeps
// its settings there. `eval gsm8k` keeps its own gsm8k_manifest.json (several models, shards)
// but uses the same fingerprints and the same first-difference messages.
//
//   {"kind": "kvparity-results", "schema_version": 1,
//    "model": {"name", "path", "fingerprint", "config": {...}, "tokenizer": "embedded"|{"path","fingerprint"}},
//    "commands": {"compare": {"settings": {...}, "files": ["results.jsonl"]}, "profile": {...}, "patch": {...}}}
//
// "path" is kept for the reader but not compared: the same file reached by another path is the
// same model. A command's settings carry the machine and switches that decide its sides' bits
// (lab/numerics_identity.h). Everything else must match exactly, as long as there are records to protect: a run
// that failed before writing any result (its "files" absent or empty) may be re-run otherwise.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "model/config.h"

namespace kvp {

inline constexpr const char* kResultsManifestFile = "manifest.json";
inline constexpr int kResultsManifestSchemaVersion = 1;

// 64-bit FNV-1a, the hash every fingerprint here uses (stable across builds and machines).
uint64_t fnv1a64(const void* data, size_t n, uint64_t h = 1469598103934665603ull);

// "size=N:fnv1a64=H" over every byte: for data files, where every byte decides a prompt or a target.
std::string file_hash(const std::string& path);

// Size plus a hash of the first and last MiB of every file of the model (a directory's files in
// name order): cheap for multi-GB checkpoints, and catches a different file in practice.
std::string model_fingerprint(const std::string& path);

// The name a model goes by in records: the file's stem or the directory's name ("dir/" -> "dir").
std::string model_name(const std::string& path);

nlohmann::json config_json(const ModelConfig& c);

// The tokenizer a run used, as the manifest records it: "embedded" (GGUF vocabulary), or the
// path and fingerprint of the file (given explicitly, or the one found beside the model).
nlohmann::json tokenizer_identity(const Checkpoint& ckpt, const std::string& explicit_tokenizer);

// The manifest's "model" object.
nlohmann::json model_identity(const Checkpoint& ckpt, const std::string& model_path,
                              const std::string& explicit_tokenizer);

// The parts of a model identity that decide results: without "path" (where it was found this
// time) and the tokenizer's path.
nlohmann::json comparable_model(nlohmann::json model);

// The first place two JSON values differ, as "path: a vs b" ("" when equal).
std::string json_first_difference(const nlohmann::json& a, const nlohmann::json& b, const std::string& path = "");

// `dir` joined with a file name for messages, without the "dir//file" a trailing slash gives.
std::string path_in(const std::string& dir, const std::string& file);

// Refuses (exit 1, naming the first difference) when `dir` holds results of another model, or
// results of a `command` run with other settings, or results of `command` that no manifest
// accounts for (`result_files`: the files that command writes into `dir`). Reads only: a refused
// run leaves the folder byte for byte as it was.
void check_results_manifest(const std::string& dir, const std::string& command, const nlohmann::json& model,
                            const nlohmann::json& settings, const std::vector<std::string>& result_files);

// Creates `dir` if needed and records `command`'s settings and files (atomically; an unchanged
// manifest is not rewritten). Call after check_results_manifest; for commands that write their
// results at once, after the run succeeded.
void record_results_manifest(const std::string& dir, const std::string& command, const nlohmann::json& model,
                             const nlohmann::json& settings, const std::vector<std::string>& result_files);

// The builds that wrote a folder's records (core/build_info.h), oldest first: `built_by` as a
// manifest recorded it (null or a list) with this build added at the end unless it is there. Kept
// beside the settings, never compared: a resumed run from another build continues the study, and
// the folder says so.
nlohmann::json with_build(const nlohmann::json& built_by);

// A command that writes one result file when it is done (profile, patch): the check before the
// work, and after it the manifest entry plus the file. Both identify the model from its path.
struct SingleResult {
  std::string command, file;  // "profile", "profile.json"
  std::string model_path, tokenizer;
  nlohmann::json settings;
};
void check_single_result(const std::string& dir, const SingleResult& r);
void save_single_result(const std::string& dir, const SingleResult& r, const nlohmann::json& result);

// The manifest of `dir`, or null when it has none (older folders). Throws on a corrupt one.
nlohmann::json read_results_manifest(const std::string& dir);

}  // namespace kvp
