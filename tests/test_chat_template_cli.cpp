// Chat templates on the commands: `compare`, `eval gsm8k`, `generate`, `profile` and `patch` lay
// prompts out as user turns (a run's system message first, Qwen3's thinking switch), pin the choice
// in the results, and `convert` / `inspect` carry and show the template.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "chat_template_fixtures.h"
#include "cli_run.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/model_writer.h"
#include "model/synthetic.h"
#include "runtime/chat_for_model.h"
#include "test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kvp {
namespace {

using test::kvparity;
using test::q;

using namespace chat_fixtures;

// A tiny synthetic HF model whose tokenizer has the formats' special tokens.
std::string chat_model(const test::TempDir& t, const char* jinja) {
  const std::string dir = t.file("chat-model");
  if (kvparity("synth --out " + q(dir)).status != 0) return "";
  write_text(dir + "/tokenizer.json", chat_tokenizer_json());
  write_text(dir + "/tokenizer_config.json", nlohmann::json({{"chat_template", jinja}}).dump());
  return dir;
}

TEST(ChatTemplateCli, CompareLaysPromptsOutAsUserTurnsAndPinsTheTemplate) {
  test::TempDir t;
  const std::string m = chat_model(t, kQwen2Jinja);
  ASSERT_FALSE(m.empty());
  const std::string base = "compare --model " + q(m) + " --prompt 'the dog' --max-new-tokens 4 --no-report";
  const auto r = kvparity(base + " --chat-template auto --out " + q(t.file("c")));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("is laid out as chatml"), std::string::npos) << r.err;
  std::ifstream manifest(t.file("c/manifest.json"));
  const nlohmann::json man = nlohmann::json::parse(manifest);
  EXPECT_EQ(man["commands"]["compare"]["settings"]["chat_template"], "chatml");
  std::ifstream results(t.file("c/results.jsonl"));
  std::string line;
  ASSERT_TRUE(std::getline(results, line));
  const nlohmann::json rec = nlohmann::json::parse(line);
  ASSERT_TRUE(rec.contains("prompt_ids")) << line.substr(0, 300);
  EXPECT_EQ(rec["prompt_ids"][0], 504);
  // The named format is the same study; no template is another one.
  EXPECT_EQ(kvparity(base + " --chat-template chatml --out " + q(t.file("c"))).status, 0);
  const auto none = kvparity(base + " --out " + q(t.file("c")));
  EXPECT_NE(none.status, 0);
  EXPECT_NE(none.err.find("chat_template"), std::string::npos) << none.err;
  // A base model's vocabulary is refused before anything is written.
  const auto stories = kvparity("synth --out " + q(t.file("base")));
  ASSERT_EQ(stories.status, 0);
  const auto refused = kvparity("compare --model " + q(t.file("base")) +
                                " --prompt hi --chat-template gemma --no-report --out " + q(t.file("refused")));
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.err.find("\"<start_of_turn>\""), std::string::npos) << refused.err;
  EXPECT_FALSE(std::filesystem::exists(t.file("refused/results.jsonl")));
}

