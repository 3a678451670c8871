// The bench's outputs for a matrix's runs (bench/harness.hpp): summary.csv and summary.json, and
// report.md with its tables, the cap steps' recovery, the offline searches and the plots.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpucap/bench/harness.hpp"
#include "gpucap/bench/plots.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/runtime/tuning.hpp"
#include "gpucap/tune/oracle.hpp"
#include "gpucap/tune/registry.hpp"

namespace gpucap::bench {

namespace {

// Empty when a run has no steps or a step never recovered (the JSON says which).
std::string optional_text(std::optional<int> value) { return value ? std::to_string(*value) : std::string(); }

// null where there is no value.
template <typename T>
nlohmann::json optional_json(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json();
}

// How many evaluations the BOBD target counts (≥ 98 % of the oracle within 20).
constexpr std::size_t kSearchCheckpoint = 20;

// A run's searches: evaluations and cost summed over its caps, % of the oracle averaged over them.
struct SearchTotals {
  std::size_t evaluations = 0;
  double cost_s = 0.0;
  std::optional<double> pct_after_checkpoint;
  std::optional<double> pct_at_end;
};

std::optional<double> mean_pct(const std::vector<SearchProgress>& searches, std::size_t evaluations) {
  double sum = 0.0;
  for (const auto& search : searches) {
    const auto pct = search.pct_of_oracle_after(evaluations);
    if (!pct) return std::nullopt;
    sum += *pct;
  }
  return searches.empty() ? std::nullopt : std::optional<double>(sum / static_cast<double>(searches.size()));
}

SearchTotals search_totals(const BenchRun& run) {
  SearchTotals totals;
  std::size_t longest = 0;
  for (const auto& search : run.searches) {
    totals.evaluations += search.best_img_s.size();
    totals.cost_s += search.cost_s;
    longest = std::max(longest, search.best_img_s.size());
  }
  totals.pct_after_checkpoint = mean_pct(run.searches, kSearchCheckpoint);
  totals.pct_at_end = mean_pct(run.searches, longest);
  return totals;
}

std::string optional_pct_text(std::optional<double> pct) { return pct ? fmt::format("{:.2f}", *pct) : std::string(); }

nlohmann::json searches_json(const std::vector<SearchProgress>& searches) {
  auto out = nlohmann::json::array();
  for (const auto& search : searches) {
    auto pct = nlohmann::json::array();
    for (std::size_t n = 1; n <= search.best_img_s.size(); ++n) pct.push_back(optional_json(search.pct_of_oracle_after(n)));
    out.push_back({{"cap_w", search.cap_w},
                   {"evaluations", search.best_img_s.size()},
                   {"cost_s", search.cost_s},
                   {"best", search.best ? nlohmann::json(tune::describe(*search.best)) : nlohmann::json()},
                   {"oracle_img_s", optional_json(search.oracle_img_s)},
                   {"best_so_far_img_s", search.best_img_s},
                   {"best_so_far_pct_of_oracle", std::move(pct)}});
  }
  return out;
}

nlohmann::json steps_json(const std::vector<CapStepRecovery>& steps) {
  auto out = nlohmann::json::array();
  for (const auto& step : steps) {
    out.push_back({{"time_s", step.time_s},
                   {"from_w", step.from_w},
                   {"to_w", step.to_w},
                   {"windows_to_under_cap", optional_json(step.windows_to_under_cap)},
                   {"windows_to_95pct_oracle", optional_json(step.windows_to_95pct_oracle)}});
  }
  return out;
}

}  // namespace

std::string bench_summary_csv(const Matrix& matrix, const std::vector<BenchRun>& runs) {
  std::string out =
      "matrix,job,model,dataset,cap_w,cap_schedule,algorithm,images,duration_s,throughput_img_s,"
      "oracle_throughput_img_s,pct_of_oracle,over_cap_windows_pct,over_cap_steady_windows_pct,time_over_cap_s,energy_j,"
      "energy_j_per_image,mean_power_w,max_power_w,cap_steps,windows_to_under_cap,windows_to_95pct_oracle,"
      "search_evaluations,search_cost_s,search_pct_of_oracle_after_20,search_pct_of_oracle,platform\n";
  for (const auto& run : runs) {
    const auto& s = run.summary;
    // A constant cap fills cap_w; a schedule fills cap_schedule as "TIME:CAP" pairs separated by spaces.
    const auto cap_w = run.schedule.is_constant() ? fmt::format("{:g}", run.schedule.steps().front().cap_w) : "";
    std::string schedule;
    if (!run.schedule.is_constant()) {
      for (const auto& step : run.schedule.steps()) {
        schedule += fmt::format("{}{:g}:{:g}", schedule.empty() ? "" : " ", step.time_s, step.cap_w);
      }
    }
    const auto pct = run.pct_of_oracle();
    const auto oracle = run.oracle_throughput_img_s > 0.0 ? fmt::format("{:.3f}", run.oracle_throughput_img_s) : "";
    const auto search = search_totals(run);
    const auto searched = !run.searches.empty();
    out += fmt::format(
        "{},{},{},{},{},{},{},{},{:.3f},{:.3f},{},{},{:.3f},{:.3f},{:.3f},{:.1f},{:.5f},{:.2f},{:.2f},{},{},{},{},{},{},{},"
        "{}\n",
        matrix.id, run.job, run.model, run.dataset, cap_w, schedule, run.algorithm, s.images, s.duration_s,
        s.throughput_img_s, oracle, pct ? fmt::format("{:.2f}", *pct) : "", s.over_cap_windows_pct,
        run.over_cap_steady_windows_pct, s.time_over_cap_s, s.energy_j, s.energy_j / static_cast<double>(s.images),
        s.mean_power_w, s.max_power_w, run.cap_steps.size(), optional_text(run.worst_windows_to_under_cap()),
        optional_text(run.worst_windows_to_95pct_oracle()), searched ? std::to_string(search.evaluations) : "",
        searched ? fmt::format("{:.1f}", search.cost_s) : "", optional_pct_text(search.pct_after_checkpoint),
        optional_pct_text(search.pct_at_end), s.simulated ? "sim" : "real");
  }
  return out;
}

nlohmann::json bench_summary_json(const Matrix& matrix, const std::vector<BenchRun>& runs,
                                  const BenchOptions& options) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& run : runs) {
    const auto& s = run.summary;
    rows.push_back({{"matrix", matrix.id},
                    {"job", run.job},
                    {"model", run.model},
                    {"dataset", run.dataset},
                    {"cap", run.schedule.to_string()},
                    {"algorithm", run.algorithm},
                    {"images", s.images},
                    {"duration_s", s.duration_s},
                    {"throughput_img_s", s.throughput_img_s},
                    {"oracle_throughput_img_s",
                     run.oracle_throughput_img_s > 0.0 ? nlohmann::json(run.oracle_throughput_img_s) : nlohmann::json()},
                    {"pct_of_oracle", run.pct_of_oracle() ? nlohmann::json(*run.pct_of_oracle()) : nlohmann::json()},
                    {"over_cap_windows_pct", s.over_cap_windows_pct},
                    {"over_cap_steady_windows_pct", run.over_cap_steady_windows_pct},
                    {"cap_steps", steps_json(run.cap_steps)},
                    {"searches", searches_json(run.searches)},
                    {"time_over_cap_s", s.time_over_cap_s},
                    {"energy_j", s.energy_j},
                    {"energy_j_per_image", s.energy_j / static_cast<double>(s.images)},
                    {"mean_power_w", s.mean_power_w},
                    {"max_power_w", s.max_power_w},
                    {"windows", s.windows},
                    {"simulated", s.simulated}});
  }
  return {{"matrix", matrix.id}, {"gpu", matrix.gpu},        {"seed", options.seed},
          {"sample_hz", options.sample_hz}, {"simulated", true}, {"runs", std::move(rows)}};
}

