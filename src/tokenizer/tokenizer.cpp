#include "tokenizer/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/mapped_file.h"
#include "tokenizer/tokenizer_impl.h"

namespace kvp {
namespace tok {

const std::string kMetaspace = "\xE2\x96\x81";

namespace {

// Second-byte ranges that keep a sequence well formed (Unicode Table 3-7): this excludes overlong
// forms, surrogates and code points above U+10FFFF.
struct Lead {
  int len;
  uint8_t lo, hi;
};

Lead lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Valid-prefix length of the sequence at s[i] (>= 1 when the lead byte is valid), and whether it
// is complete. Used both to validate and to size the "maximal subpart" replaced by one U+FFFD.
struct SeqScan {
  int valid_prefix;
  bool complete;
  bool truncated;  // valid so far but the input ended
};

SeqScan scan_seq(std::string_view s, size_t i) {
  Lead L = lead_info(uint8_t(s[i]));
  if (L.len == 0) return {0, false, false};
  if (L.len == 1) return {1, true, false};
  int n = 1;
  for (int k = 1; k < L.len; ++k) {
    if (i + k >= s.size()) return {n, false, true};
    uint8_t c = uint8_t(s[i + k]);
    uint8_t lo = k == 1 ? L.lo : 0x80, hi = k == 1 ? L.hi : 0xBF;
    if (c < lo || c > hi) return {n, false, false};
    ++n;
  }
  return {n, true, false};
}

const std::string kReplacement = "\xEF\xBF\xBD";

}  // namespace

int utf8_valid_len(std::string_view s, size_t i) {
  SeqScan sc = scan_seq(s, i);
  if (sc.complete) return sc.valid_prefix;
  return sc.truncated ? -1 : 0;
}

size_t utf8_loose_len(std::string_view s, size_t i) {
  size_t n = 1;
  while (i + n < s.size() && n < 4 && (uint8_t(s[i + n]) & 0xC0) == 0x80) ++n;
  return n;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

int parse_byte_piece(std::string_view p) {
  if (p.size() != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>') return -1;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  int h = hex(p[3]), l = hex(p[4]);
  return h < 0 || l < 0 ? -1 : h * 16 + l;
}

std::string byte_piece(uint8_t b) { return fmt::format("<0x{:02X}>", b); }

const std::vector<uint32_t>& byte_to_unicode() {
  // GPT-2: printable Latin-1 bytes keep their code point; the other 68 bytes are moved, in byte
  // order, to U+0100 onwards so that every byte becomes a visible, non-space character.
  static const std::vector<uint32_t> table = [] {
    std::vector<uint32_t> t(256);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = keep ? uint32_t(b) : next++;
    }
    return t;
  }();
  return table;
}

int unicode_to_byte(uint32_t cp) {
  static const std::vector<int16_t> inv = [] {
    std::vector<int16_t> v(512, -1);
    const auto& t = byte_to_unicode();
    for (int b = 0; b < 256; ++b) v[t[b]] = int16_t(b);
    return v;
  }();
  return cp < inv.size() ? inv[cp] : -1;
}

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Qwen2's, and Llama-3's (cl100k's) which differs only in taking digits three at a time: "2024"
// is "2" "0" "2" "4" to Qwen2 and "202" "4" to Llama-3.
const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// o200k (GPT-4o, gpt-oss): a word splits where lower case turns to upper ("camel" "Case"), a
// contraction stays on its word, and "/" and newlines trail punctuation.
const char* const kO200kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Tekken (Mistral-Nemo, Mistral-Small-3, Pixtral): o200k's word split without its contractions,
// digits one at a time.
const char* const kTekkenPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Not GPT-2's split, though GGUF "default" reads like it: runs of punctuation and of $+<=>^~| leave
// their words first (" ,x" is " " "," "x"), and digit runs are then cut into threes from the left
// ("12345" is "123" "45"). Each split refines the pieces of the one before; what a split does not
// match stays a piece, as in llama.cpp's unicode_regex_split.
const std::vector<std::string>& default_split_patterns() {
  static const std::vector<std::string> k = {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2Pattern, R"(\p{N}+)",
                                             "[0-9][0-9][0-9]"};
  return k;
}

const std::vector<SplitRegex>& known_split_regexes() {
  static const std::vector<SplitRegex> k = {{kQwen2Pattern, "qwen2"},
                                            {kLlama3Pattern, "llama-bpe"},
                                            {kO200kPattern, "gpt-4o"},
                                            {kTekkenPattern, "tekken"}};
  return k;
}

Regex::Regex(const std::string& pattern, const std::string& origin) {
  int err = 0;
  PCRE2_SIZE off = 0;
  // MATCH_INVALID_UTF lets arbitrary bytes through: invalid sequences simply never match, and the
  // caller keeps them as separate pieces.
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    fail("{}: cannot compile pre-tokenizer regex at offset {}: {} (pattern: {})", origin, size_t(off),
         reinterpret_cast<const char*>(msg), pattern);
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional speed-up; the interpreter is the fallback
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  size_t pos = 0;
  while (pos <= text.size()) {
    int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), pos, 0, md, nullptr);
    if (rc < 0) break;  // PCRE2_ERROR_NOMATCH, or a resource limit: the rest stays one gap
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t b = ov[0], e = ov[1];
    if (e == b) {
      // An empty match carries no text; step over one character so the loop advances.
      if (b >= text.size()) break;
      int n = utf8_valid_len(text, b);
      pos = b + (n > 0 ? size_t(n) : 1);
      continue;
    }
    out.emplace_back(b, e);
    pos = e;
  }
  pcre2_match_data_free(md);
  return out;
}

}  // namespace tok

// ---- Tokenizer base ----------------------------------------------------------------------------

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  Utf8StreamDecoder dec;
  std::string out;
  int prev = -1;
  for (int id : ids) {
    if (!is_control(id)) out += dec.push(token_bytes(prev, id));
    prev = id;
  }
  out += dec.flush();
  return out;
}

