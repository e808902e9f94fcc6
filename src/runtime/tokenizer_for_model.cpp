#include "runtime/tokenizer_for_model.h"

#include <filesystem>

#include "core/error.h"

namespace kvp {

std::string tokenizer_file_beside(const std::string& model_path, const std::string& format, const std::string& hint) {
  namespace fs = std::filesystem;
  if (!hint.empty()) return hint;
  const fs::path p(model_path);
  const fs::path dir = fs::is_directory(p) ? p : p.parent_path();
  if (dir.empty() || !fs::is_directory(dir)) return "";
  if (std::string file = tokenizer_file_in(dir.string()); !file.empty()) return file;
  if (format == "llama2c") {
    // llama2.c models ship their vocabulary as tok<N>.bin; use it when it is the only one.
    std::string found;
    int count = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("tok", 0) == 0 && e.path().extension() == ".bin") {
        found = e.path().string();
        ++count;
      }
    }
    if (count == 1) return found;
  }
  return "";
}

namespace {

std::unique_ptr<Tokenizer> find_tokenizer(const std::optional<VocabSpec>& vocab, const std::string& path,
                                          const std::string& format, const std::string& hint,
                                          const std::string& explicit_path) {
  if (!explicit_path.empty()) return load_tokenizer(explicit_path);
  if (vocab) return tokenizer_from_vocab(*vocab);
  const std::string file = tokenizer_file_beside(path, format, hint);
  if (!file.empty()) return load_tokenizer(file);
  fail("no tokenizer found for {}: pass --tokenizer (tokenizer.json, tokenizer.model, llama2.c tokenizer.bin)", path);
}

}  // namespace

std::unique_ptr<Tokenizer> tokenizer_for_model(const Model& model, const std::string& explicit_path) {
  return find_tokenizer(model.vocab, model.path, model.format, model.tokenizer_path, explicit_path);
}

std::unique_ptr<Tokenizer> tokenizer_for_checkpoint(const Checkpoint& ckpt, const std::string& explicit_path) {
  return find_tokenizer(ckpt.vocab, ckpt.path, ckpt.format, ckpt.tokenizer_path, explicit_path);
}

}  // namespace kvp
