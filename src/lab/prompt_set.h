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

}  // namespace kvp
