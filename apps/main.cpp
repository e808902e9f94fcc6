// kvparity: measure, explain and eliminate cache-ON vs cache-OFF divergence.
#include <iostream>

#include "cli_common.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"kvparity — KV-cache numerics lab: cache-ON vs cache-OFF decoding on CPU"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kvparity 0.1.0");
  kvp::cli::register_generate(app);
  kvp::cli::register_tokenize(app);
  kvp::cli::register_forward(app);
  kvp::cli::register_model_files(app);
  kvp::cli::register_demo(app);
  kvp::cli::register_bench(app);
  kvp::cli::register_compare(app);
  kvp::cli::register_report(app);
  kvp::cli::register_profile(app);
  kvp::cli::register_patch(app);
  kvp::cli::register_eval(app);
  kvp::cli::register_merge(app);
  try {
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
