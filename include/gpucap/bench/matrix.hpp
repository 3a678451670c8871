#pragma once
// Task matrices (data/matrices/*.json): the seeds' job lists with their caps, as data.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "gpucap/control/registry.hpp"
#include "gpucap/core/cap_schedule.hpp"

namespace gpucap::bench {

struct MatrixJob {
  std::string id;
  std::string model;
  std::string dataset;
  CapSchedule schedule = CapSchedule::constant(1.0);
  long long images = 0;     // 0: the dataset's size (or no limit when duration_s is set)
  double duration_s = 0.0;  // 0: until the images are done
  std::string note;
  // Controller options of the job (e.g. the band of BatchDVFS's sensitivity runs), applied to
  // every algorithm that runs it.
  control::ControllerOptions controller;
};

// Multi-tenant runs (NVIDIA MPS): the oracle also searches every partition of at most
// `oracle_max_tenants` tenants, and morak runs fixed shares, as PctoDL's benchmark configs do.
struct MatrixMps {
  std::size_t oracle_max_tenants = 3;
  std::vector<double> morak_shares_pct = {40.0, 40.0};
};

struct Matrix {
  std::string id;
  std::string description;
  std::string gpu;
  std::vector<MatrixJob> jobs;
  std::optional<MatrixMps> mps;  // nullopt: single-tenant jobs only
};

// Throws Error(io)/Error(invalid_data) naming the file (and the job) on any problem.
[[nodiscard]] Matrix load_matrix(const std::string& path);

// A matrix by name (DATA_DIR/matrices/NAME.json) or by path (anything ending in .json).
[[nodiscard]] std::string matrix_path(const std::string& data_dir, const std::string& name_or_path);

}  // namespace gpucap::bench
