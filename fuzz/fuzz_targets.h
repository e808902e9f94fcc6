#pragma once
// The fuzz targets' bodies, one function per target: each takes arbitrary bytes and must return
// (a kvp::Error from a loader is the expected outcome for garbage) without crashing, hanging,
// reading outside the input or allocating far beyond its size. Shared by the libFuzzer entry
// points (fuzz/fuzz_*.cpp) and the regression test over fuzz/regressions/.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/quant.h"
#include "fuzz_common.h"
#include "io/gguf.h"
#include "io/hf_config.h"
#include "io/llama2c.h"
#include "io/safetensors.h"
#include "kernels/dequant_rows.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace kvp::fuzz {

// GGUF: header, metadata, tensor infos (parse_gguf), the Checkpoint built from them
// (gguf_to_checkpoint), its quantised blocks decoded, and the embedded vocabulary turned into a
// tokenizer.
inline int run_gguf(const uint8_t* data, size_t size) {
  expect_ok_or_error([&] {
    kvp::GgufFile g = kvp::parse_gguf(data, size, "fuzz.gguf");
    kvp::Checkpoint ck = kvp::gguf_to_checkpoint(g, data, size, "fuzz.gguf");
    // Views must lie inside the input (gguf_to_checkpoint promises it).
    for (const auto& [name, t] : ck.tensors) {
      const auto* p = static_cast<const uint8_t*>(t.data);
      if (p < data || p + t.nbytes() > data + size) __builtin_trap();
      // Quantised blocks: both decoders read only the tensor's bytes and agree bit for bit.
      if (t.quantized()) {
        const size_t nb = t.nbytes() / kvp::block_bytes(t.quant);
        std::vector<float> a(nb * kvp::block_elems(t.quant)), b(a.size());
        kvp::dequantize_blocks(t.quant, t.data, nb, a.data());
        kvp::dequantize_blocks_fast(t.quant, t.data, nb, b.data());
        for (size_t i = 0; i < a.size(); ++i)
          if (std::memcmp(&a[i], &b[i], 4) != 0 && !(a[i] != a[i] && b[i] != b[i])) __builtin_trap();
      }
    }
    if (ck.vocab) {
      auto tok = kvp::tokenizer_from_vocab(*ck.vocab);
      auto ids = tok->encode("Hello world <s></s> 12 \xC3\xA9\xE2\x96\x81", true);
      for (int id : ids)
        if (id < 0 || id >= tok->vocab_size()) __builtin_trap();
      (void)tok->decode(ids);
    }
  });
  return 0;
}

// safetensors: 8-byte header length, JSON header, data offsets checked against the data section.
inline int run_safetensors(const uint8_t* data, size_t size) {
  (void)kvp::looks_like_safetensors(data, size);
  expect_ok_or_error([&] {
    std::map<std::string, std::string> meta;
    auto ts = kvp::parse_safetensors(data, size, "fuzz.safetensors", &meta);
    for (const auto& t : ts) {
      const auto* p = static_cast<const uint8_t*>(t.data);
      if (t.nbytes() > 0 && (p < data || p + t.nbytes() > data + size)) __builtin_trap();
    }
  });
  return 0;
}

// Sharded HF checkpoints: model.safetensors.index.json, read through load_hf_dir from a scratch
// directory holding a fixed config.json, the fuzzed index and one fuzzed shard "a.safetensors".
// Input layout: index JSON, then the separator "\n--shard--\n", then the shard's bytes.
namespace detail_safetensors_index {
namespace fs = std::filesystem;

inline const char* kConfig = R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":8,
"intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":1,
"vocab_size":16,"max_position_embeddings":32,"rms_norm_eps":1e-5,"rope_theta":10000.0,
"tie_word_embeddings":true,"torch_dtype":"float32"})";

