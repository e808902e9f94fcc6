#pragma once
// A tokenizer described as plain data, the way GGUF stores it (`tokenizer.ggml.*`). The GGUF
// reader fills it, the GGUF writer serialises it, and tokenizer_from_vocab() turns it into a Tokenizer.
#include <cstdint>
#include <string>
#include <vector>

namespace kvp {

// Token types as in GGUF / llama.cpp: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
enum class TokenType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

struct VocabSpec {
  std::string model;                 // "llama" (SentencePiece-style BPE) or "gpt2" (byte-level BPE)
  std::string pre;                   // tokenizer.ggml.pre, e.g. "default", "qwen2", "smollm" (may be empty)
  std::vector<std::string> tokens;   // pieces; SentencePiece style uses U+2581 for space
  std::vector<float> scores;         // merge priority for "llama" (may be empty for "gpt2")
  std::vector<int32_t> token_types;  // TokenType values (may be empty: all normal)
  std::vector<std::string> merges;   // "a b" merge rules for "gpt2" (rank = index)
  int bos_id = -1;
  int eos_id = -1;
  int unk_id = -1;
  int pad_id = -1;
  bool add_bos = true;
  bool add_space_prefix = true;      // SentencePiece dummy prefix
  // Not stored in a GGUF: what of the tokenizer this was made from (Tokenizer::to_vocab_spec) the
  // spec cannot hold, in words, so that convert can say so; empty when nothing is lost.
  std::string not_carried;
};

}  // namespace kvp
