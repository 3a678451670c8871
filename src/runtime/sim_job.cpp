#include "gpucap/runtime/sim_job.hpp"

#include "gpucap/runtime/mps_planning.hpp"

#include <fmt/format.h>

#include <cmath>

#include "gpucap/runtime/tuning.hpp"
#include "gpucap/sim/noise.hpp"
#include "gpucap/sim/perf_model.hpp"

#include "gpucap/core/error.hpp"

namespace gpucap::runtime {

double lowest_loaded_power_w(const sim::GpuSpec& gpu) {
  return sim::idle_loaded_power_w(gpu, {gpu.min_sm_clock_mhz(), gpu.memory_clocks_mhz.front()});
}

void check_cap_schedule(const CapSchedule& schedule, const sim::GpuSpec& gpu) {
  // Below the idle power with a model loaded at the lowest clocks no controller can meet the cap.
  schedule.check_range(std::round(lowest_loaded_power_w(gpu) * 10.0) / 10.0, gpu.power_limit_max_w,
                       fmt::format("what the {} can draw with a model loaded (idle at its lowest clocks to its "
                                   "maximum power limit)",
                                   gpu.name));
}

namespace {

SimTrialRunner trial_runner(const sim::Catalog& catalog, const std::string& gpu, const std::string& model,
                            double sample_hz, std::uint64_t seed) {
  TrialOptions options;
  options.sample_hz = sample_hz;
  options.seed = seed;
  return SimTrialRunner(catalog, gpu, model, options);
}

}  // namespace

std::shared_ptr<const predict::ProfileModel> measure_default_profile(const sim::Catalog& catalog,
                                                                    const std::string& gpu, const std::string& model,
                                                                    double sample_hz, std::uint64_t seed) {
  const auto runner = trial_runner(catalog, gpu, model, sample_hz, seed);
  return std::make_shared<const predict::ProfileModel>(measure_profile(runner, default_profile_space(runner.gpu())));
}

std::shared_ptr<const control::MpsPlanning> fitted_planning_on_twin(const sim::Catalog& catalog,
                                                                    const std::string& gpu, const std::string& model,
                                                                    double sample_hz, std::uint64_t seed) {
  const auto runner = trial_runner(catalog, gpu, model, sample_hz, seed);
  return fitted_planning(runner.gpu().sm_clocks_mhz, fit_predictor_on_twin(runner, runner.gpu(), catalog.model(model)));
}

std::vector<CapSearch> search_caps_on_twin(const sim::Catalog& catalog, const std::string& gpu,
                                           const std::string& model, const std::vector<double>& caps,
                                           double sample_hz, std::uint64_t seed, std::size_t budget) {
  TrialOptions options;
  options.sample_hz = sample_hz;
  options.seed = sim::derive_seed(seed, kSearchSeedStream);
  const SimTrialRunner runner(catalog, gpu, model, options);
  return search_each_cap("bobd", default_search_space(runner.gpu()), caps,
                         [&runner](const tune::ConfigPoint& p) { return runner.measure(p); }, budget, seed);
}

SimJob::SimJob(const sim::Catalog& catalog, const SimJobSpec& spec) {
  const auto& gpu = catalog.gpu(spec.gpu);
  const auto& model = catalog.model(spec.model);
  const auto& dataset = catalog.dataset(spec.dataset);
  if (model.training_only()) {
    throw usage_error(fmt::format("{} is a training workload of Zeus's traces: the twin models its training step only, "
                                  "not inference (see the inference models in 'gpucap list models')",
                                  model.id));
  }
  check_cap_schedule(spec.schedule, gpu);
  check_run_limits(spec.images > 0 ? spec.images : (spec.duration_s > 0.0 ? 0 : dataset.images), spec.duration_s);
  auto options = spec.sim;
  options.pipeline =
      sim::InputPipeline{spec.pipeline, sim::host_seconds_per_image(dataset, model), dataset.host_s_per_batch};
  if (spec.pipeline != sim::PipelineMode::none && options.pipeline.seconds_per_image <= 0.0) {
    throw usage_error(fmt::format("dataset {} has no host decode cost (host_s_per_image) for an input pipeline",
                                  dataset.id));
  }
  if (options.spawned_nvidia_smi && control::needs_mps_planning(spec.algorithm)) {
    throw usage_error(fmt::format("the spawned nvidia-smi sampler is the BatchDVFS harness's, one process at 100 %; {} "
                                  "runs MPS tenants",
                                  spec.algorithm));
  }
  if (const auto mhz = options.governor_sm_clock_mhz) {
    if (!(*mhz >= gpu.min_sm_clock_mhz() && *mhz <= gpu.max_sm_clock_mhz())) {
      throw usage_error(fmt::format("governor SM clock {:g} MHz is outside {}'s {:g}-{:g} MHz", *mhz, gpu.id,
                                    gpu.min_sm_clock_mhz(), gpu.max_sm_clock_mhz()));
    }
    if (control::needs_mps_planning(spec.algorithm)) {
      throw usage_error(fmt::format("a governor SM clock applies to one process; {} runs MPS tenants", spec.algorithm));
    }
  }
  platform_ = std::make_unique<SimPlatform>(gpu, model, spec.precision.value_or(model.precision), options);
  auto controller_options = spec.controller;
  if (control::needs_profile(spec.algorithm) && !controller_options.profile) {
    controller_options.profile = measure_default_profile(catalog, spec.gpu, spec.model, spec.sim.sample_hz,
                                                         sim::derive_seed(spec.sim.seed, kProfileSeedStream));
  }
  if (control::needs_offline_search(spec.algorithm) && !controller_options.tuned_table) {
    // The options are checked before the search, which takes a while.
    auto check = controller_options;
    check.tuned_table = std::make_shared<const control::CapTable>(
        control::CapTable{control::TunedEntry{spec.schedule.min_cap_w(), single_tenant_knobs(1)}});
    (void)control::make_controller(spec.algorithm, check, platform_->controller_limits());
    controller_options.tuned_table = std::make_shared<const control::CapTable>(
        cap_table(search_caps_on_twin(catalog, spec.gpu, spec.model, spec.schedule.distinct_caps(), spec.sim.sample_hz,
                                      spec.sim.seed, spec.search_budget)));
  }
  if (control::plans_with_fitted_predictor(spec.algorithm) && !controller_options.mps_planning) {
    controller_options.mps_planning = fitted_planning_on_twin(catalog, spec.gpu, spec.model, spec.sim.sample_hz,
                                                              sim::derive_seed(spec.sim.seed, kProfileSeedStream));
  }
  if (control::needs_mps_planning(spec.algorithm) && !controller_options.mps_planning) {
    if (spec.pctodl_params_dir.empty()) {
      throw usage_error(fmt::format("{} plans with PctoDL's predictor: give its parameter folder (--params)",
                                    spec.algorithm));
    }
    controller_options.mps_planning = pctodl_planning(catalog, gpu, model, spec.pctodl_params_dir);
  }
  controller_ = control::make_controller(spec.algorithm, controller_options, platform_->controller_limits());
  config_.images = spec.images > 0 ? spec.images : (spec.duration_s > 0.0 ? 0 : dataset.images);
  config_.duration_s = spec.duration_s;
  config_.schedule = spec.schedule;
  config_.live_cap = spec.live_cap;
  // That harness slept 1 s before logging a step whose sample list was still empty.
  if (options.spawned_nvidia_smi) config_.wait_without_sample_s = kSpawnedSamplerWaitS;
}

RunSummary SimJob::run(const TraceSink& sink, const std::atomic<bool>* stop, const PowerSampleSink& on_power_sample) {
  auto config = config_;
  config.stop = stop;
  config.on_power_sample = on_power_sample;
  return run_job(*platform_, *controller_, config, sink);
}

}  // namespace gpucap::runtime