inline void write_file(const fs::path& p, std::string_view bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

// Removed again when the process ends normally.
struct Scratch {
  fs::path dir;
  Scratch() {
    const char* tmp = std::getenv("TMPDIR");
    dir = fs::path(tmp && *tmp ? tmp : "/tmp") / ("kvparity_fuzz_index." + std::to_string(getpid()));
    fs::create_directories(dir);
    write_file(dir / "config.json", kConfig);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

inline const fs::path& scratch() {
  static const Scratch s;
  return s.dir;
}
}  // namespace detail_safetensors_index

inline int run_safetensors_index(const uint8_t* data, size_t size) {
  using namespace detail_safetensors_index;
  const fs::path& dir = scratch();
  std::string_view in = as_text(data, size);
  static constexpr std::string_view kSep = "\n--shard--\n";
  size_t cut = in.find(kSep);
  std::string_view index = cut == std::string_view::npos ? in : in.substr(0, cut);
  std::string_view shard = cut == std::string_view::npos ? std::string_view() : in.substr(cut + kSep.size());
  write_file(dir / "model.safetensors.index.json", index);
  write_file(dir / "a.safetensors", shard);
  expect_ok_or_error([&] { (void)kvp::load_hf_dir(dir.string()); });
  return 0;
}

// config.json -> ModelConfig (all four families), including ModelConfig::validate().
inline int run_hf_config(const uint8_t* data, size_t size) {
  expect_ok_or_error([&] {
    std::map<std::string, double> extras;
    (void)kvp::parse_hf_config(std::string(as_text(data, size)), "fuzz/config.json", &extras);
  });
  return 0;
}

// llama2.c checkpoint: 7-int32 header, then fp32 arrays whose total must match the file size.
inline int run_llama2c(const uint8_t* data, size_t size) {
  expect_ok_or_error([&] {
    kvp::Checkpoint ck = kvp::parse_llama2c(data, size, "fuzz.bin");
    for (const auto& [name, t] : ck.tensors) {
      const auto* p = static_cast<const uint8_t*>(t.data);
      if (p < data || p + t.nbytes() > data + size) __builtin_trap();
    }
  });
  return 0;
}

// llama2.c tokenizer.bin (max_token_length, then score/length/bytes entries), then a short
// encode/decode with whatever vocabulary it held.
inline int run_tokenizer_bin(const uint8_t* data, size_t size) {
  expect_ok_or_error([&] {
    auto tok = kvp::tokenizer_from_llama2c_bin(data, size, "fuzz/tokenizer.bin");
    auto ids = tok->encode("Hello world <s> 12 \xC3\xA9\xF0\x9F\x98\x80", true);
    for (int id : ids)
      if (id < 0 || id >= tok->vocab_size()) __builtin_trap();
    (void)tok->decode(ids);
  });
  return 0;
}

// SentencePiece tokenizer.model (protobuf: pieces, trainer and normalizer specs), then a short
// encode/decode with whatever vocabulary it held.
inline int run_tokenizer_model(const uint8_t* data, size_t size) {
  expect_ok_or_error([&] {
    auto tok = kvp::tokenizer_from_vocab(kvp::vocab_from_sentencepiece_model(data, size, "fuzz/tokenizer.model"),
                                         "fuzz/tokenizer.model");
    auto ids = tok->encode("Hello world <s> 12 \xC3\xA9\xF0\x9F\x98\x80", true);
    for (int id : ids)
      if (id < 0 || id >= tok->vocab_size()) __builtin_trap();
    (void)tok->decode(ids);
  });
  return 0;
}

// HF tokenizer.json: model (BPE vocab + merges), added_tokens, normalizer, pre_tokenizer,
// post_processor and decoder, then a short encode/decode with the result.
inline int run_tokenizer_json(const uint8_t* data, size_t size) {
  expect_ok_or_error([&] {
    auto tok = kvp::tokenizer_from_json(as_text(data, size), "fuzz/tokenizer.json");
    auto ids = tok->encode("Hello world <s> <|endoftext|> 12 \xC3\xA9\xF0\x9F\x98\x80", tok->default_add_bos());
    for (int id : ids)
      if (id < 0 || id >= tok->vocab_size()) __builtin_trap();
    (void)tok->decode(ids);
  });
  return 0;
}

// Encode/decode of arbitrary bytes with three fixed tokenizers: a llama2.c tokenizer.bin, a
// SentencePiece-style tokenizer.json (byte fallback) and a byte-level (GPT-2 style) tokenizer.json,
// all generated in memory so the target needs no files.
// Input: byte 0 picks the tokenizer and add_bos; the rest is the text, and is also read as
// 16-bit token ids to decode.
namespace detail_tokenize {

inline std::vector<uint8_t> llama2c_bin_from(const kvp::VocabSpec& v) {
  std::vector<uint8_t> out(4);
  int32_t max_len = 1;
  for (const auto& t : v.tokens) max_len = std::max<int32_t>(max_len, int32_t(t.size()));
  std::memcpy(out.data(), &max_len, 4);
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    float score = i < v.scores.size() ? v.scores[i] : 0.0f;
    int32_t len = int32_t(v.tokens[i].size());
    size_t at = out.size();
    out.resize(at + 8 + size_t(len));
    std::memcpy(out.data() + at, &score, 4);
    std::memcpy(out.data() + at + 4, &len, 4);
    std::memcpy(out.data() + at + 8, v.tokens[i].data(), size_t(len));
  }
  return out;
}

inline std::string byte_level_json() {
  using nlohmann::json;
  const auto& b2u = kvp::tok::byte_to_unicode();
  auto ch = [&](uint8_t b) {
    std::string s;
    kvp::tok::append_utf8(s, b2u[b]);
    return s;
  };
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[ch(uint8_t(b))] = b;
  const std::string G = ch(' ');
  vocab[G + "t"] = 256;
  vocab["he"] = 257;
  vocab[G + "the"] = 258;
  vocab["in"] = 259;
  vocab["ca"] = 260;
  vocab["cat"] = 261;
  vocab["12"] = 263;
  json j;
  j["added_tokens"] = json::array({{{"id", 262}, {"content", "<|endoftext|>"}, {"special", true}}});
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                        {"use_regex", true}};
  j["post_processor"] = {{"type", "ByteLevel"}};
  j["decoder"] = {{"type", "ByteLevel"}};
  j["model"] = {{"type", "BPE"}, {"vocab", vocab},
                {"merges", {G + " t", "h e", G + "t he", "i n", "c a", "ca t", "1 2"}}};
  return j.dump();
}

struct Tokenizers {
  std::unique_ptr<kvp::Tokenizer> t[3];
  Tokenizers() {
    auto bin = llama2c_bin_from(kvp::make_synthetic_vocab(512));
    t[0] = kvp::tokenizer_from_llama2c_bin(bin.data(), bin.size(), "synthetic tokenizer.bin");
    t[1] = kvp::tokenizer_from_json(kvp::make_synthetic_tokenizer_json(512), "synthetic tokenizer.json");
    t[2] = kvp::tokenizer_from_json(byte_level_json(), "byte-level tokenizer.json");
  }
};

}  // namespace detail_tokenize

