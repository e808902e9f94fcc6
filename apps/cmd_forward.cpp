#include <climits>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/error.h"
#include "lab/npy.h"

namespace kvp::cli {
namespace {

// Collects hidden states as transformers' output_hidden_states does: the embedding output, each
// layer's output, with the last entry replaced by the final norm's output.
class HiddenCapture final : public ForwardHooks {
 public:
  HiddenCapture(int n_layers, int rows, int dim) : n_layers_(n_layers), dim_(dim), rows_(rows),
                                                   data_(size_t(n_layers + 1) * rows * dim) {}
  void on(const HookSite& s, float* d) override {
    int slot = -1;
    if (s.point == HookPoint::Embed) slot = 0;
    else if (s.point == HookPoint::ResidPost && s.layer < n_layers_ - 1) slot = s.layer + 1;
    else if (s.point == HookPoint::FinalNorm) slot = n_layers_;
    if (slot < 0) return;
    std::copy(d, d + size_t(s.rows) * dim_, data_.begin() + (size_t(slot) * rows_ + s.start_pos) * dim_);
  }
  const std::vector<float>& data() const { return data_; }

 private:
  int n_layers_, dim_, rows_;
  std::vector<float> data_;
};

}  // namespace

void register_forward(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    std::string tokens, tokens_file, logits_out, hidden_out;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("forward", "one cache-free forward pass; write logits (and hidden states) as .npy");
  // No --tokenizer (the input is token ids) and no --cache-capacity (the pass sizes its cache to the
  // tokens): both would be ignored.
  o->model.add(cmd, {.tokenizer = false, .cache_capacity = false});
  auto* tokens = cmd->add_option("--tokens", o->tokens, "token ids: 1,2,3, \"1 2 3\" or a JSON array [1, 2, 3]");
  auto* file =
      cmd->add_option("--tokens-file", o->tokens_file, "JSON file: an array of ids, or an object with input_ids");
  tokens->excludes(file);
  file->excludes(tokens);
  cmd->add_option("--logits-out", o->logits_out, "output .npy, float32 [positions, vocab]")->required();
  cmd->add_option("--hidden-out", o->hidden_out, "output .npy, float32 [layers+1, positions, hidden]");
  cmd->callback([o, cmd] {
    o->model.check(cmd);
    std::vector<int> ids;
    if (given(cmd, "--tokens")) {
      ids = parse_token_list(o->tokens, "--tokens");
    } else if (given(cmd, "--tokens-file")) {
      std::ifstream in(o->tokens_file);
      if (!in) fail("{}: cannot open", o->tokens_file);
      nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
      if (j.is_discarded()) fail("{}: invalid JSON", o->tokens_file);
      if (j.is_object() && j.contains("input_ids")) j = j["input_ids"];
      if (!j.is_array()) fail("{}: expected an array of token ids (or an object with input_ids)", o->tokens_file);
      for (const auto& v : j) {
        if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > INT_MAX)
          fail("{}: '{}' is not a token id", o->tokens_file, v.dump());
        ids.push_back(v.get<int>());
      }
    } else {
      fail_usage("pass --tokens or --tokens-file");
    }
    if (ids.empty()) fail("{}: no token ids", o->tokens_file);
    auto model = Model::load(o->model.model, o->model.compute_dtype());
    const ModelConfig& c = model->config;
    if (int(ids.size()) > c.max_seq_len)
      fail("{} tokens exceed the model's context length {}", ids.size(), c.max_seq_len);
    EngineOptions eo = o->model.engine();
    eo.cache_capacity = int(ids.size());
    Engine engine(model, eo);
    std::unique_ptr<HiddenCapture> capture;
    ForwardOptions fo;
    fo.all_logits = true;
    if (!o->hidden_out.empty()) {
      capture = std::make_unique<HiddenCapture>(c.n_layers, int(ids.size()), c.dim);
      fo.hooks = capture.get();
    }
    const float* logits = engine.forward(ids.data(), int(ids.size()), 0, fo);
    write_npy_f32(o->logits_out, {int64_t(ids.size()), c.vocab_size}, logits);
    if (capture) write_npy_f32(o->hidden_out, {c.n_layers + 1, int64_t(ids.size()), c.dim}, capture->data().data());
  });
}

}  // namespace kvp::cli
