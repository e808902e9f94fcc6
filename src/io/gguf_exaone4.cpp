#include "io/gguf_exaone4.h"

#include <fmt/format.h>

#include "core/error.h"

namespace kvp {

namespace {

// llama.cpp's EXAONE4 load_hparams: a 64-layer model (EXAONE-4.0-32B) is windowed on all but every
// 4th layer, 4096 positions unless attention.sliding_window says; no other is windowed.
constexpr int kLlamaCppWindowedLayers = 64;
constexpr int kLlamaCppPeriod = 4;
constexpr int kLlamaCppWindow = 4096;

// The global layers of c: those the window does not apply to (every layer without a window).
std::vector<int> global_layers(const ModelConfig& c) {
  std::vector<int> g;
  for (int l = 0; l < c.n_layers; ++l)
    if (c.window_for_layer(l) == 0) g.push_back(l);
  return g;
}

}  // namespace

void read_exaone4_gguf_keys(const GgufMeta& m, const std::string& A, ModelConfig& c, const std::string& name) {
  c.arch = Arch::Exaone4;
  c.nope_layers.clear();
  c.sliding_window_period = 1;
  const std::string wkey = A + "attention.sliding_window", pkey = A + "attention.sliding_window_pattern";
  c.sliding_window = m.get_int(wkey, 0);
  const GgufValue* p = m.find(pkey);
  // No window: every layer global, and every one rotates (Exaone4Attention rotates when
  // sliding_window is None).
  if (c.sliding_window == 0) {
    if (p != nullptr) fail("{}: key '{}' without '{}': a pattern of windows of no size", name, pkey, wkey);
    return;
  }
  std::vector<bool> windowed;
  if (p == nullptr) {
    if (c.n_layers != kLlamaCppWindowedLayers)
      fail("{}: key '{}' without '{}' in a {}-layer model: llama.cpp would run it without a window, transformers' "
           "Exaone4Config windows all but every 4th layer; kvparity does not guess (add the pattern, one bool a layer)",
           name, wkey, pkey, c.n_layers);
    for (int l = 0; l < c.n_layers; ++l) windowed.push_back(ModelConfig::local_in_period(l, kLlamaCppPeriod));
  } else {
    if (p->type != GgufType::Array || p->elem != GgufType::Bool || p->size() != size_t(c.n_layers))
      fail("{}: key '{}' must be an array of one bool per layer ({} layers)", name, pkey, c.n_layers);
    for (size_t l = 0; l < p->size(); ++l) windowed.push_back(p->at(l).u != 0);
  }
  for (int l = 0; l < c.n_layers; ++l)
    if (!windowed[size_t(l)]) c.nope_layers.push_back(l);  // the global layers take no RoPE
  int bad = 0;
  const int period = window_period_of(windowed, &bad);
  if (period < 0)
    fail("{}: windowed layers that are not all but every n-th layer are not supported (key '{}', layer {})", name,
         pkey, bad);
  if (period == 0) {  // none windowed: every layer global, none rotating
    c.sliding_window = 0;
    return;
  }
  c.sliding_window_period = period;
}

void exaone4_gguf_keys(const ModelConfig& c, const std::string& A, const std::string& path,
                       std::vector<std::pair<std::string, GgufValue>>& out) {
  if (c.sliding_window == 0 && c.nope_layers.empty()) return;  // every layer global and rotating
  // A window (or global NoPE) ties the rest: exactly the global layers skip RoPE.
  if (c.nope_layers != global_layers(c))
    fail("{}: exaone4's layers without RoPE are its global layers when it has a window; this model's are not, "
         "which has no GGUF form",
         path);
  out.emplace_back(A + "attention.sliding_window",
                   GgufValue::of_u32(uint32_t(c.sliding_window > 0 ? c.sliding_window : kLlamaCppWindow)));
  std::vector<GgufValue> pattern;
  for (int l = 0; l < c.n_layers; ++l) pattern.push_back(GgufValue::of_bool(c.window_for_layer(l) > 0));
  out.emplace_back(A + "attention.sliding_window_pattern", GgufValue::of_array(GgufType::Bool, pattern));
}

std::vector<std::string> exaone4_llama_cpp_gaps(const ModelConfig& c) {
  std::vector<std::string> gaps;
  const bool llama_cpp_windows = c.n_layers == kLlamaCppWindowedLayers;
  const bool as_32b = c.sliding_window > 0 && c.sliding_window_period == kLlamaCppPeriod;
  if (c.sliding_window == 0 && c.nope_layers.empty() && !llama_cpp_windows) return gaps;
  if (llama_cpp_windows && as_32b) return gaps;
  if (llama_cpp_windows)
    gaps.push_back(
        "llama.cpp's exaone4 loader windows a 64-layer model on all but every 4th layer (EXAONE-4.0-32B's), and "
        "takes no RoPE in the others; this model is not windowed so");
  else
    gaps.push_back(fmt::format("llama.cpp's exaone4 loader ignores the window and its pattern below 64 layers: it "
                               "runs this {}-layer model without a window and rotates every layer, including its "
                               "global NoPE layers",
                               c.n_layers));
  return gaps;
}

}  // namespace kvp
