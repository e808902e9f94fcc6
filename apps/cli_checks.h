#pragma once
// Checks that make the command line mean what it says (issue 20): every number has a range that
// --help shows and the error names, lists are checked item by item, and an option that the chosen
// configuration would ignore is refused instead of silently dropped.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "lab/results_manifest.h"  // path_in

namespace kvp::cli {

// One thread range for every subcommand.
inline constexpr int kMinThreads = 1, kMaxThreads = 256;

extern const std::vector<std::string> kDtypeNames;    // fp32, fp16, bf16
extern const std::vector<std::string> kKvTypeNames;   // the dtypes, q8_0, q4_0, fp8_e4m3, fp8_e5m2
extern const std::vector<std::string> kPolicyNames;   // reference, standard, invariant, portable
extern const std::vector<std::string> kSamplerNames;  // greedy, temperature, top-k, top-p, min-p
extern const std::vector<std::string> kSynthPresets;  // tiny, then real models' shapes
extern const std::vector<std::string> kSynthArchNames;  // synth --arch: every family, by transformers' names

// Validators; each also sets the option's type name in --help to its range or choices.
CLI::Option* int_in(CLI::Option* opt, long long lo, long long hi);
CLI::Option* int_at_least(CLI::Option* opt, long long lo);
// Finite reals between lo and hi; *_open excludes the bound; hi = +inf: no upper bound.
CLI::Option* real_in(CLI::Option* opt, double lo, bool lo_open, double hi, bool hi_open);
CLI::Option* one_of(CLI::Option* opt, const std::vector<std::string>& choices);
// Comma-separated, each item one of `choices`, no empty or repeated items.
CLI::Option* list_of(CLI::Option* opt, const std::vector<std::string>& choices);
// Comma-separated integers, each in [lo, hi], no empty or repeated items.
CLI::Option* int_list_in(CLI::Option* opt, long long lo, long long hi);
CLI::Option* threads_option(CLI::App* app, int& threads);

// Seeds are read as text: a bound uint64_t would turn -1 or 2^64 into 2^64-1 without a word.
// Accepts exactly the decimal integers 0 .. 2^64-1.
CLI::Option* seed_option(CLI::App* app, std::string& text, const std::string& help);
uint64_t parse_seed(const std::string& text);  // text already accepted by seed_option

std::vector<std::string> split_list(const std::string& csv);  // non-empty items

// True when `option` was given on the command line of `cmd`.
bool given(const CLI::App* cmd, const std::string& option);
// Usage error (exit 2) "OPTION needs REMEDY (REASON)" when `option` was given but has no effect.
void refuse_unless(const CLI::App* cmd, const std::string& option, bool has_effect, const std::string& remedy,
                   const std::string& reason);

// A directory as given, with redundant separators and a trailing slash dropped ("out//" -> "out").
std::string clean_dir(const std::string& dir);
std::string count_of(size_t n, const char* one, const char* many);     // "1 directory", "2 directories"

// --help shows every default as "(default: X)" after the description, and ranges and choices as
// the option's type.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override;
  std::string make_option_desc(const CLI::Option* opt) const override;
};

}  // namespace kvp::cli
