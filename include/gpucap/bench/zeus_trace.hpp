#pragma once
// Zeus's NSDI'23 traces (../shared/data/zeus/nsdi23/): summary_train.csv (the epoch at which each
// run of a batch size first reached a validation metric) and summary_power_<gpu>.csv (time per
// epoch and average power per batch size and power limit), read into the workloads that
// `gpucap bso simulate` runs. Any power trace in that format works, for any GPU.

#include <cstddef>
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

// One row of a power trace: a (workload, batch size, power limit) measured once.
struct ZeusPowerRow {
  std::string dataset;
  std::string network;
  std::string optimizer;
  int batch_size = 0;
  double power_limit_w = 0.0;
  double time_per_epoch_s = 0.0;
  double average_power_w = 0.0;
  std::size_t line = 0;  // in the file, for messages
};

// Every row of summary_power_<gpu>.csv (any column order). Error(io) for an unreadable file,
// Error(invalid_data) "FILE:LINE: ..." for a missing column, a malformed or non-positive number,
// or a file without rows.
[[nodiscard]] std::vector<ZeusPowerRow> load_zeus_power_rows(const std::string& power_csv);
// DIR/summary_power_<gpu>.csv: where a folder of traces keeps the GPU's.
[[nodiscard]] std::string zeus_power_trace_path(const std::string& traces_dir, const std::string& gpu);
// The GPU a power trace was measured on, from its file name (summary_power_<gpu>.csv), else "gpu".
[[nodiscard]] std::string zeus_trace_gpu(const std::string& power_csv);

}  // namespace gpucap::bench
