#pragma once
// The scheduler tests' step models and helpers (simulator_test.cpp, stream_sharing_test.cpp).

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpucap/sched/simulator.hpp"

namespace gpucap::sched::test {

// "train": 1 ms of host work, then 10 kernels of 5 ms; "infer": 0.5 ms host, 4 kernels of 1 ms;
// "pure": 10 kernels of 5 ms and no host work. Training jobs keep two kernels launched (window 2),
// inference launches all at once; launches take no time. GPU "slow" runs kernels 1.5× longer, the
// CPU 12×.
class HandModel final : public StepModel {
 public:
  StepProfile step(const JobSpec& job, const DeviceInfo& device, std::int64_t) const override {
    StepProfile p;
    const double scale = device.kind == DeviceKind::cpu ? 12.0 : device.id == "slow" ? 1.5 : 1.0;
    if (job.model == "rnn") {  // 4 decode steps of 5 kernels, the host waiting after each
      p.kernels_s.assign(20, 0.0001 * scale);
      p.sync_every = 5;
      p.busy_power_w = 120.0;
    } else if (job.model == "infer") {
      p.host_s = 0.0005;
      p.kernels_s.assign(4, 0.001 * scale);
      p.busy_power_w = 150.0;
      p.persistent_bytes = 1e8;
      p.activation_bytes = 1e8;
    } else {
      p.host_s = job.model == "pure" ? 0.0 : 0.001;
      p.kernels_s.assign(10, 0.005 * scale);
      p.launch_window = 2;
      p.busy_power_w = 200.0;
      p.persistent_bytes = 1e9;
      p.activation_bytes = 2e9;
      p.state_bytes = 1e9;
      p.state_variables = 100;
    }
    return p;
  }
  double transfer_s(const JobSpec&, const DeviceInfo&, const DeviceInfo&) const override { return 0.01 + 1e9 / 10e9; }
  double host_slowdown_with_cpu_jobs(const DeviceInfo& /*cpu*/, int /*jobs*/) const override { return 0.5; }
  double process_overhead_bytes(const DeviceInfo&) const override { return 0.5e9; }
  double mps_capacity() const override { return 1.4; }
};

inline DeviceInfo gpu(const std::string& id = "fast", double memory = 11e9) { return {id, DeviceKind::gpu, memory, 50.0, 250.0}; }
inline DeviceInfo cpu() { return {"cpu", DeviceKind::cpu, 0.0, 100.0, 300.0}; }

inline ShareScenario scenario(Policy policy, std::vector<std::string> jobs, std::optional<DeviceInfo> lpu = std::nullopt) {
  ShareScenario s;
  s.gpu = gpu();
  s.lpu = std::move(lpu);
  s.policy = policy;
  for (const auto& text : jobs) s.jobs.push_back(parse_job_spec(text));
  return s;
}

inline const JobOutcome& job(const ShareResult& r, const std::string& name) {
  for (const auto& j : r.jobs) {
    if (j.name == name) return j;
  }
  throw std::runtime_error("no job " + name);
}

inline const HandModel model;
inline constexpr double eps = 1e-9;

// A step model for one test: `profile` answers every step of a job; no transfers, no host
// slowdown, no process overhead, no MPS gain; `pipelines_at_once` as StepModel's.
class ScriptedModel final : public StepModel {
 public:
  explicit ScriptedModel(std::function<StepProfile(const JobSpec&)> profile, double pipelines_at_once = 0.0, int queue_depth = 0)
      : profile_(std::move(profile)), pipelines_at_once_(pipelines_at_once), queue_depth_(queue_depth) {}
  StepProfile step(const JobSpec& job, const DeviceInfo&, std::int64_t) const override { return profile_(job); }
  double transfer_s(const JobSpec&, const DeviceInfo&, const DeviceInfo&) const override { return 0; }
  double host_slowdown_with_cpu_jobs(const DeviceInfo& /*cpu*/, int /*jobs*/) const override { return 0; }
  double process_overhead_bytes(const DeviceInfo&) const override { return 0; }
  double mps_capacity() const override { return 1; }
  double input_pipelines_at_once() const override { return pipelines_at_once_; }
  int stream_queue_depth() const override { return queue_depth_; }

 private:
  std::function<StepProfile(const JobSpec&)> profile_;
  double pipelines_at_once_;
  int queue_depth_;
};

}  // namespace gpucap::sched::test
