#include "io/checkpoint.h"

#include <filesystem>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/gguf.h"
#include "io/llama2c.h"
#include "io/safetensors.h"

namespace kvp {

Checkpoint open_checkpoint(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return load_hf_dir(path);
  if (!std::filesystem::exists(path, ec)) fail("{}: no such file or directory", path);
  // Sniff the content rather than trust the extension; the mapping is reused by the loader.
  auto mf = MappedFile::open(path);
  const uint8_t* d = mf->data();
  const size_t n = mf->size();
  Checkpoint ck;
  if (n >= 4 && d[0] == 'G' && d[1] == 'G' && d[2] == 'U' && d[3] == 'F') {
    GgufFile g = parse_gguf(d, n, path);
    ck = gguf_to_checkpoint(g, d, n, path);
  } else if (looks_like_safetensors(d, n)) {
    mf.reset();
    return load_safetensors_file(path);
  } else {
    ck = parse_llama2c(d, n, path);
  }
  ck.keepalive.push_back(mf);
  ck.files = {path};
  return ck;
}

}  // namespace kvp
