#pragma once
// What the scheduler needs to know about a job's step on a device, whoever answers: the twin
// (sim/share_twin.hpp, calibrated on SwitchFlow's figures) or measurements of a real engine.

#include <cstdint>
#include <string>
#include <vector>

#include "gpucap/sched/job.hpp"

namespace gpucap::sched {

enum class DeviceKind { gpu, cpu };

struct DeviceInfo {
  std::string id;              // "rtx2080ti", "gtx1080ti", "cpu", ...
  DeviceKind kind = DeviceKind::gpu;
  double memory_bytes = 0.0;   // what a framework can allocate on it (ignored for the CPU)
  double idle_power_w = 0.0;   // with a context open and nothing running
  double max_power_w = 0.0;    // the most it draws (board power limit, or the CPU sockets' TDP)
};

// One step (a training step, or one inference batch) of a job on one device.
struct StepProfile {
  // The CPU stage: input preparation on the host before the device stage can start.
  double host_s = 0.0;
  bool input_pipeline = false;  // the host stage is a multi-threaded input pipeline (JPEG decoding)
  // The device stage in launch order. On a GPU, its kernels; on the CPU, chunks of the same work
  // (a preemption waits for the chunk in flight, as it waits for a kernel).
  std::vector<double> kernels_s;
  // How the framework feeds a GPU's one stream: it launches the step's kernels one every launch_s
  // (host dispatch per op), keeping at most launch_window of them queued or running (0: no limit
  // of its own; the stream's launch queue, StepModel::stream_queue_depth, still bounds it), and
  // after every sync_every kernels (0: never) waits for the GPU to finish before launching more
  // (a while loop on the host, as in a recurrent decoder). Kernels already launched cannot be
  // recalled: a preemption waits for them to drain.
  double launch_s = 0.0;
  int launch_window = 0;
  int sync_every = 0;
  // Host work inside the device stage, after its kernels: the GPU idles but the step still holds
  // it (per-op dispatch gaps, the optimizer's host side, fetching results). Unlike the host stage,
  // no other job's input pipeline can stand in for it, and under an exclusive policy no other
  // job's kernels fill it.
  double device_gap_s = 0.0;
  double busy_power_w = 0.0;   // device power while this job's kernels run
  double persistent_bytes = 0.0;  // weights, plus optimizer slots when training: live all the job long
  double activation_bytes = 0.0;  // working memory of one step at its peak
  double state_bytes = 0.0;       // what a migration moves (the persistent variables)
  int state_variables = 0;        // how many tensors that is

  // The device stage alone, with every kernel taking kernel_time_scale times as long (a clock
  // other than the GPU's own): its launches, launch window, sync points and kernels as the
  // simulator runs them on a stream of its own (stream_chain.hpp).
  [[nodiscard]] double device_s(double kernel_time_scale = 1.0) const;
};

// What a GPU clock other than the GPU's own does to a job's kernels: their time, and the part of
// their power above idle, as multiples of the values at the GPU's own clock.
struct ClockScaling {
  double time = 1.0;
  double dynamic_power = 1.0;
};

class StepModel {
 public:
  virtual ~StepModel() = default;
  StepModel() = default;
  StepModel(const StepModel&) = delete;
  StepModel& operator=(const StepModel&) = delete;

  // Step `step` (0, 1, ...) of `job` on `device`. Deterministic in (job, device, step); kernel
  // durations may vary from step to step. Error(usage) for a model the device cannot run.
  [[nodiscard]] virtual StepProfile step(const JobSpec& job, const DeviceInfo& device, std::int64_t step) const = 0;
  // Seconds to move the job's persistent state from one device to another.
  [[nodiscard]] virtual double transfer_s(const JobSpec& job, const DeviceInfo& from, const DeviceInfo& to) const = 0;
  // How much slower the host (launches and input preparation) runs for a job while `jobs` other
  // jobs (at least 1) compute on CPU device `cpu`: 0 when that slows nothing. SwitchFlow Fig. 7(d).
  [[nodiscard]] virtual double host_slowdown_with_cpu_jobs(const DeviceInfo& cpu, int jobs) const = 0;
  // The memory a separate process (MPS) costs beyond what its job allocates: context, allocator.
  [[nodiscard]] virtual double process_overhead_bytes(const DeviceInfo& device) const = 0;
  // Under MPS, how many times one job's speed the GPU delivers to concurrent jobs in total
  // (kernels of different processes overlap): 1 = no gain over time slicing.
  [[nodiscard]] virtual double mps_capacity() const = 0;
  // How many input pipelines the host runs at full speed at once (0: as many as there are): with
  // n running, each takes max(1, n / this) times as long. SwitchFlow Fig. 10.
  [[nodiscard]] virtual double input_pipelines_at_once() const;
  // How many kernels a GPU stream's launch queue holds, queued and running (0: no limit). A
  // launch into a full queue blocks the launching host thread; blocked launches enter in the
  // order they blocked, whichever job they are of (docs/simulator.md, "Free sharing").
  [[nodiscard]] virtual int stream_queue_depth() const;
  // The SM clocks a controller may lock `device` at, ascending (empty: none; the default), and
  // what a clock does to a job's kernels (the default: nothing).
  [[nodiscard]] virtual std::vector<double> clock_levels_mhz(const DeviceInfo& device) const;
  [[nodiscard]] virtual ClockScaling clock_scaling(const DeviceInfo& device, Mode mode, double clock_mhz) const;
};

}  // namespace gpucap::sched
