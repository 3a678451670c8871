#pragma once
// The GPUs, models and datasets the twin knows, loaded from a data directory:
//   DIR/gpus/*.json, DIR/models/*.json, DIR/datasets/*.json (one object per file).

#include <string>
#include <string_view>
#include <vector>

#include "gpucap/sim/specs.hpp"

namespace gpucap::sim {

class Catalog {
 public:
  // Loads and validates every file; throws Error(invalid_data) naming the file (and line for
  // JSON syntax errors) or Error(io) if the directory cannot be read.
  [[nodiscard]] static Catalog load(const std::string& data_dir);
  // A catalogue of specs already in memory (a calibration's fitted twin); Error(invalid_data) for
  // two specs with one name. `data_dir` is where the rest of the data (matrices, ...) lives.
  [[nodiscard]] static Catalog of(std::string data_dir, std::vector<GpuSpec> gpus, std::vector<ModelSpec> models,
                                  std::vector<DatasetSpec> datasets);

  // Lookup by id or alias, ignoring case and punctuation. Throws Error(usage) listing the
  // known names when there is no match.
  [[nodiscard]] const GpuSpec& gpu(std::string_view name) const;
  [[nodiscard]] const ModelSpec& model(std::string_view name) const;
  [[nodiscard]] const DatasetSpec& dataset(std::string_view name) const;

  [[nodiscard]] const std::vector<GpuSpec>& gpus() const { return gpus_; }
  [[nodiscard]] const std::vector<ModelSpec>& models() const { return models_; }
  [[nodiscard]] const std::vector<DatasetSpec>& datasets() const { return datasets_; }
  [[nodiscard]] const std::string& data_dir() const { return data_dir_; }

 private:
  std::string data_dir_;
  std::vector<GpuSpec> gpus_;
  std::vector<ModelSpec> models_;
  std::vector<DatasetSpec> datasets_;
};

// Parsers for single files, exposed for tests and for tools that write these files.
// `count` levels spread evenly over the sorted supported clocks, snapped to supported ones (the
// default DVFS ladder of a GPU for which the seeds publish none; real GPUs get theirs this way).
[[nodiscard]] std::vector<double> spread_levels(const std::vector<double>& sorted_clocks, std::size_t count);

[[nodiscard]] GpuSpec load_gpu_spec(const std::string& path);
[[nodiscard]] ModelSpec load_model_spec(const std::string& path);
[[nodiscard]] DatasetSpec load_dataset_spec(const std::string& path);

}  // namespace gpucap::sim
