#include "gpucap/runtime/tuning.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "gpucap/control/fixed.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/runtime/runner.hpp"
#include "gpucap/runtime/sim_platform.hpp"
#include "gpucap/tune/registry.hpp"

namespace gpucap::runtime {

tune::SearchSpace default_search_space(const sim::GpuSpec& gpu) {
  tune::SearchSpace space;
  space.batch_sizes.resize(256);
  std::iota(space.batch_sizes.begin(), space.batch_sizes.end(), 1);
  space.sm_clocks_mhz = gpu.dvfs_levels_mhz;
  if (gpu.memory_clocks_mhz.size() > 1) space.memory_clocks_mhz = gpu.memory_clocks_mhz;
  return space;
}

tune::SearchSpace default_profile_space(const sim::GpuSpec& gpu) {
  auto space = default_search_space(gpu);
  space.batch_sizes = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256};
  return space;
}

SimTrialRunner::SimTrialRunner(const sim::Catalog& catalog, const std::string& gpu, const std::string& model,
                               const TrialOptions& options)
    : gpu_(catalog.gpu(gpu)), model_(catalog.model(model)), options_(options) {
  if (!(options.measure_s > 0.0) || options.measure_s > 3600.0) {
    throw usage_error(fmt::format("a measurement must last between 0 and 3600 s, not {:g} s", options.measure_s));
  }
  check_sample_hz(options.sample_hz);
}

namespace {

bool supported(const std::vector<double>& clocks, double mhz) {
  return std::any_of(clocks.begin(), clocks.end(), [mhz](double c) { return std::abs(c - mhz) < 1e-6; });
}

}  // namespace

void SimTrialRunner::check(const tune::ConfigPoint& point) const {
  if (!supported(gpu_.sm_clocks_mhz, point.sm_clock_mhz)) {
    throw usage_error(fmt::format("{} does not support the SM clock {:g} MHz", gpu_.name, point.sm_clock_mhz));
  }
  if (point.memory_clock_mhz && !supported(gpu_.memory_clocks_mhz, *point.memory_clock_mhz)) {
    throw usage_error(fmt::format("{} does not support the memory clock {:g} MHz", gpu_.name, *point.memory_clock_mhz));
  }
}

tune::TrialResult SimTrialRunner::measure(const tune::ConfigPoint& point) const {
  check(point);
  return measure_knobs(knobs_for(point));
}

tune::TrialResult SimTrialRunner::measure_knobs(const Knobs& knobs) const {
  SimOptions sim_options;
  sim_options.seed = options_.seed;
  sim_options.sample_hz = options_.sample_hz;
  SimPlatform platform(gpu_, model_, model_.precision, sim_options);
  control::FixedController controller(knobs, control::DecisionPeriod::every_seconds(options_.measure_s));
  RunConfig config;
  config.duration_s = options_.measure_s;
  // No cap applies to a measurement; the search judges feasibility from max_power_w afterwards.
  config.schedule = CapSchedule::constant(gpu_.power_limit_max_w);
  const auto summary = run_job(platform, controller, config);
  return tune::TrialResult{summary.throughput_img_s, summary.max_power_w, summary.mean_power_w, summary.duration_s};
}

std::vector<predict::ProfileSample> profile_samples(const std::vector<tune::Trial>& trials) {
  std::vector<predict::ProfileSample> samples;
  samples.reserve(trials.size());
  for (const auto& t : trials) {
    samples.push_back(predict::ProfileSample{t.point.batch_size, t.point.sm_clock_mhz, t.point.memory_clock_mhz,
                                             t.result.throughput_img_s, t.result.max_power_w});
  }
  return samples;
}

std::vector<predict::ProfileSample> measure_profile(const SimTrialRunner& runner, const tune::SearchSpace& space) {
  std::vector<tune::Trial> trials;
  trials.reserve(space.size());
  for (std::size_t i = 0; i < space.size(); ++i) {
    const auto point = space.point(i);
    trials.push_back(tune::Trial{point, runner.measure(point)});
  }
  return profile_samples(trials);
}

std::optional<tune::Trial> verified_best(const std::vector<tune::Trial>& grid, double cap_w, const MeasureFn& verify,
                                         std::size_t max_checks) {
  std::vector<const tune::Trial*> feasible;
  for (const auto& trial : grid) {
    if (tune::feasible(trial.result, cap_w)) feasible.push_back(&trial);
  }
  // Best first; stable, so ties keep grid order as best_feasible() does.
  std::stable_sort(feasible.begin(), feasible.end(), [](const tune::Trial* a, const tune::Trial* b) {
    return a->result.throughput_img_s > b->result.throughput_img_s;
  });
  for (std::size_t i = 0; i < feasible.size() && i < max_checks; ++i) {
    const auto result = verify(feasible[i]->point);
    if (tune::feasible(result, cap_w)) return tune::Trial{feasible[i]->point, result};
  }
  return std::nullopt;
}

TuneOutcome run_tuner(tune::Tuner& tuner, const MeasureFn& measure, double cap_w, std::size_t budget,
                      const TrialSink& on_trial) {
  TuneOutcome outcome;
  while (budget == 0 || outcome.trials.size() < budget) {
    const auto point = tuner.propose();
    if (!point) break;
    const auto result = measure(*point);
    tuner.tell(*point, result);
    outcome.trials.push_back(tune::Trial{*point, result});
    outcome.cost_s += result.cost_s;
    if (tune::improves(result, outcome.best, cap_w)) outcome.best = outcome.trials.back();
    if (on_trial) on_trial(outcome.trials, outcome.best);
  }
  return outcome;
}

Knobs knobs_for(const tune::ConfigPoint& point) {
  auto knobs = single_tenant_knobs(point.batch_size, point.sm_clock_mhz);
  knobs.mem_clock_mhz = point.memory_clock_mhz;
  return knobs;
}

std::vector<CapSearch> search_each_cap(std::string_view tuner, const tune::SearchSpace& space,
                                       const std::vector<double>& caps, const MeasureFn& measure, std::size_t budget,
                                       std::uint64_t seed) {
  const auto evaluations = budget > 0 ? budget : tune::tuner_info(tuner).default_budget;
  std::vector<CapSearch> searches;
  searches.reserve(caps.size());
  for (const double cap_w : caps) {
    const auto search = tune::make_tuner(tuner, space, cap_w, seed);
    searches.push_back(CapSearch{cap_w, run_tuner(*search, measure, cap_w, evaluations)});
  }
  return searches;
}

control::CapTable cap_table(const std::vector<CapSearch>& searches) {
  control::CapTable table;
  for (const auto& search : searches) {
    const auto& trials = search.outcome.trials;
    if (trials.empty()) continue;
    const auto coolest = std::min_element(trials.begin(), trials.end(), [](const tune::Trial& a, const tune::Trial& b) {
      return a.result.max_power_w < b.result.max_power_w;
    });
    const auto& chosen = search.outcome.best ? search.outcome.best->point : coolest->point;
    table.push_back(control::TunedEntry{search.cap_w, knobs_for(chosen)});
  }
  return table;
}

}  // namespace gpucap::runtime
