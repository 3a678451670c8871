#pragma once
// Offline search on a real GPU (any Platform): each configuration a tuner proposes runs as a
// fixed-configuration job — the knobs applied, the platform's settle time, a warm-up at the
// configuration, then the measurement — and every measured trial is written to a file at once,
// so that a search killed half-way resumes without measuring those configurations again.

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpucap/runtime/platform.hpp"
#include "gpucap/runtime/tuning.hpp"
#include "gpucap/tune/space.hpp"

namespace gpucap::runtime {

struct PlatformTrialOptions {
  double warmup_s = 2.0;   // at the configuration before measuring (PctoDL's profiler: 2 s)
  double measure_s = 3.0;  // the seeds' 3-s window
  // false: batch size only; the clocks stay with the GPU (an unprivileged search), and a point's
  // SM clock is only a label.
  bool lock_clocks = true;
  const std::atomic<bool>* stop = nullptr;  // set by a signal handler: the trial in flight is dropped
};

// What one fixed-configuration measurement found, with the clocks the GPU reported running at
// (the means of the measured windows' readings).
struct PlatformTrial {
  tune::TrialResult result;
  double sm_clock_mhz = 0.0;
  double memory_clock_mhz = 0.0;
};

// Length of the windows a trial is cut into: those starting after the warm-up are measured.
inline constexpr double kTrialWindowS = 0.5;

class PlatformTrialRunner {
 public:
  // Error(usage) for a warm-up outside 0..600 s or a measurement outside 0.1..3600 s.
  PlatformTrialRunner(Platform& platform, PlatformTrialOptions options);
  // Runs the point and measures it (every setting restored afterwards, as after any run).
  // Error(interrupted) if stopped: nothing of the trial is returned.
  [[nodiscard]] PlatformTrial measure(const tune::ConfigPoint& point);
  [[nodiscard]] const PlatformTrialOptions& options() const { return options_; }

 private:
  Platform& platform_;
  PlatformTrialOptions options_;
};

// The measured trials of one setup, kept in a JSON file that `capfit --profile` also reads:
// {"setup": {...}, "trials": [{"batch_size", "sm_clock_mhz", "memory_clock_mhz",
// "throughput_img_s", "max_power_w", "mean_power_w", "cost_s", "measured_sm_clock_mhz",
// "measured_memory_clock_mhz"}, ...]}. Written durably after every trial.
struct TrialFileContents {
  nlohmann::json setup;  // null when the file has none
  std::vector<std::pair<tune::ConfigPoint, PlatformTrial>> trials;  // in the order they were measured
};
// Reads a trial file. Error(io) for a file that cannot be read, Error(invalid_data)
// "FILE: trials[i].FIELD: ..." for a malformed one.
[[nodiscard]] TrialFileContents read_trial_file(const std::string& path);

class TrialFile {
 public:
  // Loads `path` if it exists. Error(usage) if it holds the trials of another setup (any field of
  // `setup` differs: another model, GPU, precision, warm-up or measurement length), Error(io) or
  // Error(invalid_data) for a file that cannot be read.
  TrialFile(std::string path, nlohmann::json setup);
  [[nodiscard]] std::optional<PlatformTrial> find(const tune::ConfigPoint& point) const;
  // Adds the trial and rewrites the file (atomically: a kill leaves the old file or the new one).
  void add(const tune::ConfigPoint& point, const PlatformTrial& trial);
  [[nodiscard]] std::size_t size() const { return trials_.size(); }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
  nlohmann::json setup_;
  std::vector<std::pair<tune::ConfigPoint, PlatformTrial>> trials_;
};

// A trial's measurement through `runner`, answered from `file` (when given) where it holds the
// point, else measured and added to it; `on_trial` (optional) hears each answer and whether it
// was measured now.
using TrialListener = std::function<void(const tune::ConfigPoint&, const tune::TrialResult&, bool measured_now)>;
[[nodiscard]] MeasureFn cached_measure(PlatformTrialRunner& runner, TrialFile* file, TrialListener on_trial = {});

// What a real GPU measures before a capfit run: `batch_sizes` (default powers of two 1..256) ×
// five of the platform's clock levels spread over its range, or — without clock control — one
// SM clock, the GPU's highest, as the label of the clocks the GPU chooses.
[[nodiscard]] tune::SearchSpace real_profile_space(const control::PlatformLimits& limits, bool lock_clocks,
                                                   const std::optional<std::vector<int>>& batch_sizes);
// The default warm-up and measurement of those trials and of bobd's search before a real run.
inline constexpr double kPreRunWarmupS = 1.0;
inline constexpr double kPreRunMeasureS = 2.0;

}  // namespace gpucap::runtime
