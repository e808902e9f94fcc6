#pragma once
// Finds the tokenizer that belongs to a model: an explicit --tokenizer path, the GGUF's embedded
// vocabulary, tokenizer.json in an HF directory, or a llama2.c tokenizer.bin beside the checkpoint.
#include <memory>
#include <string>

#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace kvp {

// Throws a clear error ("pass --tokenizer") when none can be found.
std::unique_ptr<Tokenizer> tokenizer_for_model(const Model& model, const std::string& explicit_path);
// The same from an opened checkpoint, before (or without) building its weights.
std::unique_ptr<Tokenizer> tokenizer_for_checkpoint(const Checkpoint& ckpt, const std::string& explicit_path);

// The tokenizer file the lookup above settles on when the model embeds no vocabulary: `hint`
// (an HF checkpoint's tokenizer.json) or a file beside the model. "" when there is none.
std::string tokenizer_file_beside(const std::string& model_path, const std::string& format, const std::string& hint);

}  // namespace kvp
