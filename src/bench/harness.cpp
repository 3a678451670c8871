#include "gpucap/bench/harness.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

#include "gpucap/bench/plots.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/core/parallel.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/runtime/mps_planning.hpp"
#include "gpucap/runtime/sim_job.hpp"
#include "gpucap/runtime/tuning.hpp"
#include "gpucap/tune/oracle.hpp"
#include "gpucap/tune/registry.hpp"
#include "gpucap/sim/noise.hpp"

namespace gpucap::bench {

namespace {

struct Task {
  std::size_t job_index = 0;
  std::size_t algorithm_index = 0;
};

// What the runs of one model share: capfit's profile and bobd's table, measured once per model.
struct ModelInputs {
  std::shared_ptr<const predict::ProfileModel> profile;
  std::shared_ptr<const control::CapTable> tuned_table;
  std::shared_ptr<const control::MpsPlanning> fitted_planning;  // mpsfit's
};

runtime::SimJobSpec job_spec(const Matrix& matrix, std::size_t job_index, const std::string& algorithm,
                             const BenchOptions& options, const ModelInputs& inputs) {
  const auto& job = matrix.jobs[job_index];
  runtime::SimJobSpec spec;
  spec.gpu = matrix.gpu;
  spec.model = job.model;
  spec.dataset = job.dataset;
  spec.algorithm = algorithm;
  spec.schedule = job.schedule;
  spec.images = job.images;
  spec.duration_s = job.duration_s;
  spec.controller = job.controller;
  // A job's band (the seeds' sensitivity runs) means nothing to algorithms without one.
  if (!control::uses_power_band(algorithm)) spec.controller.alpha.reset();
  if (control::needs_profile(algorithm)) spec.controller.profile = inputs.profile;
  if (control::needs_offline_search(algorithm)) spec.controller.tuned_table = inputs.tuned_table;
  if (control::plans_with_fitted_predictor(algorithm)) spec.controller.mps_planning = inputs.fitted_planning;
  if (matrix.mps && to_lower(algorithm) == "morak") spec.controller.mps_shares_pct = matrix.mps->morak_shares_pct;
  spec.pctodl_params_dir = options.pctodl_params_dir;
  spec.controller.shadow = options.pctodl_shadow && to_lower(algorithm) == "pctodl";
  spec.sim.sample_hz = options.sample_hz;
  // Same noise for every algorithm on a job (common random numbers), different across jobs.
  spec.sim.seed = sim::derive_seed(options.seed, job_index);
  return spec;
}


std::shared_ptr<const control::MpsPlanning> mpsfit_check_planning() {
  auto planning = std::make_shared<control::MpsPlanning>();
  planning->sm_clocks_mhz = {1.0};
  return planning;
}

// Checking a run builds its controller; capfit's needs a profile, bobd's a table and mpsfit's a
// fitted planner, but measuring them is the run's work, so the check gets one-point stand-ins.
const ModelInputs& options_check_inputs() {
  static const ModelInputs inputs{
      std::make_shared<const predict::ProfileModel>(
          std::vector<predict::ProfileSample>{predict::ProfileSample{1, 1.0, std::nullopt, 1.0, 1.0}}),
      std::make_shared<const control::CapTable>(control::CapTable{control::TunedEntry{1.0, single_tenant_knobs(1)}}),
      mpsfit_check_planning()};
  return inputs;
}

}  // namespace

void validate_bench(const Matrix& matrix, const sim::Catalog& catalog, const BenchOptions& options) {
  if (options.algorithms.empty()) throw usage_error("no algorithms given");
  if (options.threads < 1 || options.threads > 256) {
    throw usage_error(fmt::format("--jobs {} must be between 1 and 256", options.threads));
  }
  (void)catalog.gpu(matrix.gpu);
  for (std::size_t j = 0; j < matrix.jobs.size(); ++j) {
    for (const auto& algorithm : options.algorithms) {
      try {
        // Building the run checks exactly what running it would check; nothing is simulated yet.
        runtime::SimJob check(catalog, job_spec(matrix, j, algorithm, options, options_check_inputs()));
      } catch (const Error& e) {
        throw Error(e.code(), fmt::format("matrix {} job {} ({}): {}", matrix.id, matrix.jobs[j].id, algorithm, e.what()));
      }
    }
  }
}

namespace {

std::string trace_file(const std::string& dir, const std::string& job, const std::string& algorithm) {
  return (std::filesystem::path(dir) / fmt::format("{}-{}.csv", job, algorithm)).string();
}

BenchRun run_task(const Matrix& matrix, const sim::Catalog& catalog, const BenchOptions& options, const Task& task,
                  const ModelInputs& inputs) {
  const auto& job = matrix.jobs[task.job_index];
  const auto& algorithm = options.algorithms[task.algorithm_index];
  BenchRun run;
  const runtime::TraceSink sink = [&run](const runtime::TraceRow& row) { run.trace.push_back(row); };
  run.job = job.id;
  run.model = job.model;
  run.dataset = job.dataset;
  run.schedule = job.schedule;
  run.algorithm = algorithm;
  runtime::SimJob sim_job(catalog, job_spec(matrix, task.job_index, algorithm, options, inputs));
  run.summary = sim_job.run(sink);
  run.over_cap_steady_windows_pct = steady_over_cap_windows_pct(run.trace);
  if (!options.trace_dir.empty()) {
    std::string trace = runtime::trace_csv_header();
    for (const auto& row : run.trace) trace += runtime::trace_csv_row(row, /*simulated=*/true);
    write_text_file(trace_file(options.trace_dir, job.id, algorithm), trace);
  }
  return run;
}

}  // namespace

namespace {

// One model's oracle: its measured grid and, for every cap its jobs meet, the verified best.
struct ModelOracle {
  std::string model;
  std::vector<double> caps;
  std::vector<std::optional<tune::Trial>> best;  // per cap
  tune::SearchSpace space;
  std::vector<tune::Trial> grid;  // every point of `space`, in its order
  std::vector<std::optional<runtime::PartitionOracle>> partitions;  // per cap; multi-tenant matrices only