namespace {

// A per-run figure; NaN where the run has none (no oracle).
using Metric = double (*)(const BenchRun&);

double throughput(const BenchRun& r) { return r.summary.throughput_img_s; }
double over_cap(const BenchRun& r) { return r.summary.over_cap_windows_pct; }
double steady_over_cap(const BenchRun& r) { return r.over_cap_steady_windows_pct; }
double joules_per_image(const BenchRun& r) { return r.summary.energy_j / static_cast<double>(r.summary.images); }
double oracle(const BenchRun& r) {
  return r.oracle_throughput_img_s > 0.0 ? r.oracle_throughput_img_s : std::numeric_limits<double>::quiet_NaN();
}
double pct_of_oracle(const BenchRun& r) {
  return r.pct_of_oracle().value_or(std::numeric_limits<double>::quiet_NaN());
}

const BenchRun& find_run(const std::vector<BenchRun>& runs, const std::string& job, const std::string& algorithm) {
  for (const auto& run : runs) {
    if (run.job == job && run.algorithm == algorithm) return run;
  }
  throw Error(ErrorCode::internal, fmt::format("report: no run for job {} / {}", job, algorithm));
}

std::string metric_table(const Matrix& matrix, const std::vector<BenchRun>& runs, const BenchOptions& options,
                         Metric metric, const char* number_format) {
  std::string header = "| job | model | dataset | cap (W) |";
  std::string rule = "|---|---|---|---|";
  for (const auto& algorithm : options.algorithms) {
    header += fmt::format(" {} |", algorithm);
    rule += "---:|";
  }
  std::string out = fmt::format("{}\n{}\n", header, rule);
  for (const auto& job : matrix.jobs) {
    out += fmt::format("| {} | {} | {} | {} |", job.id, job.model, job.dataset, job.schedule.to_string());
    for (const auto& algorithm : options.algorithms) {
      const double x = metric(find_run(runs, job.id, algorithm));
      const auto value = std::isnan(x) ? std::string("–") : fmt::format(fmt::runtime(number_format), x);
      out += fmt::format(" {} |", value);
    }
    out += "\n";
  }
  return out;
}

std::string windows_text(std::optional<int> windows) { return windows ? std::to_string(*windows) : "never"; }

std::string cap_step_section(const Matrix& matrix, const std::vector<BenchRun>& runs, const BenchOptions& options) {
  std::string table;
  for (const auto& job : matrix.jobs) {
    for (const auto& algorithm : options.algorithms) {
      const auto& run = find_run(runs, job.id, algorithm);
      for (const auto& step : run.cap_steps) {
        table += fmt::format("| {} | {:g} s: {:g} → {:g} W | {} | {} | {} |\n", job.id, step.time_s, step.from_w,
                             step.to_w, algorithm, windows_text(step.windows_to_under_cap),
                             windows_text(step.windows_to_95pct_oracle));
      }
    }
  }
  if (table.empty()) return {};
  return fmt::format(
      "\n## Cap steps: windows to recover (simulated)\n\n"
      "Windows are counted from the end of the step's *transition* — the change of the cap until the power reading "
      "shows the controller's first answer (its next decision plus the sensor's averaging time); 1 = the first "
      "window after it. Windows that hold part of a transition are left out of the count (and of the share of "
      "windows over the cap outside transitions). *under cap*: the first window with no sample over the new cap; "
      "*95 % of oracle*: the first window under the cap at ≥ 95 % of the oracle's throughput under it; *never*: not "
      "before the next step or the end of the run.\n\n"
      "| job | step | algorithm | windows to under cap | windows to 95 % of oracle |\n|---|---|---|---:|---:|\n{}",
      table);
}

// Every search of the runs with its job, in matrix order.
struct JobSearch {
  std::string job;
  const SearchProgress* search;
};

std::vector<JobSearch> all_searches(const Matrix& matrix, const std::vector<BenchRun>& runs,
                                    const BenchOptions& options) {
  std::vector<JobSearch> out;
  for (const auto& job : matrix.jobs) {
    for (const auto& algorithm : options.algorithms) {
      for (const auto& search : find_run(runs, job.id, algorithm).searches) out.push_back({job.id, &search});
    }
  }
  return out;
}

std::string pct_text(std::optional<double> pct) { return pct ? fmt::format("{:.1f}", *pct) : std::string("–"); }

std::string search_section(const Matrix& matrix, const sim::Catalog& catalog, const std::vector<BenchRun>& runs,
                           const BenchOptions& options) {
  const auto searches = all_searches(matrix, runs, options);
  if (searches.empty()) return {};
  std::size_t longest = 0;
  for (const auto& s : searches) longest = std::max(longest, s.search->best_img_s.size());
  std::vector<std::size_t> checkpoints;
  for (const std::size_t n : {1UL, 2UL, 3UL, 5UL, 10UL, 15UL, 20UL, 25UL, 30UL, 40UL, 50UL, 75UL, 100UL}) {
    if (n < longest) checkpoints.push_back(n);
  }
  checkpoints.push_back(longest);
  std::string progress;
  for (const auto n : checkpoints) {
    double sum = 0.0, worst = 1e300;
    int count = 0, good = 0;
    for (const auto& s : searches) {
      const auto pct = s.search->pct_of_oracle_after(n);
      if (!pct) continue;
      sum += *pct;
      worst = std::min(worst, *pct);
      ++count;
      if (*pct >= 98.0) ++good;
    }
    if (count == 0) continue;
    progress += fmt::format("| {} | {:.2f} | {:.1f} | {} of {} |\n", n, sum / count, worst, good, count);
  }
  std::string per_job;
  double cost_s = 0.0;
  for (const auto& s : searches) {
    const auto& search = *s.search;
    cost_s += search.cost_s;
    per_job += fmt::format("| {} | {:g} | {} | {} | {} | {} | {} | {:.0f} |\n", s.job, search.cap_w,
                           search.best ? tune::describe(*search.best) : "none feasible",
                           pct_text(search.pct_of_oracle_after(10)), pct_text(search.pct_of_oracle_after(20)),
                           pct_text(search.pct_of_oracle_after(search.best_img_s.size())), search.best_img_s.size(),
                           search.cost_s);
  }
  const auto space_size = runtime::default_search_space(catalog.gpu(matrix.gpu)).size();
  const auto budget = options.search_budget > 0 ? options.search_budget : tune::tuner_info("bobd").default_budget;
  return fmt::format(
      "\n## Offline search: BOBD's best so far against evaluations (simulated)\n\n"
      "Before its runs, `bobd` searches the oracle's space ({} configurations) for every cap a job meets, with at "
      "most {} fixed-configuration measurements of {:g} s each, and the run holds the best feasible configuration "
      "found for the cap in force. *% of oracle* here compares like with like: the best feasible throughput "
      "measured after N evaluations against the best of the oracle's grid under the same cap, from the same "
      "measurements (same length, same seed). The run's own *% of oracle* above is measured over the run. "
      "A search costs {:.0f} s of measurement on average against {:.0f} s for the oracle's grid.\n\n"
      "| evaluations | mean % of oracle | worst % | searches at ≥ 98 % |\n|---:|---:|---:|---:|\n{}\n"
      "| job | cap (W) | best found | % after 10 | % after 20 | % at the end | evaluations | measurement (s) |\n"
      "|---|---:|---|---:|---:|---:|---:|---:|\n{}",
      space_size, budget, options.oracle_measure_s, cost_s / static_cast<double>(searches.size()),
      static_cast<double>(space_size) * options.oracle_measure_s, progress, per_job);
}

std::string plots_section(const Matrix& matrix, const std::vector<BenchRun>& runs, const BenchOptions& options) {
  const auto folder = std::filesystem::path(options.plot_dir).filename().string();
  std::string out = fmt::format("\n## Plots (simulated)\n\n![mean % of oracle]({}/{})\n\n", folder, kOracleChartFile);
  if (has_searches(runs)) out += fmt::format("![BOBD: best so far against evaluations]({}/{})\n\n", folder, kSearchChartFile);
  out += "Per job, every algorithm's window maximum power against the cap, and its batch size:\n\n";
  for (const auto& job : matrix.jobs) {
    out += fmt::format("- [job {} ({})]({}/{})\n", job.id, job.model, folder, timeline_file(job.id));
  }
  return out;
}

}  // namespace

