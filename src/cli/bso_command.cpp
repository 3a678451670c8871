// gpucap bso: the batch-size optimizer for recurring training jobs (Zeus NSDI'23 and gpucap's
// own). One parent command; each subcommand lives in its own file.

#include <algorithm>
#include <memory>
#include <vector>

#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::cli {

Command add_bso_command(CLI::App& app, const GlobalOptions& global) {
  auto* bso = app.add_subcommand(
      "bso", "Batch-size optimizer for recurring training: serve Zeus's API, simulate on Zeus's traces, bench");
  bso->require_subcommand(1);
  auto subcommands = std::make_shared<std::vector<Command>>(std::vector<Command>{
      add_bso_serve_command(*bso, global),
      add_bso_simulate_command(*bso, global),
      add_bso_bench_command(*bso, global),
  });
  for (const auto& sub : *subcommands) sub.app->fallthrough();
  return {bso, [subcommands] {
            const auto chosen = std::find_if(subcommands->begin(), subcommands->end(),
                                             [](const Command& c) { return c.app->parsed(); });
            if (chosen == subcommands->end()) throw usage_error("bso needs a command: serve, simulate or bench");
            chosen->run();
          }};
}

}  // namespace gpucap::cli