  // The best measured throughput under the cap: one process (the grid) or an MPS partition.
  [[nodiscard]] std::optional<double> throughput_at(double cap_w) const {
    for (std::size_t i = 0; i < caps.size(); ++i) {
      if (caps[i] != cap_w) continue;
      std::optional<double> best_img_s;
      if (best[i]) best_img_s = best[i]->result.throughput_img_s;
      if (i < partitions.size() && partitions[i]) {
        best_img_s = std::max(best_img_s.value_or(0.0), partitions[i]->measured.throughput_img_s);
      }
      return best_img_s;
    }
    return std::nullopt;
  }
};

// The oracle's mean throughput over a run of `duration_s` under `schedule`: each cap's best
// configuration, weighted by how long the cap held.
double oracle_throughput(const ModelOracle& oracle, const CapSchedule& schedule, double duration_s) {
  const auto& steps = schedule.steps();
  double images = 0.0;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const double from = std::clamp(steps[k].time_s, 0.0, duration_s);
    const double to = k + 1 < steps.size() ? std::clamp(steps[k + 1].time_s, 0.0, duration_s) : duration_s;
    if (to <= from) continue;
    const auto best = oracle.throughput_at(steps[k].cap_w);
    if (!best) return 0.0;  // some cap no configuration meets: no oracle for this run
    images += *best * (to - from);
  }
  return duration_s > 0.0 ? images / duration_s : 0.0;
}

// Every cap the model's jobs meet, in matrix order.
std::vector<double> model_caps(const Matrix& matrix, const std::string& model) {
  std::vector<double> caps;
  for (const auto& job : matrix.jobs) {
    if (job.model != model) continue;
    for (const double cap : job.schedule.distinct_caps()) {
      if (std::find(caps.begin(), caps.end(), cap) == caps.end()) caps.push_back(cap);
    }
  }
  return caps;
}

// The offline searches' and the oracle's measurements: `oracle_measure_s` long, one seed.
runtime::TrialOptions offline_trial_options(const BenchOptions& options) {
  runtime::TrialOptions trial_options;
  trial_options.measure_s = options.oracle_measure_s;
  trial_options.sample_hz = options.sample_hz;
  trial_options.seed = options.seed;
  return trial_options;
}

ModelOracle measure_oracle(const Matrix& matrix, const sim::Catalog& catalog, const BenchOptions& options,
                           const std::string& model) {
  ModelOracle oracle{model, model_caps(matrix, model), {}, {}, {}, {}};
  auto trial_options = offline_trial_options(options);
  const runtime::SimTrialRunner runner(catalog, matrix.gpu, model, trial_options);
  oracle.space = runtime::default_search_space(runner.gpu());
  tune::OracleTuner tuner(oracle.space);
  oracle.grid =
      runtime::run_tuner(
          tuner, [&runner](const tune::ConfigPoint& p) { return runner.measure(p); }, /*cap_w=*/0.0, 0)
          .trials;
  trial_options.measure_s = runtime::kOracleVerifySeconds;
  const runtime::SimTrialRunner verifier(catalog, matrix.gpu, model, trial_options);
  for (const double cap : oracle.caps) {
    oracle.best.push_back(runtime::verified_best(oracle.grid, cap,
                                                 [&verifier](const tune::ConfigPoint& p) { return verifier.measure(p); }));
    if (matrix.mps) {
      oracle.partitions.push_back(runtime::partition_oracle(verifier, catalog.gpu(matrix.gpu), catalog.model(model), cap,
                                                            matrix.mps->oracle_max_tenants));
    }
  }
  return oracle;
}

// bobd's searches for every cap of the model's jobs. They measure exactly as the oracle's grid
// did (same length, same seed: a measurement of a configuration on the twin depends only on
// these), so where the grid exists its results are looked up instead of simulated again, and
// each search's best so far is a share of the same grid's best.
std::vector<runtime::CapSearch> search_model(const Matrix& matrix, const sim::Catalog& catalog,
                                             const BenchOptions& options, const std::string& model,
                                             const ModelOracle* oracle) {
  const runtime::SimTrialRunner runner(catalog, matrix.gpu, model, offline_trial_options(options));
  const auto space = runtime::default_search_space(runner.gpu());
  const auto measure = [&](const tune::ConfigPoint& p) {
    if (oracle != nullptr && !oracle->grid.empty()) {
      const auto index = oracle->space.index_of(p);
      if (index && *index < oracle->grid.size() && oracle->grid[*index].point == p) return oracle->grid[*index].result;
    }
    return runner.measure(p);
  };
  return runtime::search_each_cap("bobd", space, model_caps(matrix, model), measure, options.search_budget,
                                  options.seed);
}

SearchProgress search_progress(const runtime::CapSearch& search, const ModelOracle* oracle) {
  SearchProgress progress;
  progress.cap_w = search.cap_w;
  progress.cost_s = search.outcome.cost_s;
  double best = 0.0;
  for (const auto& trial : search.outcome.trials) {
    if (tune::feasible(trial.result, search.cap_w)) best = std::max(best, trial.result.throughput_img_s);
    progress.best_img_s.push_back(best);
  }
  if (search.outcome.best) progress.best = search.outcome.best->point;
  if (oracle != nullptr && !oracle->grid.empty()) {
    if (const auto grid_best = tune::best_feasible(oracle->grid, search.cap_w)) {
      progress.oracle_img_s = grid_best->result.throughput_img_s;
    }
  }
  return progress;
}

// The searches for the caps of `job`, in the order the caps first apply.
std::vector<SearchProgress> job_searches(const MatrixJob& job, const std::vector<SearchProgress>& searches) {
  std::vector<SearchProgress> out;
  for (const double cap : job.schedule.distinct_caps()) {
    for (const auto& search : searches) {
      if (search.cap_w == cap) out.push_back(search);
    }
  }
  return out;
}

std::vector<std::string> describe_partition_oracle(const ModelOracle& oracle, const MatrixJob& job) {
  std::vector<std::string> out;
  for (const double cap : job.schedule.distinct_caps()) {
    for (std::size_t i = 0; i < oracle.caps.size() && i < oracle.partitions.size(); ++i) {
      if (oracle.caps[i] != cap || !oracle.partitions[i]) continue;
      const auto& p = *oracle.partitions[i];
      out.push_back(fmt::format("{:g} W: {} @ SM {:g} / mem {:g} MHz, {:.1f} img/s", cap, control::describe(p.plan.tenants),
                                p.plan.sm_clock_mhz, p.plan.memory_clock_mhz, p.measured.throughput_img_s));
    }
  }
  return out;
}

std::optional<int> worst_step(const std::vector<CapStepRecovery>& steps,
                              std::optional<int> CapStepRecovery::*windows) {
  std::optional<int> worst;
  for (const auto& step : steps) {
    if (!(step.*windows)) return std::nullopt;
    worst = std::max(worst.value_or(0), *(step.*windows));
  }
  return worst;
}

}  // namespace

