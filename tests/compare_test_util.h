#pragma once
// What the compare and teacher-forcing tests share: the stories260K files, prompts of mixed
// lengths, a top-p sampler, and catching a usage error.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "lab/compare.h"
#include "runtime/sampler.h"

namespace kvp {

struct Stories {
  std::string model, tokenizer;
};

// The stories260K files under $KVPARITY_SHARED, or "" with the reason in *why.
inline Stories find_stories(std::string* why) {
  const char* env = std::getenv("KVPARITY_SHARED");
  if (env == nullptr || *env == '\0') {
    *why =
        "KVPARITY_SHARED is unset; these tests need $KVPARITY_SHARED/models/stories260K/stories260K.bin and "
        "tok512.bin";
    return {};
  }
  const std::string dir = std::string(env) + "/models/stories260K/";
  for (const char* f : {"stories260K.bin", "tok512.bin"})
    if (!std::filesystem::exists(dir + f)) {
      *why = "missing shared test file: " + dir + f;
      return {};
    }
  return {dir + "stories260K.bin", dir + "tok512.bin"};
}

#define KVP_REQUIRE_STORIES(var)                \
  std::string why_##var;                        \
  const Stories var = find_stories(&why_##var); \
  if (var.model.empty()) FAIL() << why_##var

// Prompts of very different lengths (a single word up to a long sentence), so a batch prefills
// slices of different sizes and its sequences sit at different positions while decoding.
inline std::vector<Prompt> mixed_prompts() {
  return {{"p0", "Once"},
          {"p1", "The little girl found a shiny red ball in the garden and she wanted to show it to her mom, so"},
          {"p2", "Tom and Sam"},
          {"p3", "One day, a big dog"},
          {"p4", "The sun was hot. The cat slept under the old tree near the river while the birds sang"}};
}

inline SamplerConfig top_p() {
  SamplerConfig sm;
  sm.kind = SamplerKind::TopP;
  sm.top_p = 0.9;
  sm.temperature = 0.8;
  return sm;
}

inline std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no usage error";
  return "";
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace kvp