namespace {

// Multi-tenant matrices: the oracle's best MPS partition per job and cap (the same for every
// algorithm of a job, so the first run's).
std::string partition_oracle_section(const Matrix& matrix, const std::vector<BenchRun>& runs) {
  if (!matrix.mps) return {};
  std::string out = fmt::format(
      "\n## The oracle's best MPS partition (simulated)\n\nEvery partition of at most {} tenants (5-% shares, "
      "PctoDL's batch pool and memory clocks) searched on the twin's model, then measured; the SM clock steps down "
      "until the measurement stays under the cap. The oracle is the better of this and the best single process.\n\n"
      "| job | cap: tenants (share:batch) @ clocks, measured throughput |\n|---|---|\n",
      matrix.mps->oracle_max_tenants);
  std::vector<std::string> seen;
  for (const auto& run : runs) {
    if (std::find(seen.begin(), seen.end(), run.job) != seen.end()) continue;
    seen.push_back(run.job);
    out += fmt::format("| {} | {} |\n", run.job, run.partition_oracle.empty() ? "none fits" : join(run.partition_oracle, "; "));
  }
  return out;
}

}  // namespace

std::string bench_report_markdown(const Matrix& matrix, const sim::Catalog& catalog, const std::vector<BenchRun>& runs,
                                  const BenchOptions& options, const std::string& command) {
  const auto& gpu = catalog.gpu(matrix.gpu);
  std::string out = fmt::format("# Simulated {}: matrix `{}`\n\n", gpu.name, matrix.id);
  out += fmt::format(
      "**Every figure on this page is simulated** — gpucap's GPU twin in virtual time, not a real GPU.\n"
      "{}\n\nGenerated by `{}` (seed {}, power sampled at {:g} Hz). Re-running the command reproduces it "
      "exactly.\n\n",
      matrix.description, command, options.seed, options.sample_hz);

  out +=
      "How to read it: *throughput* is images / run time; *windows over cap* is the share of control windows in "
      "which at least one power sample exceeded the cap in force when it was taken; *energy per image* is the "
      "board energy of the run / images. Means are unweighted over jobs.\n\n";
  out += "## Means over all jobs\n\n";
  out += "| algorithm | throughput (img/s) | % of oracle | windows over cap (%) | outside cap transitions (%) | energy "
         "per image (J) | jobs with > 5 % of windows over cap |\n";
  out += "|---|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& algorithm : options.algorithms) {
    double sum_throughput = 0.0, sum_over = 0.0, sum_steady = 0.0, sum_energy = 0.0, sum_pct = 0.0;
    int bad_jobs = 0, with_oracle = 0;
    for (const auto& job : matrix.jobs) {
      const auto& run = find_run(runs, job.id, algorithm);
      sum_throughput += throughput(run);
      sum_over += over_cap(run);
      sum_steady += steady_over_cap(run);
      sum_energy += joules_per_image(run);
      if (over_cap(run) > 5.0) ++bad_jobs;
      if (const auto pct = run.pct_of_oracle()) {
        sum_pct += *pct;
        ++with_oracle;
      }
    }
    const auto n = static_cast<double>(matrix.jobs.size());
    const auto pct = with_oracle > 0 ? fmt::format("{:.1f}", sum_pct / with_oracle) : std::string("–");
    out += fmt::format("| {} | {:.1f} | {} | {:.2f} | {:.2f} | {:.4f} | {} |\n", algorithm, sum_throughput / n, pct,
                       sum_over / n, sum_steady / n, sum_energy / n, bad_jobs);
  }
  if (options.oracle) {
    out += fmt::format(
        "\n*% of oracle*: the run's throughput against the oracle's over the same run — the exhaustive search's best "
        "configuration under each cap (batch sizes 1–256 × the DVFS ladder{}, each measured for {:g} s on the twin "
        "with its highest sample as the window maximum), weighted by how long each cap held. The oracle switches "
        "configuration the instant the cap changes and never explores, so 100 % is the limit for a run that keeps under the cap; a run above 100 % got there by exceeding it.\n",
        gpu.memory_clocks_mhz.size() > 1 ? " × the memory clocks" : "", options.oracle_measure_s);
  }
  if (options.oracle) {
    out += fmt::format("\n## Throughput as % of the oracle (simulated)\n\n{}",
                       metric_table(matrix, runs, options, pct_of_oracle, "{:.1f}"));
  }
  out += fmt::format("\n## Throughput (img/s, simulated)\n\n{}",
                     metric_table(matrix, runs, options, throughput, "{:.1f}"));
  if (options.oracle) {
    out += fmt::format("\n## The oracle's throughput over each run (img/s, simulated)\n\n{}",
                       metric_table(matrix, runs, options, oracle, "{:.1f}"));
  }
  out += fmt::format("\n## Windows whose maximum power exceeded the cap (%, simulated)\n\n{}",
                     metric_table(matrix, runs, options, over_cap, "{:.2f}"));
  out += fmt::format("\n## The same, outside cap transitions (%, simulated)\n\n{}",
                     metric_table(matrix, runs, options, steady_over_cap, "{:.2f}"));
  out += cap_step_section(matrix, runs, options);
  out += search_section(matrix, catalog, runs, options);
  out += fmt::format("\n## Energy per image (J, simulated)\n\n{}",
                     metric_table(matrix, runs, options, joules_per_image, "{:.4f}"));
  out += partition_oracle_section(matrix, runs);
  std::vector<std::string> notes;
  for (const auto& job : matrix.jobs) {
    if (!job.note.empty()) notes.push_back(fmt::format("- Job {}: {}", job.id, job.note));
  }
  if (!notes.empty()) out += fmt::format("\n## Notes on jobs\n\n{}\n", join(notes, "\n"));
  if (!options.plot_dir.empty()) out += plots_section(matrix, runs, options);
  return out;
}

}  // namespace gpucap::bench