std::optional<int> BenchRun::worst_windows_to_under_cap() const {
  return worst_step(cap_steps, &CapStepRecovery::windows_to_under_cap);
}

std::optional<int> BenchRun::worst_windows_to_95pct_oracle() const {
  return worst_step(cap_steps, &CapStepRecovery::windows_to_95pct_oracle);
}

std::optional<double> SearchProgress::pct_of_oracle_after(std::size_t evaluations) const {
  if (!oracle_img_s || !(*oracle_img_s > 0.0) || best_img_s.empty() || evaluations == 0) return std::nullopt;
  return 100.0 * best_img_s[std::min(evaluations, best_img_s.size()) - 1] / *oracle_img_s;
}

std::optional<double> BenchRun::pct_of_oracle() const {
  if (!(oracle_throughput_img_s > 0.0)) return std::nullopt;
  return 100.0 * summary.throughput_img_s / oracle_throughput_img_s;
}

std::vector<BenchRun> run_matrix(const Matrix& matrix, const sim::Catalog& catalog, const BenchOptions& options) {
  validate_bench(matrix, catalog, options);
  std::vector<Task> tasks;
  for (std::size_t j = 0; j < matrix.jobs.size(); ++j) {
    for (std::size_t a = 0; a < options.algorithms.size(); ++a) tasks.push_back(Task{j, a});
  }
  // The oracle's grid, capfit's profile, mpsfit's fitted predictor and bobd's searches depend on
  // the model only: one of each per model.
  std::vector<std::string> models;
  for (const auto& job : matrix.jobs) {
    if (std::find(models.begin(), models.end(), job.model) == models.end()) models.push_back(job.model);
  }
  const auto any = [&options](bool (*needs)(std::string_view)) {
    return std::any_of(options.algorithms.begin(), options.algorithms.end(),
                       [needs](const std::string& a) { return needs(a); });
  };
  const bool profiles_needed = any(control::needs_profile);
  const bool searches_needed = any(control::needs_offline_search);
  const bool fits_needed = any(control::plans_with_fitted_predictor);
  const std::size_t total = models.size() + tasks.size();
  std::size_t done = 0;
  const auto progress = [&] {
    ++done;
    if (options.progress) options.progress(done, total);
  };
  std::vector<ModelOracle> oracles(models.size());
  std::vector<ModelInputs> inputs(models.size());
  std::vector<std::vector<SearchProgress>> searches(models.size());
  parallel_for(
      models.size(), options.threads,
      [&](std::size_t m) {
        if (options.oracle) oracles[m] = measure_oracle(matrix, catalog, options, models[m]);
        if (profiles_needed) {
          inputs[m].profile = runtime::measure_default_profile(
              catalog, matrix.gpu, models[m], options.sample_hz,
              sim::derive_seed(options.seed, runtime::kProfileSeedStream));
        }
        if (fits_needed) {
          inputs[m].fitted_planning = runtime::fitted_planning_on_twin(
              catalog, matrix.gpu, models[m], options.sample_hz,
              sim::derive_seed(options.seed, runtime::kProfileSeedStream));
        }
        if (searches_needed) {
          const ModelOracle* oracle = options.oracle ? &oracles[m] : nullptr;
          const auto model_searches = search_model(matrix, catalog, options, models[m], oracle);
          inputs[m].tuned_table = std::make_shared<const control::CapTable>(runtime::cap_table(model_searches));
          for (const auto& search : model_searches) searches[m].push_back(search_progress(search, oracle));
        }
        // The grid was needed by the searches only; a model's grid holds thousands of trials.
        oracles[m].grid.clear();
        oracles[m].grid.shrink_to_fit();
      },
      progress);
  std::vector<BenchRun> runs(tasks.size());
  parallel_for(
      tasks.size(), options.threads,
      [&](std::size_t i) {
        const auto& job = matrix.jobs[tasks[i].job_index];
        const auto m = static_cast<std::size_t>(std::find(models.begin(), models.end(), job.model) - models.begin());
        runs[i] = run_task(matrix, catalog, options, tasks[i], inputs[m]);
        const ModelOracle* oracle = options.oracle ? &oracles[m] : nullptr;
        if (oracle != nullptr) {
          runs[i].oracle_throughput_img_s =
              oracle_throughput(*oracle, runs[i].schedule, runs[i].summary.duration_s);
        }
        runs[i].cap_steps = cap_step_recoveries(runs[i].trace, runs[i].schedule, [oracle](double cap_w) {
          return oracle != nullptr ? oracle->throughput_at(cap_w) : std::nullopt;
        });
        if (control::needs_offline_search(runs[i].algorithm)) runs[i].searches = job_searches(job, searches[m]);
        if (oracle != nullptr) runs[i].partition_oracle = describe_partition_oracle(*oracle, job);
      },
      progress);
  return runs;
}

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
