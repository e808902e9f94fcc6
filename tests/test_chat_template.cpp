// Chat templates (tokenizer/chat_template.h, runtime/chat_for_model.h): each format renders what
// transformers' apply_chat_template renders for that family's template, the model's own template
// picks its format, and the special tokens are single tokens or the run is refused. The commands' use
// of them is test_chat_template_cli.cpp's.
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

const std::vector<ChatMessage> kWithSystem = {
    {"system", "Be brief."}, {"user", " What is 2+2? "}, {"assistant", " 4 "}, {"user", "And 3+3?"}};
const std::vector<ChatMessage> kNoSystem = {{"user", " What is 2+2? "}, {"assistant", " 4 "}, {"user", "And 3+3?"}};

std::string render(const char* name, const std::vector<ChatMessage>& m) {
  return render_chat(parse_chat_template(name, "--chat-template"), m, "<s>", "</s>");
}

TEST(ChatTemplate, EachFormatRendersWhatItsFamilysTemplateRenders) {
  EXPECT_EQ(render("llama2", kWithSystem),
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n What is 2+2? [/INST] 4 </s><s>[INST] And 3+3? [/INST]");
  EXPECT_EQ(render("llama2", kNoSystem), "<s>[INST] What is 2+2? [/INST] 4 </s><s>[INST] And 3+3? [/INST]");
  EXPECT_EQ(
      render("llama3", kWithSystem),
      "<s><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>"
      "\n\nWhat is 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n4<|eot_id|><|start_header_id|>"
      "user<|end_header_id|>\n\nAnd 3+3?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  // Rendered by jinja2 from kLlama31Jinja (transformers' settings: trim_blocks, lstrip_blocks).
  EXPECT_EQ(render("llama3.1", kWithSystem),
            "<s><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 "
            "Jul 2024\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is "
            "2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n4<|eot_id|><|start_header_id|>user<|end_"
            "header_id|>\n\nAnd 3+3?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render("llama3.1", kNoSystem),
            "<s><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 "
            "Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is "
            "2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n4<|eot_id|><|start_header_id|>user<|end_"
            "header_id|>\n\nAnd 3+3?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render("mistral", kNoSystem), "<s>[INST]  What is 2+2?  [/INST] 4 </s>[INST] And 3+3? [/INST]");
  EXPECT_EQ(render("gemma", kNoSystem),
            "<s><start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n4<end_of_turn>\n"
            "<start_of_turn>user\nAnd 3+3?<end_of_turn>\n<start_of_turn>model\n");
  // Rendered by jinja2 from kGemma3Jinja (transformers' settings: trim_blocks, lstrip_blocks).
  EXPECT_EQ(render("gemma3", kWithSystem),
            "<s><start_of_turn>user\nBe brief.\n\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n4<end_of_turn>\n"
            "<start_of_turn>user\nAnd 3+3?<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(render("gemma3", kNoSystem), render("gemma", kNoSystem));
  EXPECT_EQ(render("chatml", kNoSystem),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n What is 2+2? <|im_end|>\n"
            "<|im_start|>assistant\n 4 <|im_end|>\n<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render("chatml", {{"system", "Be brief."}, {"user", "Hi"}}),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // What llama.cpp's server logged as gpt-oss-20b's template rendering of this conversation (its
  // Jinja, on 2025-10-10), but for the date, which kvparity fixes.
  EXPECT_EQ(render("harmony", {{"system", "You are a helpful assistant"},
                               {"user", "Hello"},
                               {"assistant", "Hi there"},
                               {"user", "How are you?"}}),
            "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: "
            "2024-06\nCurrent date: 2025-08-05\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. "
            "Channel must be included for every message.<|end|><|start|>developer<|message|># Instructions\n\nYou are a "
            "helpful assistant\n\n<|end|><|start|>user<|message|>Hello<|end|><|start|>assistant<|channel|>final<|message|>"
            "Hi there<|end|><|start|>user<|message|>How are you?<|end|><|start|>assistant");
  // Without a system message no developer turn; the texts are not trimmed.
  EXPECT_EQ(render("harmony", {{"user", " 2+2? "}}),
            "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: "
            "2024-06\nCurrent date: 2025-08-05\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. "
            "Channel must be included for every message.<|end|><|start|>user<|message|> 2+2? <|end|><|start|>assistant");
  // The Phi formats, as their templates concatenate (nothing trimmed). phi4's: what llama.cpp's
  // template tests give for phi-4's template on such a conversation.
  EXPECT_EQ(render("phi3", kWithSystem),
            "<|system|>\nBe brief.<|end|>\n<|user|>\n What is 2+2? <|end|>\n<|assistant|>\n 4 <|end|>\n"
            "<|user|>\nAnd 3+3?<|end|>\n<|assistant|>\n");
  EXPECT_EQ(render("phi3", {{"user", "Hi"}}), "<|user|>\nHi<|end|>\n<|assistant|>\n");
  EXPECT_EQ(render("phi4-mini", kWithSystem),
            "<|system|>Be brief.<|end|><|user|> What is 2+2? <|end|><|assistant|> 4 <|end|><|user|>And 3+3?<|end|>"
            "<|assistant|>");
  EXPECT_EQ(render("phi4", {{"system", "You are a helpful assistant"},
                            {"user", "Hello"},
                            {"assistant", "Hi there"},
                            {"user", "Who are you"}}),
            "<|im_start|>system<|im_sep|>You are a helpful assistant<|im_end|><|im_start|>user<|im_sep|>Hello<|im_end|>"
            "<|im_start|>assistant<|im_sep|>Hi there<|im_end|><|im_start|>user<|im_sep|>Who are you<|im_end|>"
            "<|im_start|>assistant<|im_sep|>");
}

TEST(ChatTemplate, ConversationsTheTemplatesRefuseAreRefused) {
  auto error_of = [](const char* name, const std::vector<ChatMessage>& m) {
    try {
      render(name, m);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of("gemma", kWithSystem).find("no system message"), std::string::npos);
  EXPECT_NE(error_of("mistral", kWithSystem).find("no system message"), std::string::npos);
  EXPECT_NE(error_of("chatml", {{"user", "a"}, {"user", "b"}}).find("message 1 is 'user'"), std::string::npos);
  EXPECT_NE(error_of("llama2", {{"user", "a"}, {"assistant", "b"}}).find("end with a user message"), std::string::npos);
  EXPECT_NE(error_of("llama3", {{"system", "s"}}).find("no user message"), std::string::npos);
  EXPECT_NE(error_of("chatml", {{"tool", "a"}}).find("'tool'"), std::string::npos);
  try {
    parse_chat_template("vicuna", "--chat-template");
    ADD_FAILURE() << "an unknown format was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--chat-template vicuna"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, AModelsOwnTemplatePicksItsFormat) {
  auto format_of = [](const char* jinja) {
    const auto t = chat_template_of(jinja);
    return t ? t->describe() : std::string("none");
  };
  EXPECT_EQ(format_of(kLlama2Jinja), "llama2");
  EXPECT_EQ(format_of(kMistralJinja), "mistral");
  EXPECT_EQ(format_of(kGemmaJinja), "gemma");
  EXPECT_EQ(format_of(kLlama3Jinja), "llama3");
  EXPECT_EQ(format_of(kLlama31Jinja), "llama3.1");
  // Llama-3.2 dates its system turn today where transformers defines strftime_now; kvparity keeps
  // the fallback date, so the prompt is the same every day, and says so.
  EXPECT_EQ(format_of(llama32_jinja().c_str()), "llama3.1 (dated 26 Jul 2024, not today as the template would)");
  std::string other = kLlama31Jinja;
  other.replace(other.find("26 Jul 2024"), 11, "01 Jan 2025");
  EXPECT_EQ(format_of(other.c_str()), "llama3.1 (dated 01 Jan 2025)");
  const auto dated = chat_template_of(other);
  ASSERT_TRUE(dated);
  EXPECT_NE(render_chat(*dated, {{"user", "Hi"}}, "<s>", "").find("Today Date: 01 Jan 2025\n\n<|eot_id|>"),
            std::string::npos);
  other = kLlama31Jinja;
  other.replace(other.find("December 2023"), 13, "March 2025");
  EXPECT_EQ(format_of(other.c_str()), "none") << "another knowledge date is another layout";
  EXPECT_EQ(format_of(kQwen2Jinja), "chatml");
  EXPECT_EQ(format_of(kQwen25Jinja),
            "chatml (default system message \"You are Qwen, created by Alibaba Cloud. You are a helpful assistant.\")");
  EXPECT_EQ(format_of("{% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n'}}"
                      "{% endfor %}"),
            "chatml (no default system message)");
  EXPECT_EQ(format_of(kQwen3Jinja), "chatml (no default system message)");
  EXPECT_EQ(format_of(kGemma3Jinja), "gemma3");
  // gpt-oss's dates its system message today; kvparity fixes the date (its release) and says so.
  EXPECT_EQ(format_of(kHarmonyJinja), "harmony (dated 2025-08-05, not today as the template would)");
  std::string reworded = kHarmonyJinja;
  reworded.replace(reworded.find("Knowledge cutoff: 2024-06"), 25, "Knowledge cutoff: 2025-01");
  EXPECT_EQ(format_of(reworded.c_str()), "none") << "another system message is another layout";
  // Some GGUF conversions' Gemma-3 template separates the system message with one newline.
  std::string one_newline = kGemma3Jinja;
  for (size_t at = one_newline.find("'\\n\\n'"); at != std::string::npos; at = one_newline.find("'\\n\\n'"))
    one_newline.replace(at, 6, "'\\n'");
  EXPECT_EQ(format_of(one_newline.c_str()), "gemma3 (system message followed by \"\\n\")");
  const auto g3 = chat_template_of(one_newline);
  ASSERT_TRUE(g3);
  EXPECT_EQ(render_chat(*g3, {{"system", "Be brief."}, {"user", "Hi"}}, "<s>", ""),
            "<s><start_of_turn>user\nBe brief.\nHi<end_of_turn>\n<start_of_turn>model\n");
  const auto qwen3 = chat_template_of(kQwen3Jinja);
  ASSERT_TRUE(qwen3);
  EXPECT_EQ(render_chat(*qwen3, {{"user", "Hi"}}, "", ""), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(format_of(kPhi3Jinja), "phi3");
  EXPECT_EQ(format_of(kPhi4MiniJinja), "phi4-mini");
  // phi-4's two templates: its role markers end in <|im_sep|>, so ChatML's layout (which `auto`
  // took before) is another prompt.
  EXPECT_EQ(format_of(kPhi4Jinja), "phi4");
  EXPECT_EQ(format_of(kPhi4LaterJinja), "phi4");
  const auto phi4 = chat_template_of(kPhi4Jinja);
  ASSERT_TRUE(phi4);
  EXPECT_EQ(render_chat(*phi4, {{"user", "Hi"}}, "", ""), "<|im_start|>user<|im_sep|>Hi<|im_end|><|im_start|>assistant<|im_sep|>");
  // Phi-3-medium's drops a system message, and a template with its own system prompt is another layout.
  EXPECT_EQ(format_of(kPhi3MediumJinja), "none");
  EXPECT_EQ(format_of("<|im_start|>system<|im_sep|>You are Phi.<|im_end|>{% for m in messages %}"
                      "{{'<|im_start|>' + m['role'] + '<|im_sep|>' + m['content'] + '<|im_end|>'}}{% endfor %}"),
            "none");
  // Layouts kvparity does not render are not taken for a near one.
  EXPECT_EQ(format_of(kMistralToolsJinja), "none");
  EXPECT_EQ(format_of("{{ messages[0]['content'] }}"), "none");
  // The Qwen2.5 default is what its render puts first.
  const auto qwen25 = chat_template_of(kQwen25Jinja);
  ASSERT_TRUE(qwen25);
  EXPECT_EQ(render_chat(*qwen25, {{"user", "Hi"}}, "", ""),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, ARunsSystemMessageComesFirst) {
  const std::vector<ChatMessage> user = {{"user", "Hi"}};
  const std::vector<ChatMessage> with = {{"system", "Be brief."}, {"user", "Hi"}};
  for (const char* name : {"llama2", "llama3", "llama3.1", "chatml", "gemma3", "phi3", "phi4-mini", "phi4"}) {
    const ChatTemplate t = with_system(parse_chat_template(name, "--chat-template"), "Be brief.", "--system");
    EXPECT_EQ(render_chat(t, user, "<s>", "</s>"), render(name, with)) << name;
    EXPECT_EQ(t.describe(), std::string(name) + " (system message \"Be brief.\")");
    // A conversation's own system message wins over the run's.
    EXPECT_EQ(render_chat(t, {{"system", "Say no."}, {"user", "Hi"}}, "<s>", "</s>"),
              render(name, {{"system", "Say no."}, {"user", "Hi"}}))
        << name;
  }
  // The run's message replaces chatml's default; none given keeps it.
  EXPECT_EQ(render_chat(with_system(parse_chat_template("chatml", "-"), "", "--system"), user, "", ""),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render_chat(with_system(parse_chat_template("chatml", "-"), "Be brief.", "--system"), user, "", "")
                .find("helpful"),
            std::string::npos);
  EXPECT_EQ(with_system(parse_chat_template("llama3", "-"), "", "--system").describe(), "llama3");
  // Bytes that are not UTF-8 are shown replaced, not a failure (fuzz/regressions/fuzz_chat_template).
  EXPECT_EQ(with_system(parse_chat_template("llama3", "-"), "a\xFF", "--system").describe(),
            "llama3 (system message \"a\xEF\xBF\xBD\")");
  for (const char* name : {"gemma", "mistral"}) {
    try {
      with_system(parse_chat_template(name, "--chat-template"), "Be brief.", "--system");
      ADD_FAILURE() << name << " took a system message";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Usage);
      EXPECT_NE(std::string(e.what()).find("--system: chat template " + std::string(name) + " has no system message"),
                std::string::npos)
          << e.what();
    }
  }
}

// Qwen3's enable_thinking=False: the empty think block after the assistant header; a template
// without the switch refuses it, and so does a vocabulary without the tags.
TEST(ChatTemplate, ThinkingOffIsTheTemplatesEmptyThinkBlock) {
  const auto qwen3 = chat_template_of(kQwen3Jinja);
  ASSERT_TRUE(qwen3);
  EXPECT_TRUE(qwen3->thinking_switch);
  const ChatTemplate off = with_thinking_off(*qwen3, true, "--no-thinking");
  EXPECT_EQ(render_chat(off, {{"user", "Hi"}}, "", ""),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(off.describe(), "chatml (no default system message; thinking off)");
  EXPECT_EQ(with_thinking_off(*qwen3, false, "--no-thinking").describe(), qwen3->describe());
  for (const auto& t : {parse_chat_template("chatml", "-"), *chat_template_of(kQwen2Jinja)}) {
    try {
      with_thinking_off(t, true, "--no-thinking");
      ADD_FAILURE() << t.describe() << " took --no-thinking";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Usage);
      EXPECT_NE(std::string(e.what()).find("--no-thinking: chat template chatml has no thinking switch"),
                std::string::npos)
          << e.what();
    }
  }
  const auto tok = tokenizer_from_json(thinking_tokenizer_json(), "thinking tokenizer");
  const std::vector<int> ids = ChatEncoder(off, *tok, "model").encode({{"user", "Hi"}});
  // ... <think> "\n\n" </think> "\n\n": each tag one token, the prompt without them its prefix.
  const std::vector<int> plain = ChatEncoder(*qwen3, *tok, "model").encode({{"user", "Hi"}});
  ASSERT_GT(ids.size(), plain.size() + 2);
  EXPECT_TRUE(std::equal(plain.begin(), plain.end(), ids.begin()));
  EXPECT_EQ(ids[plain.size()], 502);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 503), 1);
  const auto no_tags = tokenizer_from_json(chat_tokenizer_json(), "chat tokenizer");
  try {
    ChatEncoder(off, *no_tags, "model");
    ADD_FAILURE() << "a vocabulary without <think> took thinking off";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("<think>"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, TheEncoderUsesTheSpecialTokensAndRefusesAVocabularyWithoutThem) {
  const auto tok = tokenizer_from_json(chat_tokenizer_json(), "chat tokenizer");
  ChatEncoder chatml(parse_chat_template("chatml", "--chat-template"), *tok, "model");
  const std::vector<int> ids = chatml.encode({{"user", "the dog"}});
  EXPECT_EQ(ids.front(), 504);                            // <|im_start|>, no BOS before it
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 504), 3);  // system, user, assistant
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 505), 2);
  EXPECT_EQ(chatml.turn_end_ids(), std::vector<int>{505});
  // A SentencePiece-style vocabulary starts each text between special tokens with its dummy space,
  // as transformers' (legacy) Llama tokenizers do.
  EXPECT_EQ(tok->decode(ids), " system\nYou are a helpful assistant. \n user\nthe dog \n assistant\n");

  ChatEncoder gemma(parse_chat_template("gemma", "--chat-template"), *tok, "model");
  const std::vector<int> g = gemma.encode({{"user", "the dog"}});
  EXPECT_EQ(g[0], tok->bos_id());
  EXPECT_EQ(g[1], 506);
  EXPECT_EQ(gemma.turn_end_ids(), std::vector<int>{507});
  ChatEncoder llama2(parse_chat_template("llama2", "--chat-template"), *tok, "model");
  EXPECT_TRUE(llama2.turn_end_ids().empty());  // EOS ends its turns
  EXPECT_EQ(llama2.encode({{"user", "hi"}})[0], tok->bos_id());
  const std::vector<int> turns = llama2.encode(kNoSystem);
  EXPECT_EQ(std::count(turns.begin(), turns.end(), tok->bos_id()), 2);

  // A base model's vocabulary spells <|im_start|> as several tokens: refused, naming the piece.
  const auto base = tokenizer_from_json(make_synthetic_tokenizer_json(512), "base tokenizer");
  try {
    ChatEncoder(parse_chat_template("chatml", "--chat-template"), *base, "base-model");
    ADD_FAILURE() << "a vocabulary without <|im_start|> was accepted";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("base-model"), std::string::npos) << w;
    EXPECT_NE(w.find("\"<|im_start|>\""), std::string::npos) << w;
    EXPECT_NE(w.find("--chat-template none"), std::string::npos) << w;
  }
  EXPECT_NO_THROW(ChatEncoder(parse_chat_template("mistral", "--chat-template"), *base, "base-model"));

  // harmony: its five markers are single tokens, and its turn ends at <|return|>.
  nlohmann::json hj = nlohmann::json::parse(make_synthetic_tokenizer_json(500));
  int id = 500;
  for (const char* piece : {"<|start|>", "<|message|>", "<|end|>", "<|channel|>", "<|return|>"})
    hj["added_tokens"].push_back({{"id", id++},
                                  {"content", piece},
                                  {"single_word", false},
                                  {"lstrip", false},
                                  {"rstrip", false},
                                  {"normalized", false},
                                  {"special", true}});
  const auto htok = tokenizer_from_json(hj.dump(), "harmony tokenizer");
  ChatEncoder harmony(parse_chat_template("harmony", "--chat-template"), *htok, "gpt-oss");
  const std::vector<int> h = harmony.encode({{"user", "the dog"}});
  EXPECT_EQ(h.front(), 500);
  EXPECT_EQ(std::count(h.begin(), h.end(), 500), 3);  // system, user, assistant
  EXPECT_EQ(std::count(h.begin(), h.end(), 502), 2);
  EXPECT_EQ(harmony.turn_end_ids(), std::vector<int>{504});
  EXPECT_THROW(ChatEncoder(parse_chat_template("harmony", "--chat-template"), *tok, "model"), Error);
}


TEST(ChatTemplate, AutoReadsTheShippedTemplateOrTheGgufsAndNamesWhereItLooked) {
  test::TempDir t;
  const std::string dir = t.file("m");
  std::filesystem::create_directories(dir);
  Checkpoint ck;
  ck.path = dir;
  ck.format = "hf";
  auto error_of = [&](const std::string& explicit_tokenizer) {
    try {
      chat_template_for(ck, explicit_tokenizer, ChatChoice{"auto"});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of("").find("ships no chat template"), std::string::npos);
  EXPECT_FALSE(chat_template_for(ck, "", ChatChoice{"none"}));
  EXPECT_EQ(chat_template_for(ck, "", ChatChoice{"gemma"})->name(), "gemma");

  write_text(dir + "/tokenizer_config.json", nlohmann::json({{"chat_template", kGemmaJinja}}).dump());
  EXPECT_EQ(chat_template_for(ck, "", ChatChoice{"auto"})->name(), "gemma");
  // A list of named templates: the "default" one.
  write_text(dir + "/tokenizer_config.json", nlohmann::json({{"chat_template",
                                                              {{{"name", "tool_use"}, {"template", kGemmaJinja}},
                                                               {{"name", "default"}, {"template", kLlama3Jinja}}}}})
                                                 .dump());
  EXPECT_EQ(chat_template_for(ck, "", ChatChoice{"auto"})->name(), "llama3");
  // An explicit --tokenizer's own tokenizer_config.json comes first.
  std::filesystem::create_directories(t.file("tok"));
  write_text(t.file("tok/tokenizer_config.json"), nlohmann::json({{"chat_template", kQwen2Jinja}}).dump());
  EXPECT_EQ(chat_template_for(ck, t.file("tok/tokenizer.json"), ChatChoice{"auto"})->name(), "chatml");
  // Broken files and unknown layouts are named.
  write_text(dir + "/tokenizer_config.json", "{\"chat_template\": ");
  EXPECT_NE(error_of("").find(dir + "/tokenizer_config.json: not a JSON object"), std::string::npos);
  write_text(dir + "/tokenizer_config.json",
             nlohmann::json({{"chat_template", {{{"name", 3}, {"template", kGemmaJinja}}, 5}}}).dump());
  EXPECT_NE(error_of("").find("neither a string nor a list"), std::string::npos);
  write_text(dir + "/tokenizer_config.json", nlohmann::json({{"chat_template", 7}}).dump());
  EXPECT_NE(error_of("").find("neither a string nor a list"), std::string::npos);
  write_text(dir + "/tokenizer_config.json", nlohmann::json({{"chat_template", kMistralToolsJinja}}).dump());
  EXPECT_NE(error_of("").find("none of the formats kvparity renders"), std::string::npos);

  // chat_template.jinja (what save_pretrained writes now) comes before the config's, as in
  // transformers' from_pretrained; a vision-language processor's chat_template.json comes last.
  write_text(dir + "/tokenizer_config.json", nlohmann::json({{"chat_template", kGemmaJinja}}).dump());
  write_text(dir + "/chat_template.jinja", kLlama3Jinja);
  EXPECT_EQ(chat_template_for(ck, "", ChatChoice{"auto"})->name(), "llama3");
  EXPECT_EQ(shipped_chat_template(dir, "", "").source, dir + "/chat_template.jinja");
  std::filesystem::remove(dir + "/chat_template.jinja");
  write_text(dir + "/tokenizer_config.json", "{}");
  write_text(dir + "/chat_template.json", nlohmann::json({{"chat_template", kQwen2Jinja}}).dump());
  EXPECT_EQ(chat_template_for(ck, "", ChatChoice{"auto"})->name(), "chatml");
  write_text(dir + "/chat_template.json", "[1]");
  EXPECT_NE(error_of("").find(dir + "/chat_template.json: not a JSON object with a chat_template string"),
            std::string::npos);
  std::filesystem::remove(dir + "/chat_template.json");

  // A GGUF carries its template as tokenizer.chat_template.
  const ModelConfig cfg = synthetic_config("llama", "tiny");
  const Checkpoint syn = synthesize_checkpoint(cfg, DType::F32);
  std::vector<TensorView> tensors;
  for (const auto& [name, view] : syn.tensors) tensors.push_back(view);
  GgufWriteOptions o;
  o.extra_kv = {{"tokenizer.chat_template", GgufValue::of_str(kMistralJinja)}};
  const VocabSpec vocab = make_synthetic_vocab(cfg.vocab_size);
  write_gguf(t.file("m.gguf"), cfg, tensors, &vocab, o);
  const Checkpoint g = open_checkpoint(t.file("m.gguf"));
  EXPECT_EQ(g.chat_template, kMistralJinja);
  EXPECT_EQ(chat_template_for(g, "", ChatChoice{"auto"})->name(), "mistral");
  o.extra_kv = {{"tokenizer.chat_template", GgufValue::of_u32(1)}};
  write_gguf(t.file("bad.gguf"), cfg, tensors, &vocab, o);
  try {
    open_checkpoint(t.file("bad.gguf"));
    ADD_FAILURE() << "a numeric tokenizer.chat_template was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.chat_template"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvp
