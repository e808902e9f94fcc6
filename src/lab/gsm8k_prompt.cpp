#include "lab/gsm8k_prompt.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "lab/answer_extract.h"

namespace kvp {

std::vector<Gsm8kItem> load_gsm8k(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open GSM8K data", path);
  std::vector<Gsm8kItem> items;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) fail("{}:{}: not a JSON object", path, lineno);
    for (const char* k : {"question", "answer"})
      if (!j.contains(k) || !j[k].is_string()) fail("{}:{}: missing string field \"{}\"", path, lineno, k);
    Gsm8kItem it;
    it.index = int(items.size());
    it.question = j["question"].get<std::string>();
    it.answer = j["answer"].get<std::string>();
    const auto t = extract_strict(it.answer);
    if (!t) fail("{}:{}: the answer has no \"#### N\" final-answer line", path, lineno);
    it.target = *t;
    items.push_back(std::move(it));
  }
  if (items.empty()) fail("{}: no GSM8K records", path);
  return items;
}

std::string gsm8k_prompt(const std::vector<Gsm8kItem>& exemplars, int shots, const std::string& question) {
  if (shots < 0) fail_usage("--shots must be >= 0");
  if (size_t(shots) > exemplars.size())
    fail_usage("--shots {}: only {} exemplars are available", shots, exemplars.size());
  std::string p;
  for (int i = 0; i < shots; ++i)
    p += "Question: " + exemplars[size_t(i)].question + "\nAnswer: " + exemplars[size_t(i)].answer + "\n\n";
  return p + "Question: " + question + "\nAnswer:";
}

std::vector<ChatMessage> gsm8k_chat_messages(const std::vector<Gsm8kItem>& exemplars, int shots,
                                             const std::string& question) {
  if (shots < 0) fail_usage("--shots must be >= 0");
  if (size_t(shots) > exemplars.size())
    fail_usage("--shots {}: only {} exemplars are available", shots, exemplars.size());
  std::vector<ChatMessage> m;
  for (int i = 0; i < shots; ++i) {
    m.push_back({"user", "Question: " + exemplars[size_t(i)].question + "\nAnswer:"});
    m.push_back({"assistant", exemplars[size_t(i)].answer});
  }
  m.push_back({"user", "Question: " + question + "\nAnswer:"});
  return m;
}

std::vector<std::string> gsm8k_stop_strings() { return {"Question:", "</s>", "<|im_end|>"}; }

std::string default_train_path(const std::string& data_path) {
  return (std::filesystem::path(data_path).parent_path() / "train.jsonl").string();
}

}  // namespace kvp
