#pragma once
// One job on the twin, from names: what `gpucap run` and `gpucap bench` share.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "gpucap/control/registry.hpp"
#include "gpucap/core/cap_schedule.hpp"
#include "gpucap/core/cap_timeline.hpp"
#include "gpucap/runtime/runner.hpp"
#include "gpucap/runtime/sim_platform.hpp"
#include "gpucap/runtime/tuning.hpp"
#include "gpucap/sim/catalog.hpp"

namespace gpucap::runtime {

struct SimJobSpec {
  std::string gpu;
  std::string model;
  std::string dataset;
  std::string algorithm;
  CapSchedule schedule = CapSchedule::constant(1.0);
  std::shared_ptr<const CapTimeline> live_cap;  // a cap changed while it runs (RunConfig::live_cap)
  long long images = 0;                    // 0: the dataset's size, or no limit if duration_s is set
  double duration_s = 0.0;                 // 0: no time limit
  std::optional<sim::Precision> precision; // default: the model's
  sim::PipelineMode pipeline = sim::PipelineMode::none;  // host-side decode cost from the dataset
  control::ControllerOptions controller;
  std::size_t search_budget = 0;           // bobd: measurements per cap (0: BOBD's default, 50)
  std::string pctodl_params_dir;           // pctodl, directcap: PctoDL's fits (predict/pctodl.hpp)
  SimOptions sim;
};

// How long the BatchDVFS harness slept before logging a step with no power sample yet.
inline constexpr double kSpawnedSamplerWaitS = 1.0;

// The least the twin draws with a model loaded: idle at its lowest SM and memory clocks.
[[nodiscard]] double lowest_loaded_power_w(const sim::GpuSpec& gpu);

// Checks that every cap lies between lowest_loaded_power_w() (rounded to 0.1 W) and the highest
// board power limit; Error(usage).
void check_cap_schedule(const CapSchedule& schedule, const sim::GpuSpec& gpu);

// The seed stream of the twin that measures a default profile.
inline constexpr std::uint64_t kProfileSeedStream = 0x9f0f11e;

// Measures the default profile (default_profile_space, 3-s measurements) of a model on the twin.
// `seed` should differ from the runs' (derive it with kProfileSeedStream): a profile is taken
// once, before the runs it serves, and does not share their noise.
[[nodiscard]] std::shared_ptr<const predict::ProfileModel> measure_default_profile(const sim::Catalog& catalog,
                                                                                   const std::string& gpu,
                                                                                   const std::string& model,
                                                                                   double sample_hz,
                                                                                   std::uint64_t seed);

// mpsfit's planning on the twin: PctoDL's profiling matrix measured on the twin, gpucap's
// predictor fitted to it, and the local-search partitioner on that predictor
// (runtime/mps_planning.hpp). `seed` as for measure_default_profile.
[[nodiscard]] std::shared_ptr<const control::MpsPlanning> fitted_planning_on_twin(const sim::Catalog& catalog,
                                                                                 const std::string& gpu,
                                                                                 const std::string& model,
                                                                                 double sample_hz, std::uint64_t seed);

// The seed stream of the twin that measures an offline search's configurations (bobd).
inline constexpr std::uint64_t kSearchSeedStream = 0x5ea4c4;

// BOBD's search of the default space (default_search_space) for each cap, on the twin, with 3-s
// measurements: what bobd runs from when nobody gave it a table. `seed` drives BOBD's initial
// design; the twin's noise comes from kSearchSeedStream, apart from the runs' (as a profile's).
[[nodiscard]] std::vector<CapSearch> search_caps_on_twin(const sim::Catalog& catalog, const std::string& gpu,
                                                         const std::string& model, const std::vector<double>& caps,
                                                         double sample_hz, std::uint64_t seed, std::size_t budget);

class SimJob {
 public:
  // Validates everything (names, caps, options) and builds the twin and the controller;
  // throws Error(usage) before anything runs.
  SimJob(const sim::Catalog& catalog, const SimJobSpec& spec);
  // `stop`: see RunConfig::stop.
  RunSummary run(const TraceSink& sink = {}, const std::atomic<bool>* stop = nullptr,
                 const PowerSampleSink& on_power_sample = {});
  // The twin's platform: its device is what exporters read (from the run's thread, in its sink).
  [[nodiscard]] SimPlatform& platform() { return *platform_; }

 private:
  std::unique_ptr<SimPlatform> platform_;
  std::unique_ptr<control::Controller> controller_;
  RunConfig config_;
};

}  // namespace gpucap::runtime
