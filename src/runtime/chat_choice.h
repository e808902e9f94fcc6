#pragma once
// What a run asks of chat templates (runtime/chat_for_model.h resolves it for a model).
#include <string>

namespace kvp {

struct ChatChoice {
  std::string chat_template = "none";  // --chat-template: "none" (or ""), "auto" or a format's name
  std::string system;                  // --system: a system message put first ("": the template's own)
  bool no_thinking = false;            // --no-thinking: a reasoning template's thinking switched off
  // The names the errors give them: the CLI's options, or the Python arguments.
  std::string option = "--chat-template", system_option = "--system", thinking_option = "--no-thinking";
};

}  // namespace kvp
