// kvparity: measure, explain and eliminate cache-ON vs cache-OFF divergence.
#include <cstring>
#include <iostream>

#include "cli_common.h"
#include "core/build_info.h"
#include "core/error.h"
#include "core/nearest_name.h"

namespace {

// CLI11 reads an unknown subcommand as a stray argument and reports "A subcommand is required";
// name the word and the subcommand it was probably meant to be instead.
void check_subcommand_names(const CLI::App& app, int argc, char** argv) {
  const CLI::App* cur = &app;
  for (int i = 1;; ++i) {
    const auto subs = cur->get_subcommands({});
    if (subs.empty() || (i < argc && argv[i][0] == '-')) return;  // options: CLI11's to check
    const CLI::App* next = nullptr;
    std::vector<std::string> names;
    for (const CLI::App* s : subs) {
      names.push_back(s->get_name());
      if (i < argc && s->get_name() == argv[i]) next = s;
    }
    if (i == argc) {
      const std::string cmd = cur == &app ? "kvparity" : "kvparity " + cur->get_name();
      kvp::fail_usage("{} needs a subcommand: {} ('{} --help' describes them)", cmd, fmt::join(names, ", "), cmd);
    }
    if (next == nullptr) {
      const std::string near = kvp::nearest_name(argv[i], names);
      const std::string where = cur == &app ? "" : " of '" + cur->get_name() + "'";
      if (!near.empty()) kvp::fail_usage("unknown subcommand '{}'{}; did you mean '{}'?", argv[i], where, near);
      kvp::fail_usage("unknown subcommand '{}'{} (expected one of: {})", argv[i], where, fmt::join(names, ", "));
    }
    cur = next;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvparity — KV-cache numerics lab: cache-ON vs cache-OFF decoding on CPU and CUDA GPUs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", kvp::build_description());
  // Inherited by every subcommand added below: defaults shown in --help, one-line "error:" messages.
  app.option_defaults()->always_capture_default();
  auto formatter = std::make_shared<kvp::cli::HelpFormatter>();
  formatter->column_width(40);
  app.formatter(formatter);
  app.failure_message([](const CLI::App*, const CLI::Error& e) { return "error: " + std::string(e.what()) + "\n"; });
  kvp::cli::register_generate(app);
  kvp::cli::register_tokenize(app);
  kvp::cli::register_forward(app);
  kvp::cli::register_model_files(app);
  kvp::cli::register_inspect(app);
  kvp::cli::register_demo(app);
  kvp::cli::register_bench(app);
  kvp::cli::register_compare(app);
  kvp::cli::register_report(app);
  kvp::cli::register_profile(app);
  kvp::cli::register_patch(app);
  kvp::cli::register_eval(app);
  kvp::cli::register_merge(app);
  try {
    check_subcommand_names(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const kvp::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return e.kind() == kvp::ErrorKind::Usage ? 2 : 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
