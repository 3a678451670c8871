#include "gpucap/bso/state.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "gpucap/bso/random.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::bso {
namespace {

Error bad_state(std::string_view message) { return Error(ErrorCode::invalid_data, fmt::format("stored job state: {}", message)); }

nlohmann::json precision_to_json(double precision) {
  return std::isinf(precision) ? nlohmann::json("inf") : nlohmann::json(precision);
}

double precision_from_json(const nlohmann::json& j, const char* key) {
  if (j.is_string() && j.get<std::string>() == "inf") return std::numeric_limits<double>::infinity();
  if (!j.is_number()) throw bad_state(fmt::format("{} is not a number", key));
  return j.get<double>();
}

}  // namespace

const char* stage_name(Stage stage) { return stage == Stage::pruning ? "Pruning" : "MAB"; }

const char* trial_type_name(TrialType type) {
  switch (type) {
    case TrialType::exploration: return "Exploration";
    case TrialType::concurrent: return "Concurrent";
    case TrialType::mab: return "MAB";
  }
  return "?";
}

const char* trial_status_name(TrialStatus status) {
  switch (status) {
    case TrialStatus::dispatched: return "Dispatched";
    case TrialStatus::succeeded: return "Succeeded";
    case TrialStatus::failed: return "Failed";
  }
  return "?";
}

Stage parse_stage(std::string_view name) {
  if (name == "Pruning") return Stage::pruning;
  if (name == "MAB") return Stage::mab;
  throw bad_state(fmt::format("unknown stage '{}'", name));
}

TrialType parse_trial_type(std::string_view name) {
  if (name == "Exploration") return TrialType::exploration;
  if (name == "Concurrent") return TrialType::concurrent;
  if (name == "MAB") return TrialType::mab;
  throw bad_state(fmt::format("unknown trial type '{}'", name));
}

TrialStatus parse_trial_status(std::string_view name) {
  if (name == "Dispatched") return TrialStatus::dispatched;
  if (name == "Succeeded") return TrialStatus::succeeded;
  if (name == "Failed") return TrialStatus::failed;
  throw bad_state(fmt::format("unknown trial status '{}'", name));
}

JobState new_job_state(JobSpec spec, std::uint64_t fallback_seed) {
  JobState job;
  const auto seed = spec.mab_seed ? static_cast<std::uint64_t>(*spec.mab_seed) : fallback_seed;
  job.min_cost_batch_size = spec.default_batch_size;
  job.spec = std::move(spec);
  job.rng_state = BsoRandom(seed).state();
  return job;
}

const Trial* find_trial(const JobState& job, int trial_number) {
  if (trial_number < 1 || static_cast<std::size_t>(trial_number) > job.trials.size()) return nullptr;
  const auto& trial = job.trials[static_cast<std::size_t>(trial_number - 1)];
  return trial.trial_number == trial_number ? &trial : nullptr;
}

nlohmann::json to_json(const ArmState& arm) {
  return {{"batch_size", arm.batch_size},
          {"param_mean", arm.param_mean},
          {"param_precision", precision_to_json(arm.param_precision)},
          {"reward_precision", precision_to_json(arm.reward_precision)},
          {"num_observations", arm.num_observations}};
}

ArmState arm_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw bad_state("an arm is not an object");
  try {
    ArmState arm;
    arm.batch_size = j.at("batch_size").get<int>();
    arm.param_mean = j.at("param_mean").get<double>();
    arm.param_precision = precision_from_json(j.at("param_precision"), "param_precision");
    arm.reward_precision = precision_from_json(j.at("reward_precision"), "reward_precision");
    arm.num_observations = j.at("num_observations").get<int>();
    return arm;
  } catch (const nlohmann::json::exception& e) {
    throw bad_state(e.what());
  }
}

nlohmann::json job_fields_to_json(const JobState& job) {
  nlohmann::json arms = nlohmann::json::array();
  for (const auto& arm : job.arms) arms.push_back(to_json(arm));
  return {{"stage", stage_name(job.stage)},
          {"min_cost", job.min_cost ? nlohmann::json(*job.min_cost) : nlohmann::json(nullptr)},
          {"min_cost_batch_size", job.min_cost_batch_size},
          {"arms", arms},
          {"rng_state", job.rng_state}};
}

void job_fields_from_json(const nlohmann::json& fields, JobState& job) {
  if (!fields.is_object()) throw bad_state("not an object");
  try {
    job.stage = parse_stage(fields.at("stage").get<std::string>());
    const auto& min_cost = fields.at("min_cost");
    job.min_cost = min_cost.is_null() ? std::nullopt : std::optional<double>(min_cost.get<double>());
    job.min_cost_batch_size = fields.at("min_cost_batch_size").get<int>();
    job.arms.clear();
    for (const auto& arm : fields.at("arms")) job.arms.push_back(arm_from_json(arm));
    job.rng_state = fields.at("rng_state").get<std::string>();
    (void)BsoRandom::from_state(job.rng_state);  // reject a damaged state now, not mid-request
  } catch (const nlohmann::json::exception& e) {
    throw bad_state(e.what());
  }
}

}  // namespace gpucap::bso
