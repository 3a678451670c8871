#include "gpucap/runtime/sim_job.hpp"

#include <fmt/format.h>

#include "gpucap/core/error.hpp"

namespace gpucap::runtime {

void check_cap_schedule(const CapSchedule& schedule, const sim::GpuSpec& gpu) {
  schedule.check_range(gpu.idle_power_w, gpu.power_limit_max_w,
                       fmt::format("what the {} can draw (idle power to maximum power limit)", gpu.name));
}

SimJob::SimJob(const sim::Catalog& catalog, const SimJobSpec& spec) {
  const auto& gpu = catalog.gpu(spec.gpu);
  const auto& model = catalog.model(spec.model);
  const auto& dataset = catalog.dataset(spec.dataset);
  check_cap_schedule(spec.schedule, gpu);
  if (spec.images < 0) throw usage_error(fmt::format("image count {} must be >= 1", spec.images));
  if (spec.duration_s < 0.0) throw usage_error(fmt::format("duration {:g} s must be > 0", spec.duration_s));
  auto options = spec.sim;
  options.pipeline = sim::InputPipeline{spec.pipeline, sim::host_seconds_per_image(dataset, model)};
  if (spec.pipeline != sim::PipelineMode::none && options.pipeline.seconds_per_image <= 0.0) {
    throw usage_error(fmt::format("dataset {} has no host decode cost (host_s_per_image) for an input pipeline",
                                  dataset.id));
  }
  platform_ = std::make_unique<SimPlatform>(gpu, model, spec.precision.value_or(model.precision), options);
  controller_ = control::make_controller(spec.algorithm, spec.controller, platform_->controller_limits());
  config_.images = spec.images > 0 ? spec.images : (spec.duration_s > 0.0 ? 0 : dataset.images);
  config_.duration_s = spec.duration_s;
  config_.schedule = spec.schedule;
}

RunSummary SimJob::run(const TraceSink& sink) { return run_job(*platform_, *controller_, config_, sink); }

}  // namespace gpucap::runtime
