// The discrete-event scheduler of `gpucap share` (sched/simulator.hpp): the policies' names, the
// figures of a result, and the entry point. The simulation itself is in simulation.hpp and
// simulation_{jobs,devices}.cpp. Every decision is taken at an event (an arrival, the end of a
// host stage, of a kernel, of a state transfer, of a shared device's work), so a run is exactly
// reproducible: ties are broken by the order the events were scheduled in.

#include "gpucap/sched/simulator.hpp"

#include "gpucap/sched/stream_chain.hpp"

#include "simulation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpucap/core/error.hpp"

namespace gpucap::sched {

const char* to_string(Policy policy) {
  switch (policy) {
    case Policy::switchflow: return "switchflow";
    case Policy::threads: return "threads";
    case Policy::timeslice: return "timeslice";
    case Policy::mps: return "mps";
  }
  return "?";
}

std::vector<Policy> all_policies() { return {Policy::switchflow, Policy::threads, Policy::timeslice, Policy::mps}; }

Policy parse_policy(const std::string& name) {
  for (const auto policy : all_policies()) {
    if (name == to_string(policy)) return policy;
  }
  throw usage_error(fmt::format("--policy '{}': expected switchflow, threads, timeslice or mps", name));
}

double StepModel::input_pipelines_at_once() const { return 0.0; }

int StepModel::stream_queue_depth() const { return 0; }

std::vector<double> StepModel::clock_levels_mhz(const DeviceInfo& /*device*/) const { return {}; }

ClockScaling StepModel::clock_scaling(const DeviceInfo& /*device*/, Mode /*mode*/, double /*clock_mhz*/) const { return {}; }

double StepProfile::device_s(double kernel_time_scale) const {
  std::vector<double> kernels = kernels_s;
  for (auto& k : kernels) k *= kernel_time_scale;
  return stream_chain_s(kernels, launch_s, sync_every, launch_window);
}

CapFigures cap_figures(const ShareScenario& scenario, const ShareResult& result) {
  CapFigures f;
  if (!scenario.cap) return f;
  for (const auto& w : result.windows) {
    if (w.cap_w <= 0.0) continue;
    ++f.windows;
    if (w.mean_power_w <= w.cap_w) continue;
    ++f.over;
    f.max_over_w = std::max(f.max_over_w, w.mean_power_w - w.cap_w);
    bool after_step = false;
    for (const auto& step : scenario.cap->steps()) {
      if (step.time_s <= 0.0) continue;
      const bool straddles = w.start_s < step.time_s && w.end_s > step.time_s;
      const bool next = w.start_s >= step.time_s - 1e-9 && w.start_s < step.time_s + scenario.window_s - 1e-9;
      after_step = after_step || straddles || next;
    }
    if (!after_step) ++f.over_outside_steps;
  }
  return f;
}

std::optional<double> slo_attainment(const JobSpec& spec, const JobOutcome& job) {
  const auto& record = job.latencies;
  if (!spec.slo_ms || record.count() == 0) return std::nullopt;
  std::int64_t on_time = 0;
  if (record.slo_ms() == spec.slo_ms) {
    on_time = record.within_slo();
  } else if (record.exact()) {
    on_time = std::count_if(record.samples().begin(), record.samples().end(), [&](double s) { return s * 1e3 <= *spec.slo_ms; });
  } else {
    throw Error(ErrorCode::internal, fmt::format("job {}: its latencies were not counted against slo_ms={}", spec.name, *spec.slo_ms));
  }
  return static_cast<double>(on_time) / static_cast<double>(record.count());
}

double nearest_rank_percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  return values[std::clamp<std::size_t>(rank, 1, values.size()) - 1];
}

namespace {

void check_scenario(const ShareScenario& s) {
  check_jobs(s.jobs);
  if (s.gpu.kind != DeviceKind::gpu) throw usage_error(fmt::format("--gpu {} is not a GPU", s.gpu.id));
  if (s.lpu && s.lpu->id == s.gpu.id) {
    throw usage_error(fmt::format("--lpu {} is the shared GPU itself: give another GPU, or cpu", s.lpu->id));
  }
  if (!(s.max_time_s > 0.0)) throw usage_error("the time limit must be > 0");
}

}  // namespace

ShareResult simulate_share(const ShareScenario& scenario, const StepModel& model) {
  check_scenario(scenario);
  return detail::Simulation(scenario, model).run();
}

}  // namespace gpucap::sched
