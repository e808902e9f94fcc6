// `kvparity merge`: joins `eval gsm8k` shard directories (issue 7).
#include <iostream>

#include "cli_common.h"
#include "core/error.h"
#include "lab/gsm8k_eval.h"
#include "lab/gsm8k_merge.h"
#include "lab/report.h"

namespace kvp::cli {

void register_merge(CLI::App& app) {
  struct Opts {
    std::vector<std::string> dirs;
    std::string out;
    bool no_report = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("merge", "join `eval gsm8k` shard directories; refuses shards of different studies");
  cmd->add_option("dirs", o->dirs, "shard result directories")->required();
  cmd->add_option("--out", o->out, "merged results directory (must not hold results yet)")->required();
  cmd->add_flag("--no-report", o->no_report, "skip writing summary.json / summary.md / report.html");
  cmd->callback([o] {
    const MergeSummary s = merge_gsm8k(o->dirs, o->out);
    std::cout << fmt::format("merged {} records from {} directories into {}/{}", s.records, o->dirs.size(), o->out,
                             kGsm8kResultsFile);
    if (s.duplicates > 0) std::cout << fmt::format(" ({} identical duplicates dropped)", s.duplicates);
    std::cout << "\n";
    if (!s.missing_shards.empty()) {
      std::string m;
      for (const auto& x : s.missing_shards) m += (m.empty() ? "" : ", ") + x;
      std::cerr << "warning: shards not among the inputs: " << m << " (the merged study is incomplete)\n";
    }
    if (!o->no_report) {
      write_reports(o->out);
      std::cout << "wrote " << o->out << "/{summary.json,summary.md,report.html}\n";
    }
  });
}

}  // namespace kvp::cli
