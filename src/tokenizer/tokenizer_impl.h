#pragma once
// Internal to src/tokenizer/: the two concrete tokenizers and the helpers they share.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace kvp::tok {

// ---- UTF-8 -------------------------------------------------------------------------------------

// Length of the valid UTF-8 sequence at s[i]; 0 if invalid there; -1 if s ends inside a sequence
// that is valid so far (more bytes could complete it).
int utf8_valid_len(std::string_view s, size_t i);
// run.c's grouping: a lead byte plus up to 3 following continuation bytes, regardless of validity.
size_t utf8_loose_len(std::string_view s, size_t i);
void append_utf8(std::string& out, uint32_t cp);
extern const std::string kMetaspace;  // U+2581 "▁"

// Piece "<0xAB>" -> 0xAB, or -1.
int parse_byte_piece(std::string_view piece);
std::string byte_piece(uint8_t b);

// GPT-2 byte <-> printable code point table.
const std::vector<uint32_t>& byte_to_unicode();
// Unicode code point -> byte, or -1.
int unicode_to_byte(uint32_t cp);

// Transparent hashing so lookups by string_view do not allocate.
struct StrHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using PieceMap = std::unordered_map<std::string, int, StrHash, std::equal_to<>>;

inline int find_piece(const PieceMap& m, std::string_view s) {
  auto it = m.find(s);
  return it == m.end() ? -1 : it->second;
}

// ---- regex pre-splitting (PCRE2, UTF + UCP) ----------------------------------------------------

class Regex {
 public:
  Regex(const std::string& pattern, const std::string& origin);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Matches as [begin, end) byte ranges; text outside any match is not reported.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

 private:
  void* code_ = nullptr;  // pcre2_code_8*
};

extern const char* const kGpt2Pattern;
extern const char* const kQwen2Pattern;
extern const char* const kLlama3Pattern;
extern const char* const kO200kPattern;
extern const char* const kTekkenPattern;

// llama.cpp's DEFAULT pre-tokenizer (GGUF pre "default", or none): four splits in this order.
const std::vector<std::string>& default_split_patterns();

// The byte-level split regexes that have a GGUF pre-tokenizer name (tokenizer.ggml.pre): each is a
// tokenizer.json Split (Isolated) before a ByteLevel without its own regex.
struct SplitRegex {
  const char* pattern;
  const char* gguf_pre;
};
const std::vector<SplitRegex>& known_split_regexes();

// ---- the llama2.c tokenizer --------------------------------------------------------------------

class Llama2cTokenizer final : public Tokenizer {
 public:
  static std::unique_ptr<Llama2cTokenizer> load(const std::string& path);
  // The same from bytes in memory; `path` names them in errors.
  static std::unique_ptr<Llama2cTokenizer> from_bytes(const uint8_t* data, size_t size, const std::string& path);

  std::vector<int> encode(std::string_view text, bool add_bos) const override;
  std::string token_bytes(int prev, int id) const override;
  int vocab_size() const override { return int(pieces_.size()); }
  int bos_id() const override { return bos_; }
  int eos_id() const override { return eos_; }
  std::string piece(int id) const override;
  bool is_control(int id) const override { return id == bos_ || id == eos_; }
  void set_special_ids(int bos, int eos) override;
  VocabSpec to_vocab_spec() const override;

 private:
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<int16_t> byte_of_;  // -1, or the byte a "<0xXX>" piece stands for
  PieceMap ids_;
  int bos_ = 1, eos_ = 2;
  int max_token_length_ = 0;
};

// ---- generic BPE (tokenizer.json and GGUF vocabularies) ----------------------------------------

struct AddedToken {
  std::string content;
  int id = -1;
  bool special = false;
};

enum class Prepend { Never, First, Always };

struct BpeConfig {
  std::string origin;  // file name or "GGUF vocabulary", for messages
  std::vector<std::string> pieces;
  std::vector<int32_t> types;  // TokenType; filled in for every id
  std::vector<float> scores;   // merge_by_score only
  std::vector<std::pair<int, int>> merges;  // rank order; merge_by_score: unused
  bool merge_by_score = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
  bool fuse_unk = false;
  int unk_id = -1, bos_id = -1, eos_id = -1;
  bool add_bos = false;

  // Normalisation / pre-tokenisation, applied to each stretch of text between added tokens.
  std::string prepend_str;            // text prepended per `prepend` (SentencePiece dummy prefix)
  Prepend prepend = Prepend::Never;
  bool prepend_unless_present = false;  // HF Metaspace: no prefix if the text already starts with it
  std::vector<std::pair<std::string, std::string>> replacements;  // literal, in order
  bool metaspace_split = false;       // split before each "▁"
  std::vector<std::string> split_patterns;  // regex pre-splits, in order ("Isolated" behaviour)
  bool byte_level = false;            // map bytes to GPT-2 code points before the model
  bool byte_level_prefix_space = false;

  // Decoding.
  bool decode_byte_level = false;
  bool decode_metaspace = false;      // "▁" -> " "
  bool decode_byte_fallback = false;  // "<0xXX>" -> byte
  bool strip_first_space = false;     // one leading space of the first token

  std::vector<AddedToken> added;      // matched literally in the input, longest first
  std::string model_name = "llama";   // for to_vocab_spec
  std::string pre;
};

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(BpeConfig cfg);

  std::vector<int> encode(std::string_view text, bool add_bos) const override;
  std::string token_bytes(int prev, int id) const override;
  int vocab_size() const override { return int(cfg_.pieces.size()); }
  int bos_id() const override { return cfg_.bos_id; }
  int eos_id() const override { return cfg_.eos_id; }
  std::string piece(int id) const override;
  bool is_control(int id) const override;
  bool default_add_bos() const override { return cfg_.add_bos && cfg_.bos_id >= 0; }
  void set_special_ids(int bos, int eos) override;
  VocabSpec to_vocab_spec() const override;

  const BpeConfig& config() const { return cfg_; }

 private:
  void encode_text(std::string_view text, bool at_start, std::vector<int>& out) const;
  void encode_word(std::string_view word, std::vector<int>& out) const;
  void encode_word_by_rank(std::string_view word, std::vector<int>& out) const;
  void encode_word_by_score(std::string_view word, std::vector<int>& out) const;
  void emit_unknown_char(std::string_view ch, std::vector<int>& out) const;
  bool mergeable(int id) const;

  BpeConfig cfg_;
  PieceMap ids_;
  std::unordered_map<uint64_t, std::pair<int, int>> merge_rank_;  // (left,right) -> (rank, result)
  int byte_ids_[256];
  std::vector<std::unique_ptr<Regex>> splits_;
  // Added tokens bucketed by first byte, longest first.
  std::vector<std::vector<int>> added_by_byte_;
};

std::unique_ptr<BpeTokenizer> bpe_from_json_text(std::string_view text, const std::string& origin);

}  // namespace kvp::tok
