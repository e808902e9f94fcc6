// SentencePiece's tokenizer.model: a protobuf ModelProto, read here field by field from the wire
// format (no schema compiler needed for the handful of fields a BPE vocabulary uses).
//
// ModelProto: 1 pieces (repeated message: 1 piece, 2 score (float), 3 type), 2 trainer_spec,
// 3 normalizer_spec. TrainerSpec: 3 model_type (1 unigram, 2 BPE, 3 word, 4 char),
// 24 treat_whitespace_as_suffix, 35 byte_fallback, 40 unk_id, 41 bos_id, 42 eos_id, 43 pad_id.
// NormalizerSpec: 1 name, 2 precompiled_charsmap, 3 add_dummy_prefix (default true),
// 4 remove_extra_whitespaces (default true), 5 escape_whitespaces (default true).
//
// A BPE model becomes the same VocabSpec llama.cpp writes into a GGUF from it (pieces, scores, and
// the token types, whose numbering the two formats share), so tokenizer_from_vocab encodes it
// merge by merge in score order, as SentencePiece does. Options that would make SentencePiece
// transform the text before that (a normaliser, whitespace folding) are refused, not ignored.
#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace kvp {
namespace {

struct Field {
  uint32_t number = 0;
  int wire = 0;                   // 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
  uint64_t value = 0;             // varint (wire 0)
  const uint8_t* data = nullptr;  // bytes (wire 1, 2, 5)
  size_t size = 0;
  size_t offset = 0;  // of the field's key, from the start of the file
};

// The fields of one message, in order; every length is checked against the bytes that remain.
class WireReader {
 public:
  WireReader(const uint8_t* data, size_t size, size_t base, const std::string& origin, const char* message)
      : p_(data), n_(size), base_(base), origin_(origin), message_(message) {}
  bool done() const { return i_ >= n_; }
  Field next() {
    Field f;
    f.offset = base_ + i_;
    const uint64_t key = varint();
    f.number = uint32_t(key >> 3);
    f.wire = int(key & 7);
    if (f.number == 0) bad("field number 0");
    switch (f.wire) {
      case 0:
        f.value = varint();
        break;
      case 1:
        f.size = 8;
        break;
      case 5:
        f.size = 4;
        break;
      case 2: {
        const uint64_t len = varint();
        if (len > n_ - i_) bad(fmt::format("field {} claims {} bytes where {} remain", f.number, len, n_ - i_));
        f.size = size_t(len);
        break;
      }
      default:
        bad(fmt::format("field {} has wire type {} (groups are not used by this format)", f.number, f.wire));
    }
    if (f.wire != 0) {
      if (f.size > n_ - i_) bad(fmt::format("field {} is cut short", f.number));
      f.data = p_ + i_;
      i_ += f.size;
    }
    return f;
  }
  [[noreturn]] void bad(const std::string& what) const {
    fail("{}: not a SentencePiece model (tokenizer.model): {} in {} at byte {}", origin_, what, message_, base_ + i_);
  }

 private:
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (i_ >= n_) bad("a number is cut short");
      const uint8_t b = p_[i_++];
      v |= uint64_t(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
    bad("a number runs past 10 bytes");
  }
  const uint8_t* p_;
  size_t n_, i_ = 0, base_;
  const std::string& origin_;
  const char* message_;
};

void expect_wire(const WireReader& r, const Field& f, int wire, const char* name) {
  if (f.wire != wire) r.bad(fmt::format("{} (field {}) has wire type {}, not {}", name, f.number, f.wire, wire));
}

// int32 fields hold negative values as 64-bit two's complement varints.
int32_t as_int32(uint64_t v) { return int32_t(int64_t(v)); }

const char* model_type_name(uint64_t t) {
  switch (t) {
    case 1:
      return "unigram";
    case 2:
      return "BPE";
    case 3:
      return "word";
    case 4:
      return "char";
  }
  return "unknown";
}

}  // namespace

bool looks_like_sentencepiece_model(const uint8_t* data, size_t size) {
  // A ModelProto starts with its first piece (field 1, length-delimited), whose own first field is
  // the piece string (field 1 again): 0x0A, a length, 0x0A. A tokenizer.bin starts with a small
  // little-endian int32, so its second byte is 0 wherever its first is 0x0A.
  return size >= 3 && data[0] == 0x0A && data[1] != 0 && data[2] == 0x0A;
}

