#include "gpucap/bso/simulate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gpucap/bso/cost.hpp"
#include "gpucap/bso/optimizer.hpp"
#include "gpucap/bso/power_limit.hpp"
#include "gpucap/bso/random.hpp"
#include "gpucap/bso/state.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::bso {
namespace {

// The simulator's own stream (which run a try draws) is apart from the optimizer's.
constexpr std::uint64_t kRunStreamSalt = 0x5a17c0de2023ULL;

double run_cost(const TraceWorkload& w, const TracePoint& p, int epochs, double eta) {
  const double time_s = epochs * p.time_per_epoch_s;
  return zeus_cost(time_s * p.average_power_w, time_s, eta, w.max_power_w);
}

JobSpec simulated_job(const TraceWorkload& w, const SimOptions& o) {
  JobSpec spec;
  spec.job_id_prefix = "sim";
  spec.job_id = fmt::format("sim-{}", w.name);
  spec.batch_sizes = w.batch_sizes;
  spec.default_batch_size = w.default_batch_size;
  spec.eta_knob = o.eta;
  spec.beta_knob = o.beta;
  spec.target_metric = w.target_metric;
  spec.higher_is_better_metric = w.higher_is_better;
  spec.max_epochs = w.max_epochs;
  spec.mab_seed = static_cast<std::int64_t>(o.seed & 0x7fffffffffffffffULL);
  spec.max_power = w.max_power_w;
  spec.number_of_gpus = 1;
  spec.gpu_model = w.gpu.empty() ? "simulated" : w.gpu;
  spec.optimizer = o.optimizer;
  validate(spec);
  return spec;
}

std::vector<double> limits_of(const TraceWorkload& w, int batch_size) {
  std::vector<double> limits;
  for (const auto& [limit, point] : w.power.at(batch_size)) limits.push_back(limit);
  return limits;
}

// The first epoch of a new batch size runs each limit for an equal slice of the epoch.
TracePoint profiling_epoch(const TraceWorkload& w, int batch_size) {
  double time_s = 0.0;
  double energy_j = 0.0;
  const auto& points = w.power.at(batch_size);
  for (const auto& [limit, p] : points) {
    time_s += p.time_per_epoch_s;
    energy_j += p.time_per_epoch_s * p.average_power_w;
  }
  const double n = static_cast<double>(points.size());
  return {time_s / n, energy_j / time_s};
}

// The metric a run reports after `epoch`: the target once reached, else one unit short of it.
double reported_metric(const TraceWorkload& w, std::optional<int> target_epoch, int epoch) {
  const bool reached = target_epoch && epoch >= *target_epoch;
  if (reached) return w.target_metric;
  return w.higher_is_better ? w.target_metric - 1.0 : w.target_metric + 1.0;
}

SimTry run_try(const TraceWorkload& w, JobState& job, JitPowerLimitOptimizer& plo, BsoRandom& runs, double eta) {
  const TrialId id = next_trial(job);
  const int b = id.batch_size;
  SimTry attempt;
  attempt.batch_size = b;
  if (!plo.best(b)) {
    attempt.profiled = true;
    for (const auto& [limit, p] : w.power.at(b)) {
      plo.observe(b, limit, p.time_per_epoch_s, p.time_per_epoch_s * p.average_power_w, 1.0);
    }
  }
  attempt.power_limit_w = *plo.best(b);
  const auto& draws = w.target_epochs.at(b);
  const auto target_epoch = draws[static_cast<std::size_t>(runs.below(draws.size()))];
  const TracePoint steady = w.power.at(b).at(attempt.power_limit_w);
  const TracePoint first = attempt.profiled ? profiling_epoch(w, b) : steady;

  for (int epoch = 1;; ++epoch) {
    const TracePoint& p = epoch == 1 ? first : steady;
    attempt.time_s += p.time_per_epoch_s;
    attempt.energy_j += p.time_per_epoch_s * p.average_power_w;
    attempt.epochs = epoch;
    const auto response = report(job, {id, attempt.time_s, attempt.energy_j, reported_metric(w, target_epoch, epoch), epoch});
    if (response.stop_train) {
      attempt.reached = response.converged;
      break;
    }
  }
  attempt.cost = zeus_cost(attempt.energy_j, attempt.time_s, eta, w.max_power_w);
  return attempt;
}

void check_workload(const TraceWorkload& w) {
  if (w.batch_sizes.empty()) throw Error(ErrorCode::invalid_data, fmt::format("workload {} has no batch sizes", w.name));
  for (const int b : w.batch_sizes) {
    if (!w.power.contains(b) || w.power.at(b).empty() || !w.target_epochs.contains(b) || w.target_epochs.at(b).empty()) {
      throw Error(ErrorCode::invalid_data, fmt::format("workload {}: batch size {} has no runs or no power figures", w.name, b));
    }
  }
  if (!(w.max_power_w > 0.0)) throw Error(ErrorCode::invalid_data, fmt::format("workload {} has no power limits", w.name));
  // The power-limit optimizer profiles one list of limits for every batch size.
  const auto limits = limits_of(w, w.batch_sizes.front());
  for (const int b : w.batch_sizes) {
    if (limits_of(w, b) != limits) {
      throw Error(ErrorCode::invalid_data,
                  fmt::format("workload {}: batch size {} lacks some of the power limits the others have", w.name, b));
    }
  }
}

}  // namespace

