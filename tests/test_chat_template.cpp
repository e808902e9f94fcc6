// Chat templates (tokenizer/chat_template.h, runtime/chat_for_model.h): each format renders what
// transformers' apply_chat_template renders for that family's template, the model's own template
// picks its format, the special tokens are single tokens or the run is refused, and `compare`,
// `eval gsm8k` and `generate` lay prompts out as user turns, pinning the choice in the results.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

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

// The templates as the families' instruct checkpoints ship them (tokenizer_config.json).
const char* kLlama2Jinja =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif "
    "%}{% for message in loop_messages %}{% if loop.index0 == 0 and system_message != false %}{% set content = "
    "'<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = "
    "message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + "
    "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif "
    "%}{% endfor %}";
const char* kMistralJinja =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] "
    "+ ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ "
    "raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}";
const char* kMistralToolsJinja =
    "{{- bos_token }}{%- for message in loop_messages %}{%- if message['role'] == 'user' %}{%- if tools is not none "
    "%}{{- '[AVAILABLE_TOOLS] [' }}{%- endif %}{{- '[INST] ' + message['content'] + '[/INST]' }}{%- endif %}{%- "
    "endfor %}";
const char* kGemmaJinja =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% "
    "endif %}{% for message in messages %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else "
    "%}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + "
    "'<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}";
const char* kLlama3Jinja =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
    "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
const char* kQwen2Jinja =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] "
    "+ '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\n' }}{% endif %}";
const char* kQwen25Jinja =
    "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0]['role'] == 'system' %}\n        {{- "
    "messages[0]['content'] }}\n    {%- endif %}\n{%- else %}\n    {%- if messages[0]['role'] == 'system' %}\n        "
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n    {%- else %}\n        {{- "
    "'<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n    "
    "{%- endif %}\n{%- endif %}{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + "
    "message.content + '<|im_end|>' + '\\n' }}{%- endfor %}";

// Gemma-3-it's template, its image branches left out: a system message is the first user turn's prefix.
const char* kGemma3Jinja = R"J({{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
)J";

// Qwen3's template, its tool and reasoning-history branches left out: no default system message,
// and the empty think block only where the caller passes enable_thinking=false (transformers'
// default leaves it undefined, so thinking is on and nothing follows the assistant header).
const char* kQwen3Jinja =
    "{%- if messages[0].role == 'system' %}\n    {{- '<|im_start|>system\\n' + messages[0].content + "
    "'<|im_end|>\\n' }}\n{%- endif %}\n{%- for message in messages %}\n    {%- if message.role == \"user\" %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n    "
    "{%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n    "
    "{%- if enable_thinking is defined and enable_thinking is false %}\n        {{- '<think>\\n\\n</think>\\n\\n' }}\n"
    "    {%- endif %}\n{%- endif %}";

// Llama-3.1-Instruct's template, its tool-calling branches left out (they do not run without tools).
const char* kLlama31Jinja = R"J({{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)J";

// Llama-3.1 with the date block of Llama-3.2-Instruct's, which dates the prompt today.
std::string llama32_jinja() {
  std::string j = kLlama31Jinja;
  const std::string fixed = R"J(    {%- set date_string = "26 Jul 2024" %})J";
  j.replace(j.find(fixed), fixed.size(), R"J(    {%- if strftime_now is defined %}
        {%- set date_string = strftime_now("%d %b %Y") %}
    {%- else %}
        {%- set date_string = "26 Jul 2024" %}
    {%- endif %})J");
  return j;
}

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
  for (const char* name : {"llama2", "llama3", "llama3.1", "chatml", "gemma3"}) {
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

// The synthetic vocabulary, 504 pieces, with eight special tokens after it: 512 ids, the tiny
// synthetic model's embedding rows.
const std::vector<std::string> kSpecials = {
    "<|im_start|>",        "<|im_end|>",        "<start_of_turn>", "<end_of_turn>",
    "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",      "<|extra|>"};

std::string chat_tokenizer_json() {
  nlohmann::json j = nlohmann::json::parse(make_synthetic_tokenizer_json(504));
  for (size_t i = 0; i < kSpecials.size(); ++i)
    j["added_tokens"].push_back({{"id", 504 + i},
                                 {"content", kSpecials[i]},
                                 {"single_word", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", false},
                                 {"special", true}});
  return j.dump();
}

// A ChatML vocabulary with Qwen3's thinking tags (ids 500-503), for the thinking switch.
std::string thinking_tokenizer_json() {
  nlohmann::json j = nlohmann::json::parse(make_synthetic_tokenizer_json(500));
  int id = 500;
  for (const char* piece : {"<|im_start|>", "<|im_end|>", "<think>", "</think>"})
    j["added_tokens"].push_back({{"id", id++},
                                 {"content", piece},
                                 {"single_word", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", false},
                                 {"special", std::string(piece).find('|') != std::string::npos}});
  return j.dump();
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
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

TEST(ChatTemplate, AutoReadsTokenizerConfigOrTheGgufAndNamesWhereItLooked) {
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
