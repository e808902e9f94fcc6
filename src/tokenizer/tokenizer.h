#pragma once
// Text <-> token ids. Implementations: llama2.c tokenizer.bin, HF tokenizer.json (SentencePiece-like
// BPE with byte fallback, and byte-level BPE), and the vocabulary embedded in GGUF files, which also
// serves SentencePiece's own tokenizer.model.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab_spec.h"

namespace kvp {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Encodes text; special/added tokens written literally in the text (e.g. "<s>") map to their ids.
  virtual std::vector<int> encode(std::string_view text, bool add_bos) const = 0;
  // Raw bytes of one token as it appears after `prev` (handles the SentencePiece leading-space rule
  // after BOS and byte tokens <0xXX>). May be an incomplete UTF-8 sequence.
  virtual std::string token_bytes(int prev, int id) const = 0;
  virtual int vocab_size() const = 0;
  virtual int bos_id() const = 0;
  virtual int eos_id() const = 0;  // -1 if none
  // The token's piece as stored in the vocabulary (for display and JSON).
  virtual std::string piece(int id) const = 0;
  // Whole-sequence decode (control tokens such as BOS/EOS produce no text).
  std::string decode(const std::vector<int>& ids) const;

  // Control tokens (BOS/EOS and other special tokens) produce no text when decoded.
  virtual bool is_control(int id) const { return id == bos_id() || id == eos_id(); }
  // Whether the model family expects BOS in front of a prompt (Llama/Mistral/Gemma yes, Qwen2 no).
  virtual bool default_add_bos() const { return bos_id() >= 0; }
  // Overrides the BOS/EOS ids found in the files (-1 = none). Ids must be within the vocabulary.
  virtual void set_special_ids(int bos_id, int eos_id);
  // The vocabulary as GGUF would store it (e.g. to embed a tokenizer.bin into a .gguf).
  // Throws kvp::Error if this tokenizer cannot be expressed that way.
  virtual VocabSpec to_vocab_spec() const;
};

// Turns a stream of token byte strings into valid UTF-8 text: holds back an incomplete multi-byte
// sequence until it is complete, and replaces invalid bytes with U+FFFD.
class Utf8StreamDecoder {
 public:
  std::string push(std::string_view bytes);  // returns the text that is now complete
  std::string flush();                       // what remains, invalid parts replaced

 private:
  std::string pending_;
};

// The file names a model directory's tokenizer goes by, in the order they are looked for.
inline constexpr const char* kTokenizerFileNames[] = {"tokenizer.json", "tokenizer.bin", "tokenizer.model"};
// The first of kTokenizerFileNames in `dir`; "" when it holds none.
std::string tokenizer_file_in(const std::string& dir);
// Loads llama2.c tokenizer.bin, HF tokenizer.json, SentencePiece tokenizer.model, or a directory's
// tokenizer (tokenizer_file_in).
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);
// `origin` names the vocabulary's source in error messages.
std::unique_ptr<Tokenizer> tokenizer_from_vocab(const VocabSpec& spec, const std::string& origin = "GGUF vocabulary");
// Same as tok.to_vocab_spec().
VocabSpec vocab_from_tokenizer(const Tokenizer& tok);
// A tokenizer.json held in memory; `origin` names it in error messages.
std::unique_ptr<Tokenizer> tokenizer_from_json(std::string_view json_text, const std::string& origin);
// SentencePiece's tokenizer.model (a protobuf): true when the bytes start as one does.
bool looks_like_sentencepiece_model(const uint8_t* data, size_t size);
// Its vocabulary as llama.cpp would embed it in a GGUF (pieces, scores, token types, special ids,
// dummy prefix), for tokenizer_from_vocab. BPE models only; a normaliser, whitespace folding or a
// unigram model is refused with an error naming it (the tokens would differ from SentencePiece's).
VocabSpec vocab_from_sentencepiece_model(const uint8_t* data, size_t size, const std::string& origin);
// A llama2.c tokenizer.bin held in memory; `origin` names it in error messages.
std::unique_ptr<Tokenizer> tokenizer_from_llama2c_bin(const uint8_t* data, size_t size, const std::string& origin);

// Tokenizer for models the project generates itself: SentencePiece-style BPE with <unk>=0, <s>=1,
// </s>=2, byte-fallback tokens <0x00>..<0xFF> at 3..258, then "▁", letters, digits, punctuation and
// English word prefixes built by merges; ids beyond what can be built are unreachable "<extra_N>".
// vocab_size must be at least 300.
std::string make_synthetic_tokenizer_json(int vocab_size);
// The same vocabulary as GGUF data (model "llama", scores give the merge order).
VocabSpec make_synthetic_vocab(int vocab_size);

}  // namespace kvp
