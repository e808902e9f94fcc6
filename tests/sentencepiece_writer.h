#pragma once
// Writes SentencePiece tokenizer.model files (protobuf wire format) for the tests: a vocabulary
// with the trainer and normalizer fields a test wants, or a file bent out of shape on purpose.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "tokenizer/vocab_spec.h"

namespace kvp::test {

inline std::string pb_varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out += char(uint8_t(v) | 0x80);
    v >>= 7;
  }
  out += char(v);
  return out;
}
inline std::string pb_key(uint32_t field, int wire) { return pb_varint((uint64_t(field) << 3) | uint64_t(wire)); }
inline std::string pb_uint(uint32_t field, uint64_t v) { return pb_key(field, 0) + pb_varint(v); }
inline std::string pb_int32(uint32_t field, int32_t v) { return pb_uint(field, uint64_t(int64_t(v))); }
inline std::string pb_bytes(uint32_t field, const std::string& b) { return pb_key(field, 2) + pb_varint(b.size()) + b; }
inline std::string pb_float(uint32_t field, float f) {
  std::string b(4, '\0');
  std::memcpy(b.data(), &f, 4);
  return pb_key(field, 5) + b;
}

struct SpmOptions {
  int model_type = 2;  // 1 unigram, 2 BPE
  bool byte_fallback = true;
  std::string normalizer = "identity";
  std::string charsmap;
  bool add_dummy_prefix = true;
  std::optional<bool> remove_extra_whitespaces = false;  // nullopt: left out (the proto's default is true)
  bool write_normalizer = true;
};

// pieces, scores and types from `v`; ids from its unk/bos/eos/pad.
inline std::string sentencepiece_model_bytes(const VocabSpec& v, const SpmOptions& o = {}) {
  std::string out;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    std::string piece = pb_bytes(1, v.tokens[i]) + pb_float(2, v.scores.empty() ? 0.f : v.scores[i]);
    const int32_t type = v.token_types.empty() ? 1 : v.token_types[i];
    if (type != 1) piece += pb_uint(3, uint64_t(type));  // NORMAL is the default and left out, as SentencePiece does
    out += pb_bytes(1, piece);
  }
  std::string trainer = pb_uint(3, uint64_t(o.model_type)) + pb_uint(4, v.tokens.size()) +
                        pb_uint(35, o.byte_fallback ? 1 : 0) + pb_int32(40, v.unk_id) + pb_int32(41, v.bos_id) +
                        pb_int32(42, v.eos_id) + pb_int32(43, v.pad_id);
  out += pb_bytes(2, trainer);
  if (o.write_normalizer) {
    std::string norm = pb_bytes(1, o.normalizer) + pb_bytes(2, o.charsmap) + pb_uint(3, o.add_dummy_prefix ? 1 : 0);
    if (o.remove_extra_whitespaces) norm += pb_uint(4, *o.remove_extra_whitespaces ? 1 : 0);
    norm += pb_uint(5, 1);
    out += pb_bytes(3, norm);
  }
  return out;
}

}  // namespace kvp::test
