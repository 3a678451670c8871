#include "gpucap/bench/harness.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

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

}  // namespace gpucap::bench
