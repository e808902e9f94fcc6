#pragma once
// How the Python module reads its arguments. pybind11's own failure ("Unable to cast Python
// instance to C++ type") names neither the argument nor what it takes; here a wrong type is a
// TypeError that says both, and a wrong value a ValueError (kvparity's usage error) in the
// argument's Python name. The sampling arguments follow the command line's rules, its defaults
// and its refusal of an option the chosen sampler ignores included, so that a call and the CLI
// with the same settings give the same tokens.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/chat_choice.h"
#include "runtime/sampler.h"

namespace kvp::python {

namespace py = pybind11;

// TypeError "NAME: expected EXPECTED (got TYPE)".
[[noreturn]] void throw_type_error(const std::string& name, const std::string& expected, const py::handle& got);

// v as T, or the TypeError above.
template <class T>
T cast_arg(const py::handle& v, const std::string& name, const std::string& expected) {
  try {
    return v.cast<T>();
  } catch (const py::cast_error&) {
    throw_type_error(name, expected, v);
  }
}

// chat_template=, system= and enable_thinking= of a call (None: not given), as --chat-template,
// --system and --no-thinking take them; errors name the arguments.
ChatChoice chat_choice(const std::string& chat_template, const std::optional<std::string>& system,
                       std::optional<bool> enable_thinking = std::nullopt);

// A list (any sequence) of strings; an item that is not one is a TypeError naming it ("prompts[2]").
std::vector<std::string> read_str_list(const py::handle& v, const std::string& name, const std::string& expected);

// A string, or a list of strings; a string's commas separate items ("fp16,bf16").
std::vector<std::string> str_or_list(const py::handle& v, const std::string& name);

// The sampling arguments as the caller gave them; None is "not given".
struct SamplingArgs {
  py::object sampler = py::none();  // a name, or (compare) a list of names
  py::object temperature = py::none();
  py::object top_k = py::none();
  py::object top_p = py::none();
  py::object min_p = py::none();
  py::object seed = py::none();
};

struct Sampling {
  std::vector<SamplerConfig> samplers;  // one per sampler named, in order
  bool seed_given = false;
  uint64_t seed = 0;
};

// The samplers the arguments name, with the CLI's defaults (top_k 40, top_p 0.9, min_p 0.05,
// temperature 1) for what was not given. `many`: a list of samplers is allowed (compare's conditions).
Sampling read_sampling(const SamplingArgs& a, bool many);

// stop=: None, a string, or a list of non-empty strings.
std::vector<std::string> read_stop_strings(const py::object& stop);

// Which of `hooks` (the model's hook names) run_with_cache's names= keeps: None all of them, a name,
// a list of names (each one a hook of the model, or a ValueError saying which is not), or a
// predicate name -> truthy. Called with the GIL held.
std::function<bool(const std::string&)> read_hook_filter(const py::object& names, const std::vector<std::string>& hooks,
                                                         int n_layers);

}  // namespace kvp::python
