#include "gpucap/monitor/gpu_exporter.hpp"

#include <algorithm>

#include "gpucap/core/error.hpp"

namespace gpucap::monitor {

GpuExporter::GpuExporter(MetricsRegistry& registry, std::vector<device::Device*> devices, std::vector<GpuIdentity> gpus,
                         SecondsClock clock)
    : registry_(registry), gpus_(std::move(gpus)), monitor_(std::move(devices), std::move(clock)) {
  if (gpus_.size() != monitor_.devices().size()) throw Error(ErrorCode::internal, "one identity per exported GPU");
  declare_dcgm_metrics(registry_);
}

void GpuExporter::publish() {
  const auto energy_j = monitor_.energy_since_start_j();
  const auto& devices = monitor_.devices();
  for (std::size_t i = 0; i < devices.size(); ++i) publish_dcgm(registry_, gpus_[i], read_gpu(*devices[i], energy_j[i]));
}

void GpuExporter::publish_with_power(double power_w) {
  const auto& devices = monitor_.devices();
  if (devices.size() != 1) throw Error(ErrorCode::internal, "publish_with_power exports one GPU");
  auto reading = read_gpu(*devices.front(), monitor_.energy_since_start_j().front());
  reading.power_w = power_w;
  publish_dcgm(registry_, gpus_.front(), reading);
}

bool GpuExporter::integrates_power() const {
  const auto sources = monitor_.sources();
  return std::find(sources.begin(), sources.end(), EnergySource::integrated) != sources.end();
}

}  // namespace gpucap::monitor