TEST(ChatTemplateCli, EvalGsm8kAndGenerateTakeTheTemplate) {
  test::TempDir t;
  const std::string m = chat_model(t, kGemmaJinja);
  ASSERT_FALSE(m.empty());
  write_text(t.file("test.jsonl"),
             "{\"question\": \"the dog has 2 balls\", \"answer\": \"2\\n#### 2\"}\n"
             "{\"question\": \"the cat has 3\", \"answer\": \"3\\n#### 3\"}\n");
  const auto r = kvparity("eval gsm8k --data " + q(t.file("test.jsonl")) + " --model " + q(m) + " --shots 1 --train " +
                          q(t.file("test.jsonl")) + " --max-new-tokens 4 --chat-template auto --no-report --out " +
                          q(t.file("e")));
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream manifest(t.file("e/gsm8k_manifest.json"));
  const nlohmann::json man = nlohmann::json::parse(manifest);
  EXPECT_EQ(man["settings"]["models"][0]["chat_template"], "gemma") << man.dump();
  // The prompt is the conversation: the exemplar's turns and the question's, longer than the plain one.
  const auto plain_eval =
      kvparity("eval gsm8k --data " + q(t.file("test.jsonl")) + " --model " + q(m) + " --shots 1 --train " +
               q(t.file("test.jsonl")) + " --max-new-tokens 4 --no-report --out " + q(t.file("p")));
  ASSERT_EQ(plain_eval.status, 0) << plain_eval.err;
  auto first_prompt_tokens = [&](const std::string& dir) {
    std::ifstream in(dir + "/gsm8k.jsonl");
    std::string line;
    std::getline(in, line);
    return nlohmann::json::parse(line)["prompt_tokens"].get<int>();
  };
  const std::string plain_text =
      "Question: the dog has 2 balls\nAnswer: 2\n#### 2\n\nQuestion: the dog has 2 balls\nAnswer:";
  const auto tok = tokenizer_from_json(chat_tokenizer_json(), "chat tokenizer");
  EXPECT_EQ(first_prompt_tokens(t.file("p")), int(tok->encode(plain_text, true).size()));
  ChatEncoder gemma(parse_chat_template("gemma", "--chat-template"), *tok, "model");
  EXPECT_EQ(first_prompt_tokens(t.file("e")), int(gemma
                                                      .encode({{"user", "Question: the dog has 2 balls\nAnswer:"},
                                                               {"assistant", "2\n#### 2"},
                                                               {"user", "Question: the dog has 2 balls\nAnswer:"}})
                                                      .size()));

  const auto g = kvparity("generate --model " + q(m) +
                          " --prompt 'the dog' --chat-template gemma --json "
                          "--max-new-tokens 2");
  ASSERT_EQ(g.status, 0) << g.err;
  const nlohmann::json out = nlohmann::json::parse(g.out);
  EXPECT_EQ(out["prompt_ids"][0], 1);    // <s>: the tokenizer's BOS, spelled by the template
  EXPECT_EQ(out["prompt_ids"][1], 506);  // <start_of_turn>
  const auto plain = kvparity("generate --model " + q(m) + " --prompt 'the dog' --json --max-new-tokens 2");
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_NE(nlohmann::json::parse(plain.out)["prompt_ids"][1], 506);
}

TEST(ChatTemplateCli, ProfileAndPatchTakeThePromptAsAUserTurn) {
  test::TempDir t;
  const std::string m = chat_model(t, kQwen2Jinja);
  ASSERT_FALSE(m.empty());
  for (const char* cmd : {"profile --dtype fp16 --step 2", "patch --max-new-tokens 8 --step 1"}) {
    const auto r = kvparity(std::string(cmd) + " --model " + q(m) + " --prompt 'the dog' --chat-template auto --out " +
                            q(t.file("lab")));
    ASSERT_EQ(r.status, 0) << cmd << ": " << r.err;
  }
  std::ifstream manifest(t.file("lab/manifest.json"));
  const nlohmann::json man = nlohmann::json::parse(manifest);
  EXPECT_EQ(man["commands"]["profile"]["settings"]["chat_template"], "chatml");
  EXPECT_EQ(man["commands"]["patch"]["settings"]["chat_template"], "chatml");
  // Without a template the prompt is another one: refused in the same folder, named.
  const auto plain =
      kvparity("profile --dtype fp16 --step 2 --model " + q(m) + " --prompt 'the dog' --out " + q(t.file("lab")));
  EXPECT_NE(plain.status, 0);
  EXPECT_NE(plain.err.find("chat_template"), std::string::npos) << plain.err;
  ASSERT_EQ(kvparity("synth --out " + q(t.file("base"))).status, 0);
  const auto refused = kvparity("patch --model " + q(t.file("base")) + " --prompt hi --chat-template chatml --out " +
                                q(t.file("refused")));
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.err.find("\"<|im_start|>\""), std::string::npos) << refused.err;
}

