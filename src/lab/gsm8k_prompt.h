#pragma once
// GSM8K data and prompts in the style of lm-evaluation-harness's `gsm8k` task:
//   "Question: {q}\nAnswer: {full solution ending in #### N}" exemplars joined by "\n\n", then
//   "Question: {q}\nAnswer:"; generation stops at "Question:" (or EOS).
// Exemplars are the first k items of the train split, in file order (lm-eval's `first_n`
// few-shot sampler), so every problem sees the same fixed, documented context.
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"

namespace kvp {

struct Gsm8kItem {
  int index = 0;       // 0-based line number among the records of its file
  std::string question;
  std::string answer;  // the full worked solution
  std::string target;  // normalised number after "####"
};

// Reads {"question", "answer"} JSONL. Errors name the file and line (malformed JSON, a missing
// or non-string field, an answer without a "#### N" line).
std::vector<Gsm8kItem> load_gsm8k(const std::string& path);

// The k-shot prompt for `question` with exemplars[0..shots).
std::string gsm8k_prompt(const std::vector<Gsm8kItem>& exemplars, int shots, const std::string& question);

// The same as a conversation, for a chat template: each exemplar a user turn "Question: {q}\nAnswer:"
// and an assistant turn (its solution), then the question as the last user turn (lm-eval's
// --apply_chat_template --fewshot_as_multiturn).
std::vector<ChatMessage> gsm8k_chat_messages(const std::vector<Gsm8kItem>& exemplars, int shots,
                                             const std::string& question);

// lm-eval's `until` list for gsm8k; EOS is handled by the engine.
std::vector<std::string> gsm8k_stop_strings();

// Where the exemplars come from: train.jsonl beside the test file.
std::string default_train_path(const std::string& data_path);

}  // namespace kvp
