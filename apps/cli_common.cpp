#include "cli_common.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/chat_template.h"

namespace kvp::cli {

void ModelOptions::add(CLI::App* app, Parts parts) {
  app->add_option("--model", model, "llama2.c .bin, .gguf, .safetensors or HF directory")->required();
  if (parts.tokenizer)
    app->add_option("--tokenizer", tokenizer,
                    "tokenizer.json, SentencePiece tokenizer.model or llama2.c tokenizer.bin (default: the one the "
                    "model carries or sits beside)");
  one_of(app->add_option("--dtype", dtype, "compute dtype"), kDtypeNames);
  one_of(app->add_option("--kv-dtype", kv_dtype,
                         "KV-cache type (default: --dtype); q8_0/q4_0: blocks of 32 along head_dim, fp8: OCP E4M3/E5M2"),
         kKvTypeNames);
  real_in(app->add_option("--kv-scale", kv_scale, "fp8 KV caches: values are stored as fp8(x / scale)"), 0, false,
          HUGE_VAL, false);
  one_of(app->add_option("--kernels", kernels, "kernel policy"), kPolicyNames);
  threads_option(app, threads);
  device_option(app, device);
  simd_option(app, simd);
  if (parts.cache_capacity)
    int_at_least(
        app->add_option("--cache-capacity", cache_capacity, "static KV cache positions (0: the model's context)"), 0);
}

void ModelOptions::check(const CLI::App* cmd) const {
  // An explicit --kv-dtype equal to --dtype is accepted: it is honoured (it is what runs), like
  // --threads 1 with the reference kernels, so scripts may always spell both out.
  check_threads_policies(cmd, threads, {kernels});
  // A device this binary or machine cannot use stops the command before it writes anything.
  require_device(parse_device(device));
  require_simd(parse_simd(simd));
  refuse_unless(cmd, "--kv-scale", kv_dtype.rfind("fp8", 0) == 0, "--kv-dtype fp8_e4m3 or fp8_e5m2",
                "only the fp8 KV caches store a scaled value");
}

DType ModelOptions::compute_dtype() const { return parse_dtype(dtype); }

EngineOptions ModelOptions::engine() const {
  EngineOptions o;
  o.kernels = parse_policy(kernels);
  o.device = parse_device(device);
  o.threads = threads;
  o.kv_dtype = kv_dtype.empty() ? KvType::of(compute_dtype()) : *parse_kv_type(kv_dtype);
  o.kv_dtype.scale = float(kv_scale);
  o.cache_capacity = cache_capacity;
  o.simd = parse_simd(simd);
  return o;
}

CLI::Option* device_option(CLI::App* app, std::string& device) {
  return one_of(app->add_option("--device", device,
                                "where the model runs: cpu, or cuda (a build with CUDA, on a machine with a GPU)"),
                {"cpu", "cuda"});
}

CLI::Option* simd_option(CLI::App* app, std::string& simd) {
  return one_of(app->add_option("--simd", simd,
                                "SIMD target of the CPU kernels: auto (the best this CPU has), avx512, avx2 or scalar "
                                "(the portable fallback), to run what a lesser CPU runs"),
                kSimdNames);
}

void chat_options(CLI::App* app, ChatChoice& chat) {
  one_of(app->add_option("--chat-template", chat.chat_template,
                         "lay each prompt out as a user turn of an instruction-tuned model's chat: auto (the "
                         "template the model ships), a format by name, or none (the text as it is); generation "
                         "also stops at the format's end of turn")
             ->default_str("none"),
         {std::begin(kChatTemplateNames), std::end(kChatTemplateNames)});
  app->add_option("--system", chat.system,
                  "a system message before each prompt's user turn (with --chat-template; in place of the template's "
                  "default system message, if it has one)");
  app->add_flag("--no-thinking", chat.no_thinking,
                "a reasoning model's chat with its thinking switched off, as its template renders enable_thinking="
                "False (Qwen3: an empty think block opens each answer); refused for a template without that switch");
}

void check_chat(const CLI::App* cmd, const ChatChoice& chat) {
  refuse_unless(cmd, "--system", chat.chat_template != "none", "--chat-template auto or a format",
                "a system message is a turn of a chat; it has no effect with --chat-template none");
  refuse_unless(cmd, "--no-thinking", chat.chat_template != "none", "--chat-template auto",
                "thinking is switched in a chat template; it has no effect with --chat-template none");
  if (given(cmd, "--system") && chat.system.empty())
    fail_usage("--system: the system message is empty (leave the option out for the template's own)");
}

void SamplerOptions::add(CLI::App* app, bool list) {
  auto* s = app->add_option("--sampler", sampler, list ? "samplers, comma-separated, each run" : "token choice");
  list ? list_of(s, kSamplerNames) : one_of(s, kSamplerNames);
  real_in(app->add_option("--temperature", temperature, "sampling temperature (every sampler but greedy)"), 0, true,
          HUGE_VAL, false);
  int_at_least(app->add_option("--top-k", top_k, "top-k cutoff (--sampler top-k)"), 1);
  real_in(app->add_option("--top-p", top_p, "nucleus cutoff (--sampler top-p)"), 0, true, 1, false);
  real_in(app->add_option("--min-p", min_p, "min-p cutoff (--sampler min-p)"), 0, false, 1, false);
  seed_option(app, seed_text, "seed of the counter-based RNG (every sampler but greedy)");
}

void SamplerOptions::check(const CLI::App* cmd) const {
  const std::vector<std::string> kinds = split_list(sampler);
  auto uses = [&](const char* k) { return std::find(kinds.begin(), kinds.end(), k) != kinds.end(); };
  const bool sampling = std::any_of(kinds.begin(), kinds.end(), [](const std::string& k) { return k != "greedy"; });
  const std::string now = "it has no effect with --sampler " + sampler;
  const bool many = kinds.size() > 1;
  const std::string any_sampler = "a sampling --sampler: temperature, top-k, top-p or min-p";
  refuse_unless(cmd, "--temperature", sampling, any_sampler, now + "; greedy takes the argmax");
  refuse_unless(cmd, "--seed", sampling, any_sampler, now + "; greedy draws no random numbers");
  for (const char* k : {"top-k", "top-p", "min-p"})
    refuse_unless(cmd, std::string("--") + k, uses(k),
                  many ? fmt::format("{} among --sampler", k) : fmt::format("--sampler {}", k), now);
}

SamplerConfig SamplerOptions::config(const std::string& kind) const {
  SamplerConfig c;
  c.kind = parse_sampler(kind);
  c.temperature = temperature;
  c.top_k = top_k;
  c.top_p = top_p;
  c.min_p = min_p;
  c.validate();
  return c;
}

void check_threads_policies(const CLI::App* cmd, int threads, const std::vector<std::string>& policies) {
  const bool threaded =
      std::any_of(policies.begin(), policies.end(), [](const std::string& p) { return p != "reference"; });
  refuse_unless(cmd, "--threads", threaded || threads <= 1, "--kernels standard, invariant or portable",
                "the reference kernels run on one thread");
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

int token_id(const std::string& item, const std::string& option) {
  int v = -1;
  const auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
  if (item.empty() || item[0] == '-' || ec != std::errc() || p != item.data() + item.size())
    fail_usage("{}: '{}' is not a token id (a non-negative integer)", option, item);
  return v;
}

}  // namespace

std::vector<int> parse_token_list(const std::string& text_in, const std::string& option) {
  const std::string text = trim(text_in);
  std::vector<int> ids;
  if (!text.empty() && text[0] == '[') {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_array()) fail_usage("{}: '{}' is not a JSON array of token ids", option, text);
    for (const auto& v : j) {
      if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > INT_MAX)
        fail_usage("{}: {} is not a token id (a non-negative integer)", option, v.dump());
      ids.push_back(v.get<int>());
    }
  } else if (text.find(',') != std::string::npos) {
    size_t i = 0;
    while (true) {
      const size_t j = std::min(text.find(',', i), text.size());
      const std::string item = trim(text.substr(i, j - i));
      if (item.empty()) fail_usage("{}: '{}' has an empty item (expected ids like 1,2,3)", option, text);
      ids.push_back(token_id(item, option));
      if (j == text.size()) break;
      i = j + 1;
    }
  } else {
    size_t i = 0;
    while (i < text.size()) {
      size_t j = i;
      while (j < text.size() && !is_space(text[j])) ++j;
      ids.push_back(token_id(text.substr(i, j - i), option));
      while (j < text.size() && is_space(text[j])) ++j;
      i = j;
    }
  }
  if (ids.empty()) fail_usage("{}: no token ids given (expected 1,2,3, \"1 2 3\" or [1, 2, 3])", option);
  return ids;
}

void print_json(const std::string& s) { std::cout << s << std::endl; }

}  // namespace kvp::cli