TEST(ChatTemplateCli, ConvertCarriesTheTemplateAndInspectSaysWhatAutoTakes) {
  test::TempDir t;
  const std::string m = chat_model(t, kLlama3Jinja);
  ASSERT_FALSE(m.empty());
  ASSERT_EQ(kvparity("convert --model " + q(m) + " --to gguf --out " + q(t.file("m.gguf"))).status, 0);
  ASSERT_EQ(kvparity("convert --model " + q(t.file("m.gguf")) + " --to hf --out " + q(t.file("back"))).status, 0);
  auto prompt_ids = [&](const std::string& model) {
    const auto r =
        kvparity("generate --model " + q(model) + " --prompt 'the dog' --chat-template auto --json --max-new-tokens 1");
    EXPECT_EQ(r.status, 0) << r.err;
    return r.status == 0 ? nlohmann::json::parse(r.out)["prompt_ids"] : nlohmann::json();
  };
  // The GGUF and HF routes tokenise the text after each special token alike (a "▁" before it, as
  // llama.cpp and transformers do), so the whole prompt survives both conversions.
  const nlohmann::json first = prompt_ids(m);
  ASSERT_TRUE(first.is_array());
  EXPECT_EQ(first[0], 1);
  EXPECT_EQ(first[1], 508);  // <|start_header_id|> after the BOS
  EXPECT_EQ(std::count(first.begin(), first.end(), 508), 2);
  EXPECT_EQ(std::count(first.begin(), first.end(), 510), 1);  // <|eot_id|> after the user turn
  for (const std::string& model : {t.file("m.gguf"), t.file("back")}) EXPECT_EQ(prompt_ids(model), first) << model;
  const auto gguf = kvparity("inspect --model " + q(t.file("m.gguf")));
  EXPECT_NE(gguf.out.find("llama3, from " + t.file("m.gguf") + "'s tokenizer.chat_template"), std::string::npos)
      << gguf.out;
  const auto plain = kvparity("inspect --model " + q(t.file("back")) + " --json");
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(nlohmann::json::parse(plain.out)["chat_template"]["format"], "llama3");
  const auto none = kvparity("synth --out " + q(t.file("base")));
  ASSERT_EQ(none.status, 0);
  EXPECT_NE(kvparity("inspect --model " + q(t.file("base"))).out.find("no chat template shipped"), std::string::npos);
  // A template saved as chat_template.jinja (transformers' layout now) is the one auto takes, and an
  // HF-to-HF convert carries the file.
  write_text(t.file("base/chat_template.jinja"), kQwen2Jinja);
  write_text(t.file("base/tokenizer.json"), chat_tokenizer_json());
  const auto jinja = kvparity("inspect --model " + q(t.file("base")) + " --json");
  ASSERT_EQ(jinja.status, 0) << jinja.err;
  EXPECT_EQ(nlohmann::json::parse(jinja.out)["chat_template"]["format"], "chatml");
  ASSERT_EQ(kvparity("convert --model " + q(t.file("base")) + " --to hf --out " + q(t.file("base2"))).status, 0);
  EXPECT_TRUE(std::filesystem::exists(t.file("base2/chat_template.jinja")));
  EXPECT_EQ(nlohmann::json::parse(kvparity("inspect --model " + q(t.file("base2")) + " --json").out)["chat_template"]["format"],
            "chatml");
}

