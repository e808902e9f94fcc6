#include "python_arguments.h"

#include <fmt/ranges.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.h"
#include "core/nearest_name.h"
#include "tokenizer/chat_template.h"

namespace kvp::python {

namespace {

std::string python_repr(const py::handle& v) { return py::repr(v).cast<std::string>(); }

bool is_int(const py::handle& v) { return py::isinstance<py::int_>(v) && !py::isinstance<py::bool_>(v); }

// A number the caller gave: an int or a float (not a bool, which Python also counts as an int).
std::optional<double> read_real(const py::handle& v, const char* name) {
  if (v.is_none()) return std::nullopt;
  if (py::isinstance<py::bool_>(v) || !(py::isinstance<py::float_>(v) || py::isinstance<py::int_>(v)))
    throw_type_error(name, "a number", v);
  return v.cast<double>();
}

std::string quoted_list(const std::vector<std::string>& kinds) {
  std::string s;
  for (const auto& k : kinds) s += (s.empty() ? "'" : ", '") + k + "'";
  return kinds.size() == 1 ? "sampler=" + s : "sampler=[" + s + "]";
}

}  // namespace

void throw_type_error(const std::string& name, const std::string& expected, const py::handle& got) {
  throw py::type_error(fmt::format("{}: expected {} (got {})", name, expected,
                                   py::str(py::type::handle_of(got).attr("__name__")).cast<std::string>()));
}

std::vector<std::string> read_str_list(const py::handle& v, const std::string& name, const std::string& expected) {
  if (py::isinstance<py::str>(v) || !py::isinstance<py::sequence>(v)) throw_type_error(name, expected, v);
  std::vector<std::string> out;
  const auto seq = py::reinterpret_borrow<py::sequence>(v);
  for (size_t i = 0; i < seq.size(); ++i) {
    const py::object item = seq[i];
    if (!py::isinstance<py::str>(item)) throw_type_error(fmt::format("{}[{}]", name, i), "a str", item);
    out.push_back(item.cast<std::string>());
  }
  return out;
}

std::vector<std::string> str_or_list(const py::handle& v, const std::string& name) {
  if (!py::isinstance<py::str>(v)) return read_str_list(v, name, "a str or a list of str");
  std::vector<std::string> out;
  const std::string s = v.cast<std::string>();
  size_t a = 0;
  while (a <= s.size()) {
    const size_t b = s.find(',', a);
    out.push_back(s.substr(a, b == std::string::npos ? std::string::npos : b - a));
    if (b == std::string::npos) break;
    a = b + 1;
  }
  return out;
}

Sampling read_sampling(const SamplingArgs& a, bool many) {
  const std::vector<std::string> kinds =
      a.sampler.is_none() ? std::vector<std::string>{"greedy"} : str_or_list(a.sampler, "sampler");
  if (kinds.empty()) fail_usage("sampler: give at least one sampler");
  if (kinds.size() > 1 && !many)
    fail_usage("{}: one sampler per call (kvparity.compare takes a list, one condition each)", quoted_list(kinds));
  std::vector<SamplerKind> parsed;
  for (const auto& k : kinds) parsed.push_back(parse_sampler(k));
  const bool sampling = std::any_of(kinds.begin(), kinds.end(), [](const std::string& k) { return k != "greedy"; });
  auto uses = [&](const char* k) { return std::find(kinds.begin(), kinds.end(), k) != kinds.end(); };
  // The CLI's rule: an argument the sampler ignores is refused rather than silently dropped.
  auto refuse_unless = [&](const py::object& v, const char* name, bool has_effect, const std::string& remedy,
                           const char* why) {
    if (!v.is_none() && !has_effect)
      fail_usage("{}={} has no effect with {}{}; {}", name, python_repr(v), quoted_list(kinds), why, remedy);
  };
  const std::string any_sampler = "use sampler='temperature', 'top-k', 'top-p' or 'min-p' to sample";
  refuse_unless(a.temperature, "temperature", sampling, any_sampler, " (greedy takes the argmax)");
  refuse_unless(a.seed, "seed", sampling, any_sampler, " (greedy draws no random numbers)");
  refuse_unless(a.top_k, "top_k", uses("top-k"), "it sets sampler='top-k'", "");
  refuse_unless(a.top_p, "top_p", uses("top-p"), "it sets sampler='top-p'", "");
  refuse_unless(a.min_p, "min_p", uses("min-p"), "it sets sampler='min-p'", "");

  SamplerConfig base;  // the CLI's defaults
  if (const auto t = read_real(a.temperature, "temperature")) {
    if (!(*t > 0.0) || !std::isfinite(*t))
      fail_usage("temperature={}: expected a finite number > 0", python_repr(a.temperature));
    base.temperature = *t;
  }
  if (!a.top_k.is_none()) {
    if (!is_int(a.top_k)) throw_type_error("top_k", "an int", a.top_k);
    const long long k = a.top_k.cast<long long>();
    if (k < 1 || k > (1LL << 31) - 1) fail_usage("top_k={}: expected 1 or more", python_repr(a.top_k));
    base.top_k = int(k);
  }
  if (const auto p = read_real(a.top_p, "top_p")) {
    if (!(*p > 0.0 && *p <= 1.0)) fail_usage("top_p={}: expected a number in (0, 1]", python_repr(a.top_p));
    base.top_p = *p;
  }
  if (const auto p = read_real(a.min_p, "min_p")) {
    if (!(*p >= 0.0 && *p <= 1.0)) fail_usage("min_p={}: expected a number in [0, 1]", python_repr(a.min_p));
    base.min_p = *p;
  }
  Sampling s;
  if (!a.seed.is_none()) {
    if (!is_int(a.seed)) throw_type_error("seed", "an int", a.seed);
    try {
      s.seed = a.seed.cast<uint64_t>();
    } catch (const py::cast_error&) {
      PyErr_Clear();
      fail_usage("seed={}: expected 0 to 2**64 - 1", python_repr(a.seed));
    }
    s.seed_given = true;
  }
  for (const SamplerKind k : parsed) {
    SamplerConfig c = base;
    c.kind = k;
    c.validate();
    s.samplers.push_back(c);
  }
  return s;
}

std::vector<std::string> read_stop_strings(const py::object& stop) {
  if (stop.is_none()) return {};
  const std::vector<std::string> out = py::isinstance<py::str>(stop)
                                           ? std::vector<std::string>{stop.cast<std::string>()}
                                           : read_str_list(stop, "stop", "a str or a list of str");
  for (const auto& s : out)
    if (s.empty()) fail_usage("stop: '' would match before the first token; give non-empty strings");
  return out;
}

std::function<bool(const std::string&)> read_hook_filter(const py::object& names, const std::vector<std::string>& hooks,
                                                         int n_layers) {
  if (names.is_none()) return [](const std::string&) { return true; };
  if (py::isinstance<py::function>(names) && !py::isinstance<py::str>(names)) {
    return [names](const std::string& n) {
      const int truth = PyObject_IsTrue(names(n).ptr());
      if (truth < 0) throw py::error_already_set();
      return truth == 1;
    };
  }
  const std::vector<std::string> wanted =
      py::isinstance<py::str>(names)
          ? std::vector<std::string>{names.cast<std::string>()}
          : read_str_list(names, "names", "a hook name, a list of them, a predicate or None");
  auto known = [&](const std::string& n) { return std::find(hooks.begin(), hooks.end(), n) != hooks.end(); };
  for (const auto& w : wanted) {
    if (known(w)) continue;
    // blocks.N.<point> past the last layer: the point is right, the layer is not there.
    const size_t dot = w.find('.', 7);
    if (w.rfind("blocks.", 0) == 0 && dot != std::string::npos && known("blocks.0" + w.substr(dot)))
      fail_usage("names: '{}': this model has {} layers (blocks.0 to blocks.{})", w, n_layers, n_layers - 1);
    const std::string near = nearest_name(w, hooks);
    if (!near.empty()) fail_usage("names: '{}' is not a hook of this model; did you mean '{}'?", w, near);
    fail_usage(
        "names: '{}' is not a hook of this model (its hooks: {} ... {}; help(kvparity.Model.run_with_cache) "
        "lists them)",
        w, hooks.front(), hooks.back());
  }
  return [wanted](const std::string& n) { return std::find(wanted.begin(), wanted.end(), n) != wanted.end(); };
}

ChatChoice chat_choice(const std::string& chat_template, const std::optional<std::string>& system,
                       std::optional<bool> enable_thinking) {
  if (std::find(std::begin(kChatTemplateNames), std::end(kChatTemplateNames), chat_template) ==
      std::end(kChatTemplateNames))
    fail_usage("chat_template='{}': expected None or one of '{}'", chat_template,
               fmt::join(kChatTemplateNames, "', '"));
  ChatChoice c;
  c.chat_template = chat_template;
  c.option = "chat_template";
  c.system_option = "system";
  if (system && system->empty())
    fail_usage("system='': the system message is empty (leave system= out for the template's own)");
  c.system = system.value_or("");
  // enable_thinking as transformers' apply_chat_template takes it: False switches thinking off,
  // True is the templates' default.
  c.no_thinking = enable_thinking.has_value() && !*enable_thinking;
  c.thinking_option = "enable_thinking=False";
  return c;
}

}  // namespace kvp::python