void Tokenizer::set_special_ids(int, int) { fail("this tokenizer does not allow overriding BOS/EOS"); }

VocabSpec Tokenizer::to_vocab_spec() const { fail("this tokenizer cannot be converted to a GGUF vocabulary"); }

VocabSpec vocab_from_tokenizer(const Tokenizer& tok) { return tok.to_vocab_spec(); }

// ---- Utf8StreamDecoder -------------------------------------------------------------------------

std::string Utf8StreamDecoder::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    tok::SeqScan sc = tok::scan_seq(pending_, i);
    if (sc.complete) {
      out.append(pending_, i, size_t(sc.valid_prefix));
      i += size_t(sc.valid_prefix);
    } else if (sc.truncated) {
      break;  // wait for the rest of the sequence
    } else {
      out += tok::kReplacement;
      i += size_t(std::max(sc.valid_prefix, 1));
    }
  }
  pending_.erase(0, i);
  return out;
}

std::string Utf8StreamDecoder::flush() {
  std::string out = push("");
  if (!pending_.empty()) out += tok::kReplacement;  // only a truncated sequence can remain
  pending_.clear();
  return out;
}

// ---- loading -----------------------------------------------------------------------------------

std::unique_ptr<Tokenizer> tokenizer_from_json(std::string_view json_text, const std::string& origin) {
  return tok::bpe_from_json_text(json_text, origin);
}

std::unique_ptr<Tokenizer> tokenizer_from_llama2c_bin(const uint8_t* data, size_t size, const std::string& origin) {
  return tok::Llama2cTokenizer::from_bytes(data, size, origin);
}

std::string tokenizer_file_in(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const char* name : kTokenizerFileNames)
    if (fs::exists(fs::path(dir) / name, ec)) return (fs::path(dir) / name).string();
  return "";
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) fail("{}: tokenizer file not found", path);
  std::string file = path;
  if (fs::is_directory(path, ec)) {
    file = tokenizer_file_in(path);
    if (file.empty()) fail("{}: directory holds no tokenizer.json, tokenizer.bin or tokenizer.model", path);
  }
  auto mf = MappedFile::open(file);
  if (mf->size() == 0) fail("{}: tokenizer file is empty", file);
  std::string_view head(reinterpret_cast<const char*>(mf->data()), std::min<size_t>(mf->size(), 64));
  size_t k = 0;
  if (head.substr(0, 3) == "\xEF\xBB\xBF") k = 3;  // UTF-8 BOM in front of JSON
  auto skip_ws = [&](size_t i) {
    while (i < head.size() && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t')) ++i;
    return i;
  };
  k = skip_ws(k);
  // A tokenizer.bin whose max_token_length is 123 (or 379, ...) also starts with '{'; its int32
  // is small, so bytes 2..3 are 0/1 and 0, which no JSON text has there.
  bool small_int32 = k == 0 && head.size() >= 4 && uint8_t(head[2]) <= 1 && head[3] == '\0';
  if (k < head.size() && head[k] == '{' && !small_int32) {
    std::string_view all(reinterpret_cast<const char*>(mf->data()), mf->size());
    return tok::bpe_from_json_text(all, file);
  }
  if (looks_like_sentencepiece_model(mf->data(), mf->size()))
    return tokenizer_from_vocab(vocab_from_sentencepiece_model(mf->data(), mf->size(), file), file);
  // Anything else must be llama2.c's binary format; its loader checks the structure strictly,
  // so a stray file (say, a .gguf or a model .bin) gets a clear error rather than garbage.
  return tok::Llama2cTokenizer::load(file);
}

}  // namespace kvp