std::optional<double> expected_cost(const TraceWorkload& w, int batch_size, double power_limit_w, double eta) {
  const auto runs = w.target_epochs.find(batch_size);
  const auto points = w.power.find(batch_size);
  if (runs == w.target_epochs.end() || points == w.power.end() || runs->second.empty()) return std::nullopt;
  const auto point = points->second.find(power_limit_w);
  if (point == points->second.end()) return std::nullopt;
  double sum = 0.0;
  for (const auto& epochs : runs->second) {
    if (!epochs || *epochs > w.max_epochs) return std::nullopt;
    sum += run_cost(w, point->second, *epochs, eta);
  }
  return sum / static_cast<double>(runs->second.size());
}

TraceOptimum trace_optimum(const TraceWorkload& w, double eta) {
  TraceOptimum best;
  best.cost = std::numeric_limits<double>::infinity();
  for (const int b : w.batch_sizes) {
    for (const auto& [limit, point] : w.power.at(b)) {
      const auto cost = expected_cost(w, b, limit, eta);
      if (cost && *cost < best.cost) best = {b, limit, *cost};
    }
  }
  if (best.batch_size == 0) {
    throw Error(ErrorCode::invalid_data, fmt::format("workload {}: no batch size reaches the target in every run", w.name));
  }
  return best;
}

double default_cost(const TraceWorkload& w, double eta) {
  const int b = w.default_batch_size;
  if (!w.power.contains(b) || !w.target_epochs.contains(b)) {
    throw Error(ErrorCode::invalid_data, fmt::format("workload {}: default batch size {} is not in the trace", w.name, b));
  }
  const auto& [limit, point] = *w.power.at(b).rbegin();
  double sum = 0.0;
  int reached = 0;
  for (const auto& epochs : w.target_epochs.at(b)) {
    if (!epochs || *epochs > w.max_epochs) continue;
    sum += run_cost(w, point, *epochs, eta);
    ++reached;
  }
  if (reached == 0) {
    throw Error(ErrorCode::invalid_data, fmt::format("workload {}: the default batch size {} never reaches the target", w.name, b));
  }
  return sum / reached;
}

SimResult simulate(const TraceWorkload& w, const SimOptions& options) {
  // Every recurrence's tries are kept for the report: a bound keeps a typo from filling memory.
  if (options.recurrences < 1 || options.recurrences > 100'000) {
    throw usage_error(fmt::format("--recurrences {} must be between 1 and 100000", options.recurrences));
  }
  if (options.max_tries < 1) throw usage_error("max tries must be 1 or more");
  check_workload(w);
  SimResult result;
  result.optimum = trace_optimum(w, options.eta);
  result.default_cost = default_cost(w, options.eta);

  JobState job = new_job_state(simulated_job(w, options), options.seed);
  JitPowerLimitOptimizer plo(limits_of(w, w.batch_sizes.front()), options.eta, w.max_power_w);
  BsoRandom runs(options.seed ^ kRunStreamSalt);

  for (int r = 1; r <= options.recurrences; ++r) {
    SimRecurrence recurrence;
    for (int attempt = 1;; ++attempt) {
      if (attempt > options.max_tries) {
        throw Error(ErrorCode::not_converged, fmt::format("recurrence {} did not reach the target in {} tries", r, options.max_tries));
      }
      const SimTry t = run_try(w, job, plo, runs, options.eta);
      recurrence.cost += t.cost;
      recurrence.tries.push_back(t);
      if (t.reached) break;
    }
    result.regret += recurrence.cost - result.optimum.cost;
    result.recurrences.push_back(std::move(recurrence));
  }
  return result;
}

std::optional<int> settle_recurrence(const SimResult& result, int batch_size) {
  std::optional<int> settled;
  for (int r = static_cast<int>(result.recurrences.size()); r >= 1; --r) {
    const auto& tries = result.recurrences[static_cast<std::size_t>(r - 1)].tries;
    const bool only = std::all_of(tries.begin(), tries.end(), [&](const SimTry& t) { return t.batch_size == batch_size; });
    if (!only) break;
    settled = r;
  }
  return settled;
}

std::optional<double> late_cost_fraction(const SimResult& result, int first, int last) {
  const int n = static_cast<int>(result.recurrences.size());
  if (n < first) return std::nullopt;
  last = std::min(last, n);
  double sum = 0.0;
  for (int r = first; r <= last; ++r) sum += result.recurrences[static_cast<std::size_t>(r - 1)].cost;
  return sum / (last - first + 1) / result.optimum.cost;
}

}  // namespace gpucap::bso
