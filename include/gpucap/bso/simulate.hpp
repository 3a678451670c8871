#pragma once
// Zeus's trace-driven simulation of one recurring training job (NSDI'23 §6; the semantics of
// ../shared/reference/zeus-bso-anchor.md), run through the same optimizer operations as the
// service (bso/optimizer.hpp): each recurrence asks for a batch size, trains epoch by epoch on a
// run drawn from the trace, reports after every epoch and stops when the optimizer says so;
// a try that does not converge is followed by another until one reaches the target.
//
// A try at batch size b draws one of the trace's runs of b uniformly; it reaches the target at
// that run's target epoch (never if the run has none). Each epoch takes time_per_epoch(b, PL) at
// average_power(b, PL). The JIT power-limit optimizer picks PL; the first epoch of a batch size
// it has not seen profiles every limit in equal slices (its time and energy are the means over
// the limits). Cost = η·energy + (1−η)·max_power·time, max_power = the GPU's largest limit.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpucap/bso/job_spec.hpp"

namespace gpucap::bso {

struct TracePoint {
  double time_per_epoch_s = 0.0;
  double average_power_w = 0.0;
};

// One job of the trace, as the simulation needs it.
struct TraceWorkload {
  std::string name;            // "librispeech/deepspeech2"
  std::string gpu;             // "v100" (from the power trace)
  std::string training_optimizer;  // "adamw"
  double target_metric = 0.0;
  bool higher_is_better = true;
  int max_epochs = 0;
  int default_batch_size = 0;
  std::vector<int> batch_sizes;  // ascending: in both traces, with runs at this target
  std::map<int, std::vector<std::optional<int>>> target_epochs;  // per batch size, per run
  std::map<int, std::map<double, TracePoint>> power;             // batch size → limit (W) → point
  double max_power_w = 0.0;  // the largest power limit of the trace
};

struct SimOptions {
  OptimizerKind optimizer = OptimizerKind::zeus;
  std::uint64_t seed = 1;
  int recurrences = 50;
  double eta = 0.5;
  std::optional<double> beta = 2.0;  // nullopt: no early stopping
  int max_tries = 20;                // per recurrence, as Zeus's simulator
};

struct SimTry {
  int batch_size = 0;
  double power_limit_w = 0.0;
  double energy_j = 0.0;
  double time_s = 0.0;
  double cost = 0.0;
  int epochs = 0;
  bool reached = false;   // the optimizer called it converged
  bool profiled = false;  // its first epoch profiled the power limits
};

struct SimRecurrence {
  std::vector<SimTry> tries;
  double cost = 0.0;  // all tries
};

struct TraceOptimum {
  int batch_size = 0;
  double power_limit_w = 0.0;
  double cost = 0.0;
};

struct SimResult {
  TraceOptimum optimum;
  double default_cost = 0.0;
  std::vector<SimRecurrence> recurrences;
  double regret = 0.0;  // Σ (recurrence cost − optimum cost)
  [[nodiscard]] double regret_in_optimum_costs() const { return regret / optimum.cost; }
};

// Expected cost of (b, PL) over the trace's runs of b; nullopt unless every run reaches the
// target within max_epochs.
[[nodiscard]] std::optional<double> expected_cost(const TraceWorkload& w, int batch_size, double power_limit_w, double eta);
// The cheapest (b, PL) whose runs all reach the target. Throws Error(invalid_data) if none does.
[[nodiscard]] TraceOptimum trace_optimum(const TraceWorkload& w, double eta);
// Expected cost of the default batch size at the largest power limit (over the runs that reach
// the target).
[[nodiscard]] double default_cost(const TraceWorkload& w, double eta);

// Throws Error(usage) for bad options, Error(invalid_data) for a workload that cannot run, and
// Error(not_converged) if a recurrence does not reach the target in max_tries tries.
[[nodiscard]] SimResult simulate(const TraceWorkload& w, const SimOptions& options);

// The recurrence from which every recurrence used only `batch_size` (nullopt: not even the last).
[[nodiscard]] std::optional<int> settle_recurrence(const SimResult& result, int batch_size);
// Mean cost of recurrences first..last (1-based, clamped) as a fraction of the optimum; nullopt if
// the run is shorter than `first`.
[[nodiscard]] std::optional<double> late_cost_fraction(const SimResult& result, int first, int last);

}  // namespace gpucap::bso