inline int run_tokenize(const uint8_t* data, size_t size) {
  using namespace detail_tokenize;
  static const Tokenizers toks;
  if (size == 0) return 0;
  const kvp::Tokenizer& tok = *toks.t[data[0] % 3];
  const bool add_bos = (data[0] >> 2) & 1;
  std::string_view text = as_text(data + 1, size - 1);

  std::vector<int> ids = tok.encode(text, add_bos);
  for (int id : ids)
    if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
  std::string back = tok.decode(ids);
  kvp::Utf8StreamDecoder stream;
  std::string streamed;
  int prev = -1;
  for (int id : ids) {
    streamed += stream.push(tok.token_bytes(prev, id));
    prev = id;
  }
  streamed += stream.flush();

  // Arbitrary in-range ids decode without error, one at a time and as a sequence.
  std::vector<int> any;
  for (size_t i = 1; i + 1 < size; i += 2) any.push_back(int(data[i] | (data[i + 1] << 8)) % tok.vocab_size());
  (void)tok.decode(any);
  for (int id : any) (void)tok.piece(id);
  return 0;
}

// Chat templates: a model's Jinja template read for its format, and a conversation of arbitrary
// texts (special tokens spelled inside them included) rendered and encoded with a vocabulary that
// holds every format's special tokens. Input: byte 0 picks the format (or, with bit 4, detection
// over the rest as a template) and a leading system message (bit 3); the rest, split at NUL bytes,
// is the messages' texts, user and assistant in turn.
inline int run_chat_template(const uint8_t* data, size_t size) {
  static const std::unique_ptr<kvp::Tokenizer> tok = [] {
    nlohmann::json j = nlohmann::json::parse(kvp::make_synthetic_tokenizer_json(504));
    const char* specials[] = {"<|im_start|>",        "<|im_end|>",        "<start_of_turn>", "<end_of_turn>",
                              "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",      "<|extra|>"};
    for (int i = 0; i < 8; ++i)
      j["added_tokens"].push_back({{"id", 504 + i}, {"content", specials[i]}, {"special", true}});
    return kvp::tokenizer_from_json(j.dump(), "chat tokenizer");
  }();
  if (size == 0) return 0;
  const std::string_view rest = as_text(data + 1, size - 1);
  expect_ok_or_error([&] {
    static const char* names[] = {"llama2", "llama3", "llama3.1", "mistral", "gemma", "chatml"};
    std::optional<kvp::ChatTemplate> t;
    if (data[0] & 16)
      t = kvp::chat_template_of(std::string(rest));
    else
      t = kvp::parse_chat_template(names[(data[0] & 7) % 6], "--chat-template");
    if (!t) return;
    if (data[0] & 32) t = kvp::with_system(*t, std::string(rest.substr(0, rest.find('\0'))), "--system");
    (void)t->describe();
    std::vector<kvp::ChatMessage> messages;
    if (data[0] & 8) messages.push_back({"system", "Be brief."});
    size_t at = 0;
    for (int k = 0; at <= rest.size() && k < 16; ++k) {
      const size_t end = std::min(rest.find('\0', at), rest.size());
      messages.push_back({k % 2 == 0 ? "user" : "assistant", std::string(rest.substr(at, end - at))});
      at = end + 1;
    }
    const kvp::ChatEncoder enc(*t, *tok, "fuzz");
    const std::vector<int> ids = enc.encode(messages);
    for (int id : ids)
      if (id < 0 || id >= tok->vocab_size()) __builtin_trap();
    (void)tok->decode(ids);
  });
  return 0;
}

}  // namespace kvp::fuzz
