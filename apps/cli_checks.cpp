#include "cli_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include "core/error.h"
#include "model/synthetic.h"

namespace kvp::cli {

const std::vector<std::string> kDtypeNames{"fp32", "fp16", "bf16"};
const std::vector<std::string> kKvTypeNames{"fp32", "fp16", "bf16", "q8_0", "q4_0", "fp8_e4m3", "fp8_e5m2"};
const std::vector<std::string> kPolicyNames{"reference", "standard", "invariant", "portable"};
const std::vector<std::string> kSamplerNames{"greedy", "temperature", "top-k", "top-p", "min-p"};
const std::vector<std::string> kSynthPresets = synthetic_presets();
const std::vector<std::string> kSynthArchNames{"llama", "mistral", "gemma2",    "qwen2",     "qwen3", "gemma3",
                                               "olmo2", "mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "olmo3",
                                               "exaone4", "gpt_oss"};

namespace {

bool to_int(const std::string& s, long long* v) {
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

// Options bound to int have INT_MAX as their upper end; ">= 1" reads better than "[1, 2147483647]".
constexpr long long kIntMax = std::numeric_limits<int>::max();

std::string int_range_text(long long lo, long long hi) {
  if (hi == kIntMax) return fmt::format(">= {}", lo);
  return fmt::format("in [{}, {}]", lo, hi);
}

std::string choices_text(const std::vector<std::string>& choices) {
  return fmt::format("{}", fmt::join(choices, ", "));
}

// "" when `item` is an integer in [lo, hi], else the complaint.
std::string check_int(const std::string& item, long long lo, long long hi) {
  long long v = 0;
  if (!to_int(item, &v)) return fmt::format("'{}' is not an integer {}", item, int_range_text(lo, hi));
  if (v > hi && hi == kIntMax) return fmt::format("{} is too large (at most {})", item, hi);
  if (v < lo || v > hi) return fmt::format("{} is not {}", item, int_range_text(lo, hi));
  return "";
}

// Splits a comma list for a validator; "" or the complaint about an empty or repeated item.
std::string split_checked(const std::string& csv, std::vector<std::string>* items) {
  size_t i = 0;
  while (true) {
    const size_t j = std::min(csv.find(',', i), csv.size());
    const std::string item = csv.substr(i, j - i);
    if (item.empty()) return fmt::format("'{}' has an empty item (expected a comma-separated list)", csv);
    if (std::find(items->begin(), items->end(), item) != items->end()) return fmt::format("'{}' is listed twice", item);
    items->push_back(item);
    if (j == csv.size()) return "";
    i = j + 1;
  }
}

}  // namespace

CLI::Option* int_in(CLI::Option* opt, long long lo, long long hi) {
  opt->type_name("INT " + int_range_text(lo, hi));
  return opt->check(CLI::Validator([lo, hi](std::string& s) { return check_int(s, lo, hi); }, ""));
}

CLI::Option* int_at_least(CLI::Option* opt, long long lo) { return int_in(opt, lo, kIntMax); }

CLI::Option* real_in(CLI::Option* opt, double lo, bool lo_open, double hi, bool hi_open) {
  const std::string range = std::isinf(hi)
                                ? fmt::format("{} {}", lo_open ? ">" : ">=", lo)
                                : fmt::format("in {}{}, {}{}", lo_open ? "(" : "[", lo, hi, hi_open ? ")" : "]");
  opt->type_name("REAL " + range);
  return opt->check(CLI::Validator(
      [=](std::string& s) -> std::string {
        double v = 0;
        const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (s.empty() || ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v))
          return fmt::format("'{}' is not a number {}", s, range);
        if ((lo_open ? v <= lo : v < lo) || (hi_open ? v >= hi : v > hi)) return fmt::format("{} is not {}", s, range);
        return "";
      },
      ""));
}

CLI::Option* one_of(CLI::Option* opt, const std::vector<std::string>& choices) {
  opt->type_name(fmt::format("{{{}}}", fmt::join(choices, "|")));
  return opt->check(CLI::Validator(
      [choices](std::string& s) -> std::string {
        if (std::find(choices.begin(), choices.end(), s) != choices.end()) return "";
        return fmt::format("'{}' is not one of {}", s, choices_text(choices));
      },
      ""));
}

CLI::Option* list_of(CLI::Option* opt, const std::vector<std::string>& choices) {
  opt->type_name(fmt::format("{{{}}},...", fmt::join(choices, "|")));
  return opt->check(CLI::Validator(
      [choices](std::string& s) -> std::string {
        std::vector<std::string> items;
        if (std::string e = split_checked(s, &items); !e.empty()) return e;
        for (const auto& item : items)
          if (std::find(choices.begin(), choices.end(), item) == choices.end())
            return fmt::format("'{}' is not one of {}", item, choices_text(choices));
        return "";
      },
      ""));
}

CLI::Option* int_list_in(CLI::Option* opt, long long lo, long long hi) {
  opt->type_name("INT,... each " + int_range_text(lo, hi));
  return opt->check(CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        std::vector<std::string> items;
        if (std::string e = split_checked(s, &items); !e.empty()) return e;
        for (const auto& item : items)
          if (std::string e = check_int(item, lo, hi); !e.empty()) return e;
        return "";
      },
      ""));
}

