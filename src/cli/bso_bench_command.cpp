// gpucap bso bench: the six workloads of Zeus's NSDI'23 trace × seeds × both optimizers (Zeus's
// and gpucap's) on one power trace; a Markdown report in the form of
// ../shared/reference/zeus-bso-anchor.md and an SVG of cumulative regret. Simulated figures.

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpucap/bench/bso_bench.hpp"
#include "gpucap/bench/zeus_trace.hpp"
#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::cli {
namespace {

struct BenchFlags {
  std::optional<std::string> train_trace;
  std::optional<std::string> power_trace;
  std::vector<std::string> workloads;
  std::string seeds = "1..5";
  std::string optimizers = "zeus,gpucap";
  int recurrences = 50;
  double eta = 0.5;
  std::string beta = "2.0";
  unsigned jobs = 0;
  std::optional<std::string> out_dir;
};

// "1..5" or "1,2,7".
std::vector<std::uint64_t> parse_seeds(const std::string& text) {
  std::vector<std::uint64_t> seeds;
  const auto dots = text.find("..");
  if (dots != std::string::npos) {
    const auto first = parse_seed(text.substr(0, dots));
    const auto last = parse_seed(text.substr(dots + 2));
    if (last < first || last - first > 1000) throw usage_error(fmt::format("--seeds '{}' is not a range of at most 1000", text));
    for (auto s = first; s <= last; ++s) seeds.push_back(s);
    return seeds;
  }
  for (const auto part : split(text, ',')) {
    const auto item = std::string(trim(part));
    const auto seed = parse_integer(item);
    if (!seed || *seed < 0) throw usage_error(fmt::format("--seeds '{}': '{}' is not a seed (a whole number from 0)", text, item));
    if (std::find(seeds.begin(), seeds.end(), static_cast<std::uint64_t>(*seed)) != seeds.end()) {
      throw usage_error(fmt::format("--seeds '{}' lists {} twice", text, *seed));
    }
    seeds.push_back(static_cast<std::uint64_t>(*seed));
  }
  return seeds;
}

std::vector<bso::OptimizerKind> parse_optimizers(const std::string& text) {
  std::vector<bso::OptimizerKind> kinds;
  for (const auto part : split(text, ',')) {
    const auto kind = bso::parse_optimizer(trim(part));
    if (std::find(kinds.begin(), kinds.end(), kind) != kinds.end()) {
      throw usage_error(fmt::format("--optimizers '{}' lists {} twice", text, trim(part)));
    }
    kinds.push_back(kind);
  }
  return kinds;
}

// --workload: each once, each one of the six whose defaults are built in (another workload of the
// trace needs its own, which `gpucap bso simulate` takes).
void check_workloads(const std::vector<std::string>& given) {
  std::vector<std::string> known;
  for (const auto& w : bench::zeus_workloads()) known.push_back(w.name);
  for (std::size_t i = 0; i < given.size(); ++i) {
    if (std::find(known.begin(), known.end(), given[i]) == known.end()) {
      throw usage_error(fmt::format("--workload '{}' is not one of the six bso bench runs ({}); another workload of the "
                                    "trace runs under 'gpucap bso simulate', with its defaults given",
                                    given[i], join(known, ", ")));
    }
    if (std::find(given.begin(), given.begin() + static_cast<std::ptrdiff_t>(i), given[i]) != given.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw usage_error(fmt::format("--workload {} is given twice", given[i]));
    }
  }
}

void write_file(const std::string& path, const std::string& text) { write_text_file(path, text); }

}  // namespace

Command add_bso_bench_command(CLI::App& bso, const GlobalOptions& /*global*/) {
  auto flags = std::make_shared<BenchFlags>();
  auto* cmd = bso.add_subcommand(
      "bench", "Zeus's six NSDI'23 workloads × seeds × {zeus, gpucap} on one power trace: regret report (simulated)");
  cmd->add_option("--train-trace", flags->train_trace, "summary_train.csv (default: ../shared/data/zeus/nsdi23/)");
  cmd->add_option("--power-trace", flags->power_trace, "summary_power_<gpu>.csv (default: the V100 trace)");
  cmd->add_option("--workload", flags->workloads, "A workload to run (repeatable; default: all six)");
  cmd->add_option("--seeds", flags->seeds, "Seeds: FIRST..LAST or a comma list")->capture_default_str();
  cmd->add_option("--optimizers", flags->optimizers, "Comma list of zeus, gpucap")->capture_default_str();
  cmd->add_option("--recurrences", flags->recurrences, "Recurrences per simulation")->capture_default_str();
  cmd->add_option("--eta", flags->eta, "η of the cost")->capture_default_str();
  cmd->add_option("--beta", flags->beta, "β of early stopping, or 'none'")->capture_default_str();
  cmd->add_option("--jobs", flags->jobs, "Simulations in parallel (default: the number of cores)");
  cmd->add_option("--out", flags->out_dir, "Folder for report.md and regret.svg (default: print the report only)")
      ->check(output_path());
  return {cmd, [flags] {
            bench::BsoBenchOptions options;
            options.train_csv = flags->train_trace.value_or(default_zeus_trace("summary_train.csv"));
            options.power_csv = flags->power_trace.value_or(default_zeus_trace("summary_power_v100.csv"));
            check_workloads(flags->workloads);
            options.workloads = flags->workloads;
            options.seeds = parse_seeds(flags->seeds);
            options.optimizers = parse_optimizers(flags->optimizers);
            options.recurrences = flags->recurrences;
            if (!(flags->eta >= 0.0 && flags->eta <= 1.0)) throw usage_error("--eta must be in [0, 1]");
            options.eta = flags->eta;
            options.beta = parse_beta(flags->beta);
            options.jobs = flags->jobs > 0 ? flags->jobs : std::max(1U, std::thread::hardware_concurrency());
            if (flags->out_dir) {
              std::error_code ec;
              std::filesystem::create_directories(*flags->out_dir, ec);
              if (ec) throw Error(ErrorCode::io, fmt::format("cannot create {}: {}", *flags->out_dir, ec.message()));
            }
            const auto report = bench::run_bso_bench(options);
            const auto markdown = bench::bso_bench_markdown(report);
            std::cout << markdown;
            if (flags->out_dir) {
              const auto dir = std::filesystem::path(*flags->out_dir);
              write_file((dir / "report.md").string(), markdown);
              bench::write_bso_regret_svg(report, (dir / "regret.svg").string());
              std::cout << fmt::format("\nwrote {} and {}\n", (dir / "report.md").string(), (dir / "regret.svg").string());
            }
          }};
}

}  // namespace gpucap::cli