// Llama-3.1's dated system turn, and a run's own system message (--system), pinned in the results.
TEST(ChatTemplateCli, SystemMessageGoesFirstAndIsPinned) {
  test::TempDir t;
  const std::string m = chat_model(t, kLlama31Jinja);
  ASSERT_FALSE(m.empty());
  auto generate = [&](const std::string& options) {
    return kvparity("generate --model " + q(m) + " --prompt 'the dog' --json --max-new-tokens 1 " + options);
  };
  const auto plain = generate("--chat-template auto");
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_NE(plain.err.find("is laid out as llama3.1"), std::string::npos) << plain.err;
  const auto sys = generate("--chat-template auto --system 'Be brief.'");
  ASSERT_EQ(sys.status, 0) << sys.err;
  const nlohmann::json a = nlohmann::json::parse(plain.out)["prompt_ids"],
                       b = nlohmann::json::parse(sys.out)["prompt_ids"];
  EXPECT_GT(b.size(), a.size());
  EXPECT_EQ(std::count(a.begin(), a.end(), 508), 3);  // <|start_header_id|>: system, user, assistant
  EXPECT_EQ(std::count(b.begin(), b.end(), 508), 3);

  struct Refusal {
    std::string options, says;
  };
  for (const Refusal& r : std::vector<Refusal>{
           {"--system 'Be brief.'", "--system needs --chat-template"},
           {"--chat-template none --system 'Be brief.'", "--system needs --chat-template"},
           {"--chat-template gemma --system 'Be brief.'", "--system: chat template gemma has no system message"},
           {"--chat-template llama3 --system ''", "--system: the system message is empty"}}) {
    const auto e = generate(r.options);
    EXPECT_EQ(e.status, 2) << r.options << ": " << e.err;
    EXPECT_NE(e.err.find(r.says), std::string::npos) << r.options << ": " << e.err;
  }

  // tokenize shows the same prompt, as ids or as the text they encode.
  const auto ids = kvparity("tokenize --model " + q(m) + " --text 'the dog' --chat-template auto --system 'Be brief.'");
  ASSERT_EQ(ids.status, 0) << ids.err;
  EXPECT_EQ(nlohmann::json::parse(ids.out), b);
  const auto text = kvparity("tokenize --tokenizer " + q(m + "/tokenizer.json") +
                             " --text 'the dog' --chat-template auto --system 'Be brief.' --rendered");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_EQ(text.out,
            "<s><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 "
            "Jul 2024\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nthe "
            "dog<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(kvparity("tokenize --model " + q(m) + " --text x --rendered").status, 2);
  EXPECT_EQ(kvparity("tokenize --model " + q(m) + " --text x --chat-template llama3 --bos").status, 2);

  const std::string compare = "compare --model " + q(m) +
                              " --prompt 'the dog' --max-new-tokens 2 --no-report --chat-template auto --out " +
                              q(t.file("c"));
  const auto c = kvparity(compare + " --system 'Be brief.'");
  ASSERT_EQ(c.status, 0) << c.err;
  std::ifstream manifest(t.file("c/manifest.json"));
  const nlohmann::json man = nlohmann::json::parse(manifest);
  EXPECT_EQ(man["commands"]["compare"]["settings"]["chat_template"], "llama3.1 (system message \"Be brief.\")");
  const auto other = kvparity(compare + " --system 'Say no.'");
  EXPECT_NE(other.status, 0);
  EXPECT_NE(other.err.find("chat_template"), std::string::npos) << other.err;
  EXPECT_EQ(kvparity(compare + " --system 'Be brief.'").status, 0) << "the same message resumes";
}

// --no-thinking on the commands: the prompt ends with the empty think block, the setting is pinned,
// and it is refused without a template or for one without the switch.
TEST(ChatTemplateCli, NoThinkingOpensTheAnswerWithAnEmptyThinkBlockAndIsPinned) {
  test::TempDir t;
  const std::string m = t.file("qwen3-chat");
  ASSERT_EQ(kvparity("synth --arch qwen3 --out " + q(m)).status, 0);
  write_text(m + "/tokenizer.json", thinking_tokenizer_json());
  write_text(m + "/tokenizer_config.json", nlohmann::json({{"chat_template", kQwen3Jinja}}).dump());
  auto generate = [&](const std::string& options) {
    return kvparity("generate --model " + q(m) + " --prompt 'the dog' --json --max-new-tokens 1 " + options);
  };
  const auto on = generate("--chat-template auto");
  const auto off = generate("--chat-template auto --no-thinking");
  ASSERT_EQ(on.status, 0) << on.err;
  ASSERT_EQ(off.status, 0) << off.err;
  const nlohmann::json a = nlohmann::json::parse(on.out)["prompt_ids"], b = nlohmann::json::parse(off.out)["prompt_ids"];
  EXPECT_EQ(std::count(a.begin(), a.end(), 502), 0);
  EXPECT_EQ(std::count(b.begin(), b.end(), 502), 1);
  EXPECT_EQ(std::count(b.begin(), b.end(), 503), 1);
  ASSERT_GT(b.size(), a.size() + 2);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin()));  // the answer opened by the block
  EXPECT_EQ(b[a.size()], 502);
  const auto text = kvparity("tokenize --model " + q(m) + " --text 'the dog' --chat-template auto --no-thinking --rendered");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_EQ(text.out, "<|im_start|>user\nthe dog<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  for (const auto& [options, says] : std::vector<std::pair<std::string, std::string>>{
           {"--no-thinking", "--no-thinking needs --chat-template"},
           {"--chat-template chatml --no-thinking", "--no-thinking: chat template chatml has no thinking switch"}}) {
    const auto e = generate(options);
    EXPECT_EQ(e.status, 2) << options << ": " << e.err;
    EXPECT_NE(e.err.find(says), std::string::npos) << options << ": " << e.err;
  }
  const std::string compare = "compare --model " + q(m) +
                              " --prompt 'the dog' --max-new-tokens 2 --no-report --chat-template auto --out " +
                              q(t.file("c"));
  const auto c = kvparity(compare + " --no-thinking");
  ASSERT_EQ(c.status, 0) << c.err;
  std::ifstream manifest(t.file("c/manifest.json"));
  EXPECT_EQ(nlohmann::json::parse(manifest)["commands"]["compare"]["settings"]["chat_template"],
            "chatml (no default system message; thinking off)");
  EXPECT_NE(kvparity(compare).status, 0) << "thinking on is another study";
}

