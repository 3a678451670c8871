#pragma once
// The GPU half of an exporter: reads a set of Devices into a MetricsRegistry under dcgm-exporter's
// names (gpu_metrics.hpp), with energy from a Monitor (the GPU's counter, or its power integrated
// between readings). `gpucap monitor --listen` publishes at each scrape; a run publishes at each
// of its windows, from the thread that owns the device.

#include <vector>

#include "gpucap/monitor/gpu_metrics.hpp"
#include "gpucap/monitor/monitor.hpp"

namespace gpucap::monitor {

class GpuExporter {
 public:
  // `gpus[i]` names `devices[i]` (Error(internal) when the counts differ). The registry is not
  // owned and must outlive the exporter.
  GpuExporter(MetricsRegistry& registry, std::vector<device::Device*> devices, std::vector<GpuIdentity> gpus,
              SecondsClock clock);
  // Reads every GPU and sets its series.
  void publish();
  // The same for one GPU exporter, with the power a sampler just took in place of a fresh reading
  // (a run exports the power its own sampler sees). Error(internal) with several GPUs.
  void publish_with_power(double power_w);
  // Brings integrated energy up to now without publishing (between scrapes, for GPUs without a
  // counter).
  void sample() { monitor_.sample(); }
  [[nodiscard]] bool integrates_power() const;

 private:
  MetricsRegistry& registry_;
  std::vector<GpuIdentity> gpus_;
  Monitor monitor_;
};

}  // namespace gpucap::monitor
