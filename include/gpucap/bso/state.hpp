#pragma once
// What the batch-size optimizer knows about one job: its spec, its stage, its bandit arms, its
// random stream and every trial (one training run with one batch size) it has handed out. This
// is the whole state: the service stores it in a database, the simulator keeps it in memory, and
// both change it only through bso/optimizer.hpp.

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpucap/bso/job_spec.hpp"

namespace gpucap::bso {

enum class Stage { pruning, mab };
enum class TrialType { exploration, concurrent, mab };
enum class TrialStatus { dispatched, succeeded, failed };

// Zeus's names ("Pruning", "MAB", "Exploration", "Concurrent", "Dispatched", ...).
[[nodiscard]] const char* stage_name(Stage stage);
[[nodiscard]] const char* trial_type_name(TrialType type);
[[nodiscard]] const char* trial_status_name(TrialStatus status);
// Inverses; Error(invalid_data) on an unknown name.
[[nodiscard]] Stage parse_stage(std::string_view name);
[[nodiscard]] TrialType parse_trial_type(std::string_view name);
[[nodiscard]] TrialStatus parse_trial_status(std::string_view name);

struct Trial {
  int trial_number = 0;  // 1, 2, 3, ... per job
  int batch_size = 0;
  TrialType type = TrialType::exploration;
  TrialStatus status = TrialStatus::dispatched;
  // The last report (cumulative since the trial began) and the epoch it came after; for a
  // succeeded trial, its final result.
  int epochs = 0;
  double time_s = 0.0;
  double energy_j = 0.0;
  // The last epoch alone (its report minus the one before): the steady cost of an epoch, free of
  // what the first epoch spent profiling power limits.
  double last_epoch_time_s = 0.0;
  double last_epoch_energy_j = 0.0;
  std::optional<bool> converged;  // set when the trial succeeded (reached the target or stopped)

  friend bool operator==(const Trial&, const Trial&) = default;
};

// One arm of the Gaussian Thompson-sampling bandit (one batch size that survived pruning).
struct ArmState {
  int batch_size = 0;
  double param_mean = 0.0;
  double param_precision = 0.0;   // may be +inf (one observation, or identical ones)
  double reward_precision = 0.0;  // may be +inf
  int num_observations = 0;

  friend bool operator==(const ArmState&, const ArmState&) = default;
};

struct JobState {
  JobSpec spec;
  Stage stage = Stage::pruning;
  std::optional<double> min_cost;  // lowest cost of a trial that reached the target
  int min_cost_batch_size = 0;     // its batch size (the default until one converged)
  std::vector<ArmState> arms;      // ascending batch size; empty until the MAB stage
  std::string rng_state;           // BsoRandom::state()
  std::vector<Trial> trials;       // trials[i].trial_number == i + 1

  friend bool operator==(const JobState&, const JobState&) = default;
};

// A fresh job: pruning stage, the default batch size as the best so far, and the random stream
// seeded by the spec's mab_seed, else by `fallback_seed` (the service draws one from the OS).
[[nodiscard]] JobState new_job_state(JobSpec spec, std::uint64_t fallback_seed);

// The trial with this number, or nullptr.
[[nodiscard]] const Trial* find_trial(const JobState& job, int trial_number);

// Everything but the trials, for storage in one column ("inf" for an infinite precision, since
// JSON has no infinity); from_json throws Error(invalid_data).
[[nodiscard]] nlohmann::json job_fields_to_json(const JobState& job);
void job_fields_from_json(const nlohmann::json& fields, JobState& job);
[[nodiscard]] nlohmann::json to_json(const ArmState& arm);
[[nodiscard]] ArmState arm_from_json(const nlohmann::json& j);

}  // namespace gpucap::bso