// A tokenizer.json of the newer kind (Metaspace, prepend_scheme "first": no "▁" before text that
// follows a special token) has no GGUF form: convert says so, and the converted file tokenises as
// llama.cpp would read it.
TEST(ChatTemplateCli, ConvertSaysWhatAGgufVocabularyCannotHold) {
  test::TempDir t;
  const std::string m = chat_model(t, kLlama3Jinja);
  ASSERT_FALSE(m.empty());
  nlohmann::json j = nlohmann::json::parse(chat_tokenizer_json());
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}};
  j["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", false}};
  write_text(m + "/tokenizer.json", j.dump());
  const auto conv = kvparity("convert --model " + q(m) + " --to gguf --out " + q(t.file("m.gguf")));
  ASSERT_EQ(conv.status, 0) << conv.err;
  EXPECT_NE(conv.err.find("note: the GGUF's vocabulary cannot hold the tokenizer's \"▁\" prefix rule"),
            std::string::npos)
      << conv.err;
  auto prompt_ids = [&](const std::string& model) {
    const auto r = kvparity("generate --model " + q(model) +
                            " --prompt 'the dog' --chat-template llama3 --json --max-new-tokens 1");
    EXPECT_EQ(r.status, 0) << r.err;
    return r.status == 0 ? nlohmann::json::parse(r.out)["prompt_ids"] : nlohmann::json();
  };
  const nlohmann::json hf = prompt_ids(m), gguf = prompt_ids(t.file("m.gguf"));
  ASSERT_TRUE(hf.is_array() && gguf.is_array());
  EXPECT_NE(gguf, hf) << "the GGUF puts a \"▁\" before \"user\" and the turn's text";
  EXPECT_EQ(gguf[1], hf[1]);  // <|start_header_id|>: the special tokens land alike
  // A tokenizer.json of the older kind (normaliser Prepend, as Llama-2's) converts without a note.
  const std::string plain = chat_model(t, kLlama3Jinja);
  const auto quiet = kvparity("convert --model " + q(plain) + " --to gguf --out " + q(t.file("p.gguf")));
  ASSERT_EQ(quiet.status, 0) << quiet.err;
  EXPECT_EQ(quiet.err.find("cannot hold"), std::string::npos) << quiet.err;
}

}  // namespace
}  // namespace kvp
