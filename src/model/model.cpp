#include "model/model.h"

namespace kvp {

std::shared_ptr<Model> Model::from_checkpoint(const Checkpoint& ckpt, DType dtype) {
  auto m = std::make_shared<Model>();
  m->path = ckpt.path;
  m->format = ckpt.format;
  m->config = ckpt.config;
  m->dtype = dtype;
  m->weights = build_weights(ckpt, dtype);
  m->rope = RopeTable(ckpt.config.head_dim, ckpt.config.max_seq_len, ckpt.config.rope_theta);
  m->vocab = ckpt.vocab;
  m->tokenizer_path = ckpt.tokenizer_path;
  return m;
}

std::shared_ptr<Model> Model::load(const std::string& path, DType dtype) {
  return from_checkpoint(open_checkpoint(path), dtype);
}

}  // namespace kvp
