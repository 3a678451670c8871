#pragma once
// Zeus's NSDI'23 traces (../shared/data/zeus/nsdi23/): summary_train.csv (the epoch at which each
// run of a batch size first reached a validation metric) and summary_power_<gpu>.csv (time per
// epoch and average power per batch size and power limit), read into the workloads that
// `gpucap bso simulate` runs. Any power trace in that format works, for any GPU.

#include <optional>
#include <string>
#include <vector>

#include "gpucap/bso/simulate.hpp"

namespace gpucap::bench {

// How the paper's simulator runs a workload; every field can be overridden on the command line.
struct ZeusWorkloadDefaults {
  std::string name;                // "dataset/network"
  std::string training_optimizer;  // "adamw"
  double target_metric = 0.0;
  bool higher_is_better = true;
  int max_epochs = 0;
  int default_batch_size = 0;
};

// The six workloads of the paper (../shared/data/README.md), in the anchor table's order.
[[nodiscard]] const std::vector<ZeusWorkloadDefaults>& zeus_workloads();
// By name ("librispeech/deepspeech2"); Error(usage) listing the known names otherwise.
[[nodiscard]] const ZeusWorkloadDefaults& zeus_workload(const std::string& name);

struct ZeusWorkloadOverrides {
  std::optional<std::string> training_optimizer;
  std::optional<double> target_metric;
  std::optional<bool> higher_is_better;
  std::optional<int> max_epochs;
  std::optional<int> default_batch_size;
};

// Reads both files and keeps the rows of one workload. A workload name that is not among the
// defaults needs every override. Errors: Error(io) for an unreadable file, Error(invalid_data)
// "FILE:LINE: ..." for a malformed row or a missing column, Error(usage) for a workload with no
// rows in the trace or a default batch size outside it. The GPU name is taken from the power
// trace's file name (summary_power_<gpu>.csv), else "gpu".
[[nodiscard]] bso::TraceWorkload load_zeus_workload(const std::string& train_csv, const std::string& power_csv,
                                                    const std::string& workload,
                                                    const ZeusWorkloadOverrides& overrides = {});

}  // namespace gpucap::bench
