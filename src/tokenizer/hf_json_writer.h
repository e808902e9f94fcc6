#pragma once
// A GGUF-style vocabulary (VocabSpec) written as Hugging Face tokenizer files, the reverse of
// hf_json.cpp + BpeTokenizer::to_vocab_spec(). Used by `kvparity convert --to hf`.
#include <string>

#include "tokenizer/vocab_spec.h"

namespace kvp {

// tokenizer.json for `spec`. Read back by load_tokenizer(), it encodes and decodes as
// tokenizer_from_vocab(spec) does; for a "llama" vocabulary the normaliser's "▁" prefix runs again
// after every added token, as llama.cpp prefixes each stretch of text after a special token.
// For "llama", the score order becomes a merge list; that is exact when the scores of pieces made by
// merges are distinct, as in SentencePiece-trained vocabularies (ties break leftmost by score, by
// list position by rank). Throws kvp::Error naming `origin` when the vocabulary cannot be written.
std::string hf_tokenizer_json(const VocabSpec& spec, const std::string& origin);

// tokenizer_config.json for `spec`: bos/eos/unk/pad tokens, add_bos_token and the added tokens, as
// transformers writes them.
std::string hf_tokenizer_config_json(const VocabSpec& spec, const std::string& origin);

}  // namespace kvp
