#pragma once
// Prompts for a study: a JSONL file ({"id": ..., "prompt": ...} per line), a plain text file (one
// prompt per line), a single --prompt, or a built-in set ("builtin:stories", "builtin:facts").
#include <string>
#include <vector>

namespace kvp {

struct Prompt {
  std::string id;
  std::string text;
};

std::vector<Prompt> load_prompts(const std::string& source);
std::vector<std::string> builtin_prompt_sets();

// Refuses a prompt's token ids that the model's embedding (`rows` rows) has none for, as another
// model's tokenizer gives: an error naming `what` (the prompt), the token, its position and `model`.
// Studies call it on every prompt before they write anything.
void require_embedding_rows(const std::vector<int>& ids, int rows, const std::string& what, const std::string& model);

}  // namespace kvp