VocabSpec vocab_from_sentencepiece_model(const uint8_t* data, size_t size, const std::string& origin) {
  VocabSpec v;
  v.model = "llama";
  uint64_t model_type = 1;  // the proto's defaults, for fields a file leaves out
  bool suffix_whitespace = false, add_dummy_prefix = true, remove_extra_whitespaces = true, escape_whitespaces = true;
  int32_t unk = 0, bos = 1, eos = 2, pad = -1;
  std::string normalizer = "identity";
  size_t charsmap = 0;
  WireReader top(data, size, 0, origin, "the model");
  while (!top.done()) {
    const Field f = top.next();
    if (f.number == 1) {
      expect_wire(top, f, 2, "a piece");
      WireReader r(f.data, f.size, f.data - data, origin, "a piece");
      std::string piece;
      float score = 0;
      int32_t type = int32_t(TokenType::Normal);
      while (!r.done()) {
        const Field g = r.next();
        if (g.number == 1) {
          expect_wire(r, g, 2, "the piece's text");
          piece.assign(reinterpret_cast<const char*>(g.data), g.size);
        } else if (g.number == 2) {
          expect_wire(r, g, 5, "the piece's score");
          std::memcpy(&score, g.data, 4);
        } else if (g.number == 3) {
          expect_wire(r, g, 0, "the piece's type");
          if (g.value < 1 || g.value > 6) r.bad(fmt::format("piece {} has type {} (1 to 6)", v.tokens.size(), g.value));
          type = int32_t(g.value);
        }
      }
      if (!std::isfinite(score)) r.bad(fmt::format("piece {} has score {}", v.tokens.size(), score));
      v.tokens.push_back(std::move(piece));
      v.scores.push_back(score);
      v.token_types.push_back(type);
    } else if (f.number == 2) {
      expect_wire(top, f, 2, "the trainer spec");
      WireReader r(f.data, f.size, f.data - data, origin, "the trainer spec");
      while (!r.done()) {
        const Field g = r.next();
        if (g.wire != 0) continue;
        switch (g.number) {
          case 3:
            model_type = g.value;
            break;
          case 24:
            suffix_whitespace = g.value != 0;
            break;
          case 40:
            unk = as_int32(g.value);
            break;
          case 41:
            bos = as_int32(g.value);
            break;
          case 42:
            eos = as_int32(g.value);
            break;
          case 43:
            pad = as_int32(g.value);
            break;
          default:
            break;
        }
      }
    } else if (f.number == 3) {
      expect_wire(top, f, 2, "the normalizer spec");
      WireReader r(f.data, f.size, f.data - data, origin, "the normalizer spec");
      while (!r.done()) {
        const Field g = r.next();
        if (g.number == 1 && g.wire == 2) normalizer.assign(reinterpret_cast<const char*>(g.data), g.size);
        if (g.number == 2 && g.wire == 2) charsmap = g.size;
        if (g.number == 3 && g.wire == 0) add_dummy_prefix = g.value != 0;
        if (g.number == 4 && g.wire == 0) remove_extra_whitespaces = g.value != 0;
        if (g.number == 5 && g.wire == 0) escape_whitespaces = g.value != 0;
      }
    }
  }
  if (v.tokens.empty()) fail("{}: not a SentencePiece model (tokenizer.model): it holds no pieces", origin);
  // What kvparity cannot reproduce is refused: the tokens would differ from SentencePiece's.
  if (model_type != 2)
    fail("{}: a SentencePiece {} model; kvparity reads BPE models (the Llama, Mistral and Gemma tokenizers)", origin,
         model_type_name(model_type));
  if (normalizer != "identity" || charsmap > 0)
    fail(
        "{}: SentencePiece normalizer '{}' ({} bytes of character map); kvparity applies none, so its tokens would "
        "differ: use the model's tokenizer.json",
        origin, normalizer, charsmap);
  if (remove_extra_whitespaces)
    fail(
        "{}: the model folds runs of whitespace (remove_extra_whitespaces), which kvparity does not; use the model's "
        "tokenizer.json",
        origin);
  if (!escape_whitespaces || suffix_whitespace)
    fail("{}: the model {}; kvparity reads models that mark spaces with a leading U+2581", origin,
         suffix_whitespace ? "puts the space mark after words (treat_whitespace_as_suffix)"
                           : "keeps spaces unescaped (escape_whitespaces false)");
  const int n = int(v.tokens.size());
  auto id_or_none = [&](int32_t id, const char* name) {
    if (id < -1 || id >= n) fail("{}: {} {} is outside the {} pieces", origin, name, id, n);
    return id;
  };
  v.unk_id = id_or_none(unk, "unk_id");
  v.bos_id = id_or_none(bos, "bos_id");
  v.eos_id = id_or_none(eos, "eos_id");
  v.pad_id = id_or_none(pad, "pad_id");
  v.add_bos = v.bos_id >= 0;
  v.add_space_prefix = add_dummy_prefix;
  return v;
}

}  // namespace kvp
