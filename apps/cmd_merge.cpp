// `kvparity merge`: joins the shard directories of `eval gsm8k` (issue 7) or of `compare`.
#include <iostream>

#include "cli_common.h"
#include "core/error.h"
#include "lab/merge_shards.h"
#include "lab/report.h"
#include "lab/results_manifest.h"

namespace kvp::cli {

void register_merge(CLI::App& app) {
  struct Opts {
    std::vector<std::string> dirs;
    std::string out;
    bool no_report = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "merge",
      "join the --out directories of `eval gsm8k --shard` or `compare --shard` runs; refuses shards of "
      "different studies");
  cmd->add_option("dirs", o->dirs, "shard result directories")->required();
  cmd->add_option("--out", o->out, "merged results directory (must not hold results yet)")->required();
  cmd->add_flag("--no-report", o->no_report, "skip writing summary.json / summary.md / report.html");
  cmd->callback([o] {
    const std::string out = clean_dir(o->out);
    const MergeSummary s = merge_shards(o->dirs, out);
    std::cout << fmt::format("merged {} from {} into {}", count_of(size_t(s.records), "record", "records"),
                             count_of(o->dirs.size(), "directory", "directories"), path_in(out, s.results_file));
    if (s.duplicates > 0)
      std::cout << fmt::format(" ({} dropped)",
                               count_of(size_t(s.duplicates), "identical duplicate", "identical duplicates"));
    std::cout << "\n";
    if (!s.missing_shards.empty()) {
      std::string m;
      for (const auto& x : s.missing_shards) m += (m.empty() ? "" : ", ") + x;
      std::cerr << "warning: shards not among the inputs: " << m
                << fmt::format(
                       " (the merged study is incomplete; `kvparity {}` with the shards' options, --out {} and "
                       "no --shard runs what is missing",
                       s.kind == "compare" ? "compare" : "eval gsm8k", out)
                << ")\n";
    }
    if (!o->no_report) {
      write_reports(out);
      std::cout << "wrote " << path_in(out, "{summary.json,summary.md,report.html}") << "\n";
    }
  });
}

}  // namespace kvp::cli
