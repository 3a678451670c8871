#pragma once
// A recurring training job as Zeus's batch-size optimizer knows it: Zeus's JobParams + GpuConfig
// (zeus/optimizer/batch_size/common.py) with the same field names, defaults and checks, plus one
// gpucap field, `optimizer`, that picks Zeus's policy or gpucap's.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpucap::bso {

enum class OptimizerKind { zeus, gpucap };
[[nodiscard]] const char* optimizer_name(OptimizerKind kind);
// "zeus" or "gpucap"; Error(usage) otherwise.
[[nodiscard]] OptimizerKind parse_optimizer(std::string_view text);

struct JobSpec {
  std::string job_id;                    // empty: the server makes "<prefix>-<8 hex>"
  std::string job_id_prefix;             // required; job_id must start with it
  std::vector<int> batch_sizes;          // ascending, unique, positive
  int default_batch_size = 0;            // b0, one of batch_sizes
  double eta_knob = 0.5;                 // η in [0, 1]
  std::optional<double> beta_knob = 2.0; // early stop at β × min cost; none disables it
  double target_metric = 0.50;
  bool higher_is_better_metric = true;
  int max_epochs = 100;
  int num_pruning_rounds = 2;
  int window_size = 0;                   // MAB observations per arm; 0 = all
  double mab_prior_mean = 0.0;
  double mab_prior_precision = 0.0;
  int mab_num_explorations = 2;
  std::optional<std::int64_t> mab_seed;
  // GpuConfig: the client measures these (max power limit in W × number of GPUs).
  double max_power = 0.0;
  int number_of_gpus = 0;
  std::string gpu_model;
  OptimizerKind optimizer = OptimizerKind::zeus;

  friend bool operator==(const JobSpec&, const JobSpec&) = default;
};

// Zeus's checks (and a few it lacks: duplicate or non-positive batch sizes, a negative window or
// prior precision); throws Error(usage) naming the field. Sorts batch_sizes first, as Zeus does.
void validate(JobSpec& spec);

// From a request body (Zeus's JobSpecFromClient); unknown keys are ignored as pydantic does, a
// missing required key or a value of the wrong type is Error(usage) naming the key. Validates.
[[nodiscard]] JobSpec job_spec_from_json(const nlohmann::json& body);
// Zeus's CreatedJob: every field above (mab_seed and beta_knob as null when absent).
[[nodiscard]] nlohmann::json to_json(const JobSpec& spec);

}  // namespace gpucap::bso