CLI::Option* threads_option(CLI::App* app, int& threads) {
  return int_in(app->add_option("--threads", threads,
                                "worker threads; the standard kernels' results depend on the thread count, so the "
                                "default is one every machine has: pass --threads N for speed"),
                kMinThreads, kMaxThreads);
}

namespace {

// Exactly the decimal integers 0 .. 2^64-1: no sign, no spaces, no base prefix.
bool decimal_u64(const std::string& s, uint64_t* v) {
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string seed_complaint(const std::string& s) {
  return fmt::format("'{}' is not a decimal integer in [0, {}]", s, std::numeric_limits<uint64_t>::max());
}

}  // namespace

CLI::Option* seed_option(CLI::App* app, std::string& text, const std::string& help) {
  auto* opt = app->add_option("--seed", text, help);
  opt->type_name("INT in [0, 2^64-1]");
  return opt->check(CLI::Validator(
      [](std::string& s) -> std::string {
        uint64_t v = 0;
        return decimal_u64(s, &v) ? "" : seed_complaint(s);
      },
      ""));
}

uint64_t parse_seed(const std::string& text) {
  uint64_t v = 0;
  if (!decimal_u64(text, &v)) fail_usage("--seed: {}", seed_complaint(text));
  return v;
}

std::vector<std::string> split_list(const std::string& csv) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= csv.size()) {
    const size_t j = std::min(csv.find(',', i), csv.size());
    if (j > i) out.push_back(csv.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

bool given(const CLI::App* cmd, const std::string& option) { return cmd->count(option) > 0; }

void refuse_unless(const CLI::App* cmd, const std::string& option, bool has_effect, const std::string& remedy,
                   const std::string& reason) {
  if (!has_effect && given(cmd, option)) fail_usage("{} needs {} ({})", option, remedy, reason);
}

std::string clean_dir(const std::string& dir) {
  std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
  if (!p.has_filename() && p.has_relative_path()) p = p.parent_path();
  return p.empty() ? dir : p.string();
}

std::string count_of(size_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string HelpFormatter::make_option_opts(const CLI::Option* opt) const {
  std::string out;
  if (!opt->get_option_text().empty()) return " " + opt->get_option_text();
  if (opt->get_type_size() != 0) {
    if (!opt->get_type_name().empty()) out += " " + opt->get_type_name();
    if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
    if (opt->get_required()) out += " REQUIRED";
  }
  for (const CLI::Option* o : opt->get_needs()) out += " Needs: " + o->get_name();
  if (!opt->get_excludes().empty()) {
    out += " Excludes:";
    for (const CLI::Option* o : opt->get_excludes()) out += " " + o->get_name();
  }
  return out;
}

std::string HelpFormatter::make_option_desc(const CLI::Option* opt) const {
  std::string d = opt->get_description();
  // A flag's captured default ("false") says nothing; an empty default means "not set".
  if (opt->get_type_size() != 0 && !opt->get_required() && !opt->get_default_str().empty() &&
      opt->get_default_str() != "[]")
    d += " (default: " + opt->get_default_str() + ")";
  return d;
}

}  // namespace kvp::cli
