#pragma once
// Offline search on a platform: measures the configurations a tuner proposes, each with a
// fixed-configuration run, and keeps the history.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "gpucap/control/tuned.hpp"
#include "gpucap/predict/profile_model.hpp"
#include "gpucap/sim/catalog.hpp"
#include "gpucap/tune/tuner.hpp"

namespace gpucap::runtime {

// The default space of a GPU: batch sizes 1..256 (BOBD's range, seed-systems.md §1.6) × the
// GPU's DVFS ladder × its memory clocks where it has more than one.
[[nodiscard]] tune::SearchSpace default_search_space(const sim::GpuSpec& gpu);

// The sparse grid a capfit profile measures: batch sizes about √2 apart (1, 2, 3, 4, 6, 8, 12,
// ..., 192, 256) × the GPU's DVFS ladder × its memory clocks where it has more than one —
// 16 × 10 = 160 measurements on a GPU with one memory clock.
[[nodiscard]] tune::SearchSpace default_profile_space(const sim::GpuSpec& gpu);

struct TrialOptions {
  double measure_s = 3.0;  // one measurement: the seeds' 3-s window (BOBD upstream measured 60 s)
  double sample_hz = 100.0;
  std::uint64_t seed = 1;
};

// Measures one configuration on a fresh twin: batches back to back at the fixed configuration
// for `measure_s` (to the first batch boundary after it), power sampled at `sample_hz`.
class SimTrialRunner {
 public:
  // Throws Error(usage) for unknown names, a clock the GPU does not support or bad options.
  SimTrialRunner(const sim::Catalog& catalog, const std::string& gpu, const std::string& model,
                 const TrialOptions& options);
  // Throws Error(usage) if the GPU does not support the point's clocks.
  void check(const tune::ConfigPoint& point) const;
  // check(), then the measurement.
  [[nodiscard]] tune::TrialResult measure(const tune::ConfigPoint& point) const;
  // Any knobs (MPS tenants included), held for one measurement; the clocks must be supported.
  [[nodiscard]] tune::TrialResult measure_knobs(const Knobs& knobs) const;
  [[nodiscard]] const sim::GpuSpec& gpu() const { return gpu_; }

 private:
  const sim::GpuSpec& gpu_;
  const sim::ModelSpec& model_;
  TrialOptions options_;
};

// Measures every configuration of `space` (a profile for capfit).
[[nodiscard]] std::vector<predict::ProfileSample> measure_profile(const SimTrialRunner& runner,
                                                                  const tune::SearchSpace& space);
[[nodiscard]] std::vector<predict::ProfileSample> profile_samples(const std::vector<tune::Trial>& trials);

struct TuneOutcome {
  std::vector<tune::Trial> trials;     // in the order they were measured
  std::optional<tune::Trial> best;     // the best feasible one; nullopt if none was feasible
  double cost_s = 0.0;                 // the measurements' total time
};

using MeasureFn = std::function<tune::TrialResult(const tune::ConfigPoint&)>;
// Called after each trial with the trials so far and the best feasible one so far.
using TrialSink = std::function<void(const std::vector<tune::Trial>&, const std::optional<tune::Trial>&)>;

// How long the oracle re-measures a candidate: ten of the seeds' 3-s windows.
inline constexpr double kOracleVerifySeconds = 30.0;
inline constexpr std::size_t kOracleMaxVerifications = 512;

// The oracle's pick under `cap_w` from a measured grid: the configurations feasible in their grid
// measurement, best first, each re-measured by `verify` (a longer run); the first whose highest
// sample still stays at or under the cap, with the longer measurement as its result. One 3-s
// window under the cap can be luck — sensor noise puts the next window above it — and a
// steady-state optimum must stay under the cap. nullopt if none of the first `max_checks` does.
[[nodiscard]] std::optional<tune::Trial> verified_best(const std::vector<tune::Trial>& grid, double cap_w,
                                                       const MeasureFn& verify,
                                                       std::size_t max_checks = kOracleMaxVerifications);

// Asks the tuner until it is done or `budget` trials were measured (0: no budget).
[[nodiscard]] TuneOutcome run_tuner(tune::Tuner& tuner, const MeasureFn& measure, double cap_w, std::size_t budget,
                                    const TrialSink& on_trial = {});

// The knobs that hold a configuration: one tenant, its batch size and clocks.
[[nodiscard]] Knobs knobs_for(const tune::ConfigPoint& point);

// One offline search for one cap.
struct CapSearch {
  double cap_w = 0.0;
  TuneOutcome outcome;
};

// Runs the tuner `tuner` (tune::make_tuner) once for each cap, each with at most `budget`
// measurements (0: the tuner's default budget, tune::tuner_info); `seed` drives what the tuner
// randomises. Throws Error(usage) for an unknown tuner, an invalid space or cap.
[[nodiscard]] std::vector<CapSearch> search_each_cap(std::string_view tuner, const tune::SearchSpace& space,
                                                     const std::vector<double>& caps, const MeasureFn& measure,
                                                     std::size_t budget, std::uint64_t seed);

// What the bobd controller runs from: each cap's best feasible configuration; where none of a
// search's measurements was feasible, the one with the lowest window-max power (the closest the
// search came: that run will exceed its cap). Empty searches are left out.
[[nodiscard]] control::CapTable cap_table(const std::vector<CapSearch>& searches);

}  // namespace gpucap::runtime
