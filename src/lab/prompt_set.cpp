#include "lab/prompt_set.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"

namespace kvp {
namespace {

const std::vector<std::string>& stories() {
  static const std::vector<std::string> p{
      "Once upon a time", "One day, a little girl named Lily", "The big dog ran to the park and",
      "Tom had a red ball. He", "There was a small bird who wanted to fly", "Mom said, \"",
      "In the forest, a tiny bunny", "Sara and Ben were best friends. One day they",
      "The sun was shining and the sky was blue.", "A boy found a shiny key under a tree.",
      "The cat did not like the rain, so", "Every morning, the old man", "Once upon a time, in a big castle,",
      "Lucy wanted to bake a cake for her", "The little car was sad because", "It was a cold winter night and"};
  return p;
}

const std::vector<std::string>& facts() {
  static const std::vector<std::string> p{
      "The capital of France is", "Water boils at a temperature of", "The largest planet in our solar system is",
      "Question: What is 12 plus 30?\nAnswer:", "The chemical symbol for gold is", "def fibonacci(n):\n",
      "Photosynthesis is the process by which", "The year the first person walked on the moon was"};
  return p;
}

std::vector<Prompt> numbered(const std::vector<std::string>& texts, const std::string& prefix) {
  std::vector<Prompt> out;
  for (size_t i = 0; i < texts.size(); ++i) out.push_back({prefix + std::to_string(i), texts[i]});
  return out;
}

}  // namespace

std::vector<std::string> builtin_prompt_sets() { return {"builtin:stories", "builtin:facts"}; }

std::vector<Prompt> load_prompts(const std::string& source) {
  if (source == "builtin:stories") return numbered(stories(), "stories-");
  if (source == "builtin:facts") return numbered(facts(), "facts-");
  if (source.rfind("builtin:", 0) == 0) fail_usage("unknown built-in prompt set '{}' (builtin:stories, builtin:facts)", source);
  std::ifstream in(source);
  if (!in) fail("{}: cannot open prompts file", source);
  std::vector<Prompt> out;
  std::set<std::string> ids;
  std::string line;
  int lineno = 0;
  const bool jsonl = source.size() >= 6 && (source.substr(source.size() - 6) == ".jsonl" || source.substr(source.size() - 5) == ".json");
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    Prompt p;
    if (jsonl) {
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) fail("{}:{}: not a JSON object", source, lineno);
      const auto text = j.find("prompt") != j.end() ? j.find("prompt") : j.find("question");
      if (text == j.end() || !text->is_string()) fail("{}:{}: missing string field \"prompt\"", source, lineno);
      p.text = text->get<std::string>();
      if (j.contains("id")) p.id = j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump();
    } else {
      p.text = line;
    }
    if (p.id.empty()) p.id = "line-" + std::to_string(lineno);
    if (!ids.insert(p.id).second) fail("{}:{}: duplicate prompt id '{}'", source, lineno, p.id);
    out.push_back(std::move(p));
  }
  if (out.empty()) fail("{}: no prompts found", source);
  return out;
}

void require_embedding_rows(const std::vector<int>& ids, int rows, const std::string& what, const std::string& model) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= rows)
      fail("{}: token {} at position {} has no embedding row in {} ({} rows): is the tokenizer this model's?", what,
           ids[i], i, model, rows);
}

}  // namespace kvp
